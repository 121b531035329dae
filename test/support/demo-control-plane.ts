// The demo's reference control plane, which outlives the demo: the commands the demo prints at
// its end (rollout status among them) need the agent connected, so the control plane keeps
// running until `./demo stop`, `test/cluster/down`, or the integration tests' global setup (the
// tests need its port, 443 on the bridge's host address) stops it.
//
// It runs detached, in a process group of its own, writing its ready line and its log to files in
// its data folder, and its pid goes to the cluster's pids folder beside the cluster's own processes.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ControlPlane } from './runtime.ts';
import { until } from './until.ts';

// no import of runtime.ts: the integration tests' global setup loads this module outside any test file
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

const clusterDir = (): string => process.env.RLMESH_CLUSTER_DIR || join(homedir(), '.cache/rlmesh-cluster');
export const demoPidFile = (): string => join(clusterDir(), 'pids/demo-controlplane');

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
/** The pid of the demo's control plane, if that process still runs (a recycled pid is not it). */
function runningPid(): number | undefined {
  if (!existsSync(demoPidFile())) return undefined;
  const pid = Number(readFileSync(demoPidFile(), 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('controlplane/main.ts') ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Stops the demo's control plane if it runs; true when there was one. */
export async function stopDemoControlPlane(): Promise<boolean> {
  const pid = runningPid();
  rmSync(demoPidFile(), { force: true });
  if (pid === undefined) return false;
  const signal = (s: NodeJS.Signals) => {
    try {
      process.kill(-pid, s);
    } catch {
      try {
        process.kill(pid, s);
      } catch {
        // gone already
      }
    }
  };
  signal('SIGTERM');
  await until('the demo control plane to stop', () => !alive(pid), { timeoutMs: 10_000, intervalMs: 100 }).catch(() => signal('SIGKILL'));
  return true;
}

/** Starts `node controlplane/main.ts` detached from this process; resolves on its ready line. */
export async function startDemoControlPlane(opts: { dataDir: string; listen: string; args: string[] }): Promise<ControlPlane> {
  await stopDemoControlPlane();
  mkdirSync(opts.dataDir, { recursive: true });
  mkdirSync(join(clusterDir(), 'pids'), { recursive: true });
  const logFile = join(opts.dataDir, 'controlplane.log');
  const readyFile = join(opts.dataDir, 'ready.json');
  rmSync(readyFile, { force: true });
  const out = openSync(readyFile, 'w', 0o600);
  const err = openSync(logFile, 'a');
  const proc = spawn(
    join(ROOT, 'node_modules/.bin/node'),
    [join(ROOT, 'controlplane/main.ts'), '--data-dir', opts.dataDir, '--listen', opts.listen, '--generate-tls', join(opts.dataDir, 'tls'), '--tls-host', 'localhost', ...opts.args],
    { stdio: ['ignore', out, err], detached: true },
  );
  closeSync(out);
  closeSync(err);
  proc.unref();
  writeFileSync(demoPidFile(), `${proc.pid}\n`);
  const ready = await until('the control plane\'s ready line', () => {
    if (proc.exitCode !== null) throw new Error(`the control plane exited with ${proc.exitCode} before it was ready; see ${logFile}`);
    const line = readFileSync(readyFile, 'utf8');
    return line.endsWith('\n') ? (JSON.parse(line) as { url: string; caFile: string; adminToken: string }) : undefined;
  }, { timeoutMs: 60_000, intervalMs: 200 });
  return { ...ready, dataDir: opts.dataDir, proc, logFile, stop: async () => void (await stopDemoControlPlane()) };
}
