// What the demo, the end-to-end suites and the benchmarks share: the reference
// control plane as a child process, its admin API, the released chart, and
// waiting for something to happen.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { kubectl } from './cluster.ts';
import { tempDir } from './temp.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const NODE = join(ROOT, 'node_modules/.bin/node');

export type ControlPlane = {
  url: string;
  caFile: string;
  adminToken: string;
  dataDir: string;
  proc: ChildProcess;
  logFile: string;
  stop: (signal?: NodeJS.Signals) => Promise<void>;
};

/** Starts `node controlplane/main.ts` (or `main`, a build of it) and resolves on its ready line. */
export async function startControlPlane(opts: { dataDir?: string; listen?: string; args?: string[]; main?: string; env?: Record<string, string> } = {}): Promise<ControlPlane> {
  const dataDir = opts.dataDir ?? tempDir('rlmesh-cp-');
  mkdirSync(dataDir, { recursive: true });
  const logFile = join(dataDir, 'controlplane.log');
  const proc = spawn(
    NODE,
    [opts.main ?? join(ROOT, 'controlplane/main.ts'), '--data-dir', dataDir, '--listen', opts.listen ?? '127.0.0.1:0', '--generate-tls', join(dataDir, 'tls'),
      '--tls-host', 'localhost', ...(opts.args ?? [])],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } },
  );
  stopWithUs(proc);
  const { createWriteStream } = await import('node:fs');
  proc.stderr!.pipe(createWriteStream(logFile, { flags: 'a' }));
  const line = await new Promise<string>((ok, fail) => {
    const rl = createInterface({ input: proc.stdout! });
    rl.once('line', ok);
    proc.once('exit', (code) => fail(new Error(`the control plane exited with ${code} before it was ready; see ${logFile}`)));
  });
  const ready = JSON.parse(line) as { url: string; caFile: string; adminToken: string };
  return {
    ...ready,
    dataDir,
    proc,
    logFile,
    stop: stopper(proc),
  };
}

export { api } from './api.ts';

/** The runtime chart as the test command's release published it (oci:// in the local registry). */
export { releasedChart } from './release.ts';

/** The runtime config the chart rendered, as the pods would read it from the ConfigMap. */
export function renderedRuntimeConfig(namespace = 'rlmesh-system'): string {
  return kubectl(['-n', namespace, 'get', 'configmap', 'rlmesh-runtime-config', '-o', 'jsonpath={.data.config\\.json}']).stdout;
}

// A benchmark stopped with Ctrl-C or SIGTERM takes its control planes with it: one left behind keeps
// 10.213.0.1:443, and the next run's fails to listen there (EADDRINUSE).
const children = new Set<ChildProcess>();
let listening = false;
function stopWithUs(proc: ChildProcess): void {
  if (!listening) {
    listening = true;
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        for (const c of children) c.kill('SIGKILL');
        process.kill(process.pid, signal); // the listener is gone: the default action ends the process
      });
    }
  }
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
}

/** Stops a child process with a signal and resolves once it has exited. */
export function stopper(proc: ChildProcess): (signal?: NodeJS.Signals) => Promise<void> {
  return (signal = 'SIGTERM') =>
    new Promise((ok) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return ok();
      proc.once('exit', () => ok());
      proc.kill(signal);
    });
}

export function writeTemp(name: string, content: string): string {
  const file = join(tempDir('rlmesh-'), name);
  writeFileSync(file, content, { mode: 0o600 });
  return file;
}
