// What the end-to-end and fault suites share: a control plane on localhost:443
// (the chart's agent dials the API on 443), the chart from the local OCI
// registry, the chart's Deployments brought to life as local processes, and
// evaluations submitted and followed through the control plane's API.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { helm, kubectl, run } from '../support/cluster.ts';
import { runDeployment } from '../support/run-deployment.ts';
import { api, releasedChart, ROOT, startControlPlane, until, type Component, type ControlPlane } from '../support/runtime.ts';

export const NS = 'rlmesh-system';
export const RUNS = 'rlmesh-runs';

export type Chart = { ref: string; version: string };

export async function controlPlane(chart: Chart, dataDir?: string): Promise<ControlPlane> {
  return startControlPlane({
    ...(dataDir ? { dataDir } : {}),
    listen: '127.0.0.1:443',
    args: ['--advertise-host', 'localhost', '--ping-interval', '2', '--silence-timeout', '20', '--chart-ref', chart.ref, '--chart-version', chart.version],
  });
}

/** Values a local run needs on top of the user's command: the local API host and its CA, plain-http OCI. */
export function localFlags(cp: ControlPlane): string[] {
  return ['--plain-http', '--set', 'controlPlane.apiHost=localhost', '--set-file', `controlPlane.caBundle=${cp.caFile}`, '--wait', '--timeout', '6m'];
}

/** Runs a command line the control plane printed (install command), with helm from the local build. */
export function runInstallCommand(cp: ControlPlane, command: string, stdin?: string): void {
  const r = run('bash', ['-c', `${command} ${localFlags(cp).map((a) => `'${a}'`).join(' ')}`], stdin === undefined ? {} : { input: stdin });
  if (r.status !== 0) throw new Error(`install command failed (${r.status}): ${r.stderr}\nwhat was not ready:\n${notReady()}`);
}

/** Pods, PVCs and Jobs of the runtime that are not (yet) what helm --wait waits for. */
export function notReady(): string {
  const r = kubectl(['get', 'pods,pvc,jobs', '-n', NS, '-o', 'wide'], { allowFail: true }).stdout + kubectl(['get', 'pods,pvc', '-n', RUNS, '-o', 'wide'], { allowFail: true }).stdout;
  return r.split('\n').filter((l) => !/Running|Bound|Completed|Succeeded|1\/1/.test(l)).join('\n');
}

/** Leaves no release, runs namespace, kept Secret or evaluation behind from an earlier test. */
export function cleanSlate(): void {
  helm(['uninstall', 'rlmesh', '-n', NS, '--wait'], { allowFail: true });
  kubectl(['delete', 'namespace', RUNS, '--ignore-not-found', '--timeout=120s'], { allowFail: true });
  kubectl(['-n', NS, 'delete', 'secrets,leases', '--all', '--ignore-not-found'], { allowFail: true });
}

export { releasedChart };

export class Runtime {
  components = new Map<string, Component>();

  async start(which: ('agent' | 'controller' | 'filler' | 'egress')[] = ['agent', 'controller', 'filler', 'egress']): Promise<void> {
    for (const w of which) await this.startOne(w);
  }

  async startOne(w: 'agent' | 'controller' | 'filler' | 'egress', replica = '0'): Promise<Component> {
    const where: Record<string, [string, string]> = {
      agent: [NS, 'rlmesh-cluster-agent'],
      controller: [NS, 'rlmesh-cluster-controller'],
      filler: [RUNS, 'rlmesh-artifact-cache-filler'],
      egress: [NS, 'rlmesh-egress-proxy'],
    };
    const [ns, name] = where[w]!;
    // every "pod" shares this host: the proxy listens on a free loopback port
    const extraArgs = w === 'egress' ? ['--listen', `127.0.0.1:${await freePort()}`, '--health-listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0'] : [];
    const c = await runDeployment(ns, name, { replica, extraArgs });
    this.components.set(`${w}/${replica}`, c);
    return c;
  }

  get(w: string, replica = '0'): Component {
    const c = this.components.get(`${w}/${replica}`);
    if (!c) throw new Error(`${w}/${replica} is not running`);
    return c;
  }

  log(w: string, replica = '0'): string {
    return readFileSync(this.get(w, replica).logFile, 'utf8');
  }

  async stop(w?: string, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    for (const [key, c] of this.components) {
      if (w && !key.startsWith(`${w}/`)) continue;
      await c.stop(signal);
      this.components.delete(key);
    }
  }
}

export type ClusterRow = { id: string; status: string; lastSeenAt: string | null };

export async function clusterRow(cp: ControlPlane, id: string): Promise<ClusterRow> {
  const r = await api<{ clusters: ClusterRow[] }>(cp, 'GET', '/v1/clusters');
  const row = r.body.clusters.find((c) => c.id === id);
  if (!row) throw new Error(`cluster ${id} is not listed by GET /v1/clusters`);
  return row;
}

export async function waitConnected(cp: ControlPlane, id: string, seconds = 60): Promise<ClusterRow> {
  return until(`cluster ${id} Connected`, async () => {
    const row = await clusterRow(cp, id);
    return row.status === 'Connected' ? row : undefined;
  }, seconds);
}

export type EvaluationView = {
  id: string;
  phase: string;
  updates: { id: string; phase: string; sequence?: string | number; message?: string; pod?: string; node?: string }[];
};

export const SMALL_EVALUATION = {
  image: `registry.rlmesh.dev/rlmesh/examples/echo-eval@sha256:${'ab'.repeat(32)}`,
  command: ['python', '-m', 'eval'],
  cpu: '100m',
  memory: '128Mi',
  deadlineSeconds: '600',
};

export async function submit(cp: ControlPlane, clusterId: string, spec: Record<string, unknown> = SMALL_EVALUATION): Promise<string> {
  const r = await api<{ id: string }>(cp, 'POST', `/v1/clusters/${clusterId}/evaluations`, spec);
  if (r.status !== 201) throw new Error(`submit: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.id;
}

export async function evaluation(cp: ControlPlane, id: string): Promise<EvaluationView> {
  return (await api<EvaluationView>(cp, 'GET', `/v1/evaluations/${id}`)).body;
}

export const FINISHED = ['Succeeded', 'Failed', 'Cancelled'];

export async function waitFinished(cp: ControlPlane, id: string, seconds = 120): Promise<EvaluationView> {
  return until(`evaluation ${id} to finish`, async () => {
    const e = await evaluation(cp, id);
    return FINISHED.includes(e.phase) ? e : undefined;
  }, seconds, 500);
}

/**
 * What the control plane holds for one evaluation against what happened in the
 * cluster: every phase the evaluation went through there while the agent could
 * see it (its final phase; Running when the controller's Started Event falls
 * outside a window in which the agent was down) must be held (else lost), and
 * no status may be held twice, under the same update id or re-reported under a
 * new one (duplicated).
 */
export function lostAndDuplicated(e: EvaluationView, clusterPhase: string, ran: boolean): { lost: number; duplicated: number } {
  const held = e.updates.map((u) => u.phase);
  const wentThrough = [clusterPhase, ...(ran ? ['Running'] : [])];
  const lost = wentThrough.filter((p) => !held.includes(p)).length;
  const ids = new Set(e.updates.map((u) => u.id));
  const statuses = new Set(e.updates.map((u) => JSON.stringify([u.phase, u.message ?? '', u.pod ?? '', u.node ?? ''])));
  return { lost, duplicated: e.updates.length - ids.size + (ids.size - statuses.size) };
}

export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  const srv = createServer();
  await new Promise<void>((ok) => srv.listen(0, '127.0.0.1', ok));
  const { port } = srv.address() as { port: number };
  await new Promise((ok) => srv.close(ok));
  return port;
}

export const cliPath = join(ROOT, 'cli/main.ts');
