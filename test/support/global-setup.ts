// Integration tests run against the real local cluster: start it (idempotent)
// before any test file, and fail loudly if it cannot start.
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
  const kubeconfig = execFileSync(join(root, 'test/cluster/up'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim()
    .split('\n')
    .pop()!;
  process.env.KUBECONFIG = kubeconfig;
}
