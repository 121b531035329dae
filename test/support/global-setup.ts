// Integration tests run against the real local cluster: start it (idempotent)
// before any test file, and fail loudly if it cannot start. A control plane the
// demo left running holds the port the tests' control planes need: it is stopped.
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export default async function setup(): Promise<void> {
  const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
  const kubeconfig = execFileSync(join(root, 'test/cluster/up'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim()
    .split('\n')
    .pop()!;
  process.env.KUBECONFIG = kubeconfig;
  const { stopDemoControlPlane } = await import('./demo-control-plane.ts');
  if (await stopDemoControlPlane()) console.error('[setup] stopped the control plane ./demo left running: the tests need its port (443 on the bridge address)');
}
