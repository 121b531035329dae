// What the end-to-end and fault suites share: the reference control plane on
// the host's address of the real nodes' bridge, port 443, which pods reach by
// its name through CoreDNS (test/cluster/addons.ts) over TLS trusted through
// controlPlane.caBundle; the chart from the local OCI registry; the chart's
// pods running as real containers on the real node; evaluations of the test
// evaluation image submitted and followed through the control plane's API.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { HARNESS_HOSTS } from '../cluster/addons.ts';
import { NET, realNodes } from '../cluster/real-node.ts';
import { publishEvaluationImage } from '../images/evaluation/publish.ts';
import { REPOSITORY as EVALUATION_REPOSITORY } from '../images/evaluation/build.ts';
import { clusterInfo, helm, kubectl, run } from '../support/cluster.ts';
import { releaseInfo } from '../support/release.ts';
import { api, releasedChart, ROOT, startControlPlane, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';

export const NS = 'rlmesh-system';
export const RUNS = 'rlmesh-runs';
/** The control plane's name, as pods resolve it (CoreDNS's hosts file). */
export const CONTROL_PLANE_HOST = Object.keys(HARNESS_HOSTS).find((h) => HARNESS_HOSTS[h] === NET.hostAddress)!;
/** the output host the suites' control plane names: the "public" test server (public-server.ts), under a name of its own */
export const OUTPUT_HOST = 'outputs.public.test';

export type Chart = { ref: string; version: string };

export async function controlPlane(chart: Chart, dataDir?: string, extraArgs: string[] = []): Promise<ControlPlane> {
  return startControlPlane({ ...(dataDir ? { dataDir } : {}), ...controlPlaneListen(chart, extraArgs) });
}

/** Where the suites' control plane listens and what it is started with (the demo's too). */
export function controlPlaneListen(chart: Chart, extraArgs: string[] = []): { listen: string; args: string[] } {
  return {
    listen: `${NET.hostAddress}:443`,
    args: ['--tls-host', CONTROL_PLANE_HOST, '--tls-host', NET.hostAddress, '--advertise-host', CONTROL_PLANE_HOST, '--output-host', OUTPUT_HOST,
      '--ping-interval', '2', '--silence-timeout', '20', '--chart-ref', chart.ref, '--chart-version', chart.version,
      // the registry's token service judges this control plane's join tokens and pull credentials
      '--registry-stores-dir', clusterInfo().registryStores, ...extraArgs],
  };
}

/**
 * How helm reaches the local cluster's registry and waits for it, not values (nothing here is
 * stored in the release): the local registry speaks plain HTTP, and --wait holds the test until
 * the pods are ready, as a user watches `rollout status`. The cluster is the KUBECONFIG that
 * run() sets, so no --kube-context.
 */
export const PLUMBING = ['--plain-http', '--wait', '--timeout', '6m'];

/**
 * Values a local install adds to the printed command, as a user of a staging cell would: the control plane's host, the
 * CAs of its endpoints, and its private address (the agent reaches only public addresses on 443 otherwise).
 */
export function localValues(cp: ControlPlane, o: { controlPlaneAddresses?: boolean } = {}): string[] {
  return ['--set', `controlPlane.apiHost=${CONTROL_PLANE_HOST}`, '--set-file', `controlPlane.caBundle=${caBundleFile(cp)}`, ...(o.controlPlaneAddresses === false ? [] : CONTROL_PLANE_ADDRESSES)];
}

/**
 * The lab's control plane as the chart's controlPlane.addresses, where the agent's NetworkPolicy opens 443: its API
 * (the host's bridge address) and its registry (registry.rlmesh.dev's TLS listener, which the agent's outbound-443 check dials).
 */
export const CONTROL_PLANE_ADDRESSES = ['--set', `controlPlane.addresses={${NET.hostAddress}/32,${NET.registryAddress}/32}`];
/**
 * The lab node's containerd (1.6) and runc (1.1) run no user namespaces, so with the default
 * evaluations.hostUsers=auto preflight warns that evaluation pods share the node's users. The
 * installs that expect every check ✓ accept that as the warning advises; test/e2e/isolation.test.ts
 * covers auto and false on this node.
 */
export const LAB_HOST_USERS = ['--set', 'evaluations.hostUsers=true'];

/**
 * The CA bundle of a local install, written beside the control plane's CA: that CA (the API) and the
 * harness's (registry.rlmesh.dev's TLS listener, test/cluster/up), as a staging cell's private CA signs both.
 */
export function caBundleFile(cp: { caFile: string }): string {
  const file = join(dirname(cp.caFile), 'ca-bundle.pem');
  writeFileSync(file, [cp.caFile, clusterInfo().harnessCaFile].map((f) => `${readFileSync(f, 'utf8').trim()}
`).join(''));
  return file;
}

/** localValues and PLUMBING, for helm commands of the tests' own. */
export function localFlags(cp: ControlPlane): string[] {
  return [...localValues(cp), ...PLUMBING];
}

/** `helm upgrade --reuse-values` of the released chart with `flags` (plain-http OCI, no --wait unless `flags` ask for it). */
export function upgradeReusing(chart: Chart, flags: string[]): void {
  const r = helm(['upgrade', 'rlmesh', chart.ref, '--version', chart.version, '-n', NS, '--reuse-values', '--plain-http', ...flags], { allowFail: true });
  if (r.status !== 0) throw new Error(`helm upgrade --reuse-values ${flags.join(' ')} failed (${r.status}): ${r.stderr}\nwhat was not ready:\n${notReady()}`);
}

/**
 * Runs the install command of Connect your cluster as a local user would: as printed, with the
 * local values (localValues) and PLUMBING appended, with helm from the local build.
 */
export function runInstallCommand(cp: ControlPlane, command: string, stdin?: string): void {
  runPrinted(`${command} ${quoted([...localValues(cp), ...PLUMBING])}`, stdin);
}

/**
 * Runs a New install command on a cluster that has the release: exactly as printed, with only
 * PLUMBING appended. No values: the release's own (localValues among them) must survive the
 * command, which is what a user who runs it relies on.
 */
export function runNewInstallCommand(command: string, stdin?: string): void {
  runPrinted(`${command} ${quoted(PLUMBING)}`, stdin);
}

export const quoted = (args: string[]): string => args.map((a) => `'${a}'`).join(' ');

/** Runs a printed command line (with whatever the test appended) in bash. */
export function runPrinted(line: string, stdin?: string): void {
  const r = run('bash', ['-c', line], stdin === undefined ? {} : { input: stdin });
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
  // the pod of the last helm test, which helm uninstall leaves
  kubectl(['-n', NS, 'delete', 'pod', 'rlmesh-status-test', '--ignore-not-found', '--wait=false'], { allowFail: true });
  kubectl(['delete', 'namespace', RUNS, '--ignore-not-found', '--timeout=120s'], { allowFail: true });
  kubectl(['-n', NS, 'delete', 'secrets,leases', '--all', '--ignore-not-found'], { allowFail: true });
}

export { releasedChart };

type Pod = {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  spec: { nodeName?: string; containers?: { image: string }[] };
  status: { phase?: string; podIP?: string; containerStatuses?: { name: string; containerID?: string; restartCount: number; ready: boolean }[] };
};

/** The chart's workloads by what the suites call them: namespace and Deployment. */
const WORKLOADS = {
  agent: [NS, 'rlmesh-cluster-agent'],
  controller: [NS, 'rlmesh-cluster-controller'],
  filler: [RUNS, 'rlmesh-artifact-cache-filler'],
  egress: [NS, 'rlmesh-egress-proxy'],
} as const;
export type Workload = keyof typeof WORKLOADS;

/**
 * The chart's Deployments as they run: real pods on the real node. Logs come
 * from the kubelet (kubectl logs); a kill is a SIGKILL to the container's
 * process through containerd, after which the kubelet restarts it.
 */
export class Runtime {
  pods(w: Workload): Pod[] {
    const [ns, name] = WORKLOADS[w];
    const sel = JSON.parse(kubectl(['-n', ns, 'get', 'deployment', name, '-o', 'jsonpath={.spec.selector.matchLabels}']).stdout) as Record<string, string>;
    const selector = Object.entries(sel).map(([k, v]) => `${k}=${v}`).join(',');
    const items = (JSON.parse(kubectl(['-n', ns, 'get', 'pods', '-l', selector, '-o', 'json']).stdout) as { items: Pod[] }).items;
    return items.filter((p) => !p.metadata.deletionTimestamp);
  }

  pod(w: Workload): Pod {
    const pods = this.pods(w);
    if (pods.length !== 1) throw new Error(`${w}: ${pods.length} pods, expected one (${pods.map((p) => p.metadata.name).join(' ')})`);
    return pods[0]!;
  }

  /** Waits until the Deployment has rolled out and all its pods are ready. */
  async ready(w: Workload, seconds = 180): Promise<void> {
    const [ns, name] = WORKLOADS[w];
    const r = kubectl(['-n', ns, 'rollout', 'status', `deployment/${name}`, `--timeout=${seconds}s`], { allowFail: true });
    if (r.status !== 0) throw new Error(`${w} did not become ready: ${r.stderr}\n${notReady()}`);
  }

  /** The logs of the workload's current pods (and of a container the kubelet restarted, before its own). */
  log(w: Workload): string {
    const [ns] = WORKLOADS[w];
    return this.pods(w)
      .map((p) => {
        const restarted = (p.status.containerStatuses?.[0]?.restartCount ?? 0) > 0;
        const previous = restarted ? kubectl(['-n', ns, 'logs', p.metadata.name, '--previous'], { allowFail: true }).stdout : '';
        return previous + kubectl(['-n', ns, 'logs', p.metadata.name], { allowFail: true }).stdout;
      })
      .join('');
  }

  /** Scales the Deployment (0: stopped) and waits for it: ready, or with `running`, its containers started. */
  async scale(w: Workload, replicas: number, until_: 'ready' | 'running' = 'ready'): Promise<void> {
    const [ns, name] = WORKLOADS[w];
    kubectl(['-n', ns, 'scale', `deployment/${name}`, `--replicas=${replicas}`]);
    if (replicas > 0 && until_ === 'ready') await this.ready(w);
    else if (replicas > 0) await until(`${w} to run`, () => (this.pods(w).filter((p) => p.status.phase === 'Running').length === replicas ? true : undefined), { timeoutMs: 120_000 });
    else await until(`${w} to stop`, () => (kubectl(['-n', ns, 'get', 'pods', '-o', 'name']).stdout.split('\n').some((l) => l.includes(name)) ? undefined : true), { timeoutMs: 120_000 });
  }

  /** Waits until the Deployment's pods are all of its current template and running (ready or not: an upgrade may leave them unready). */
  async rolledOut(w: Workload, seconds = 180): Promise<void> {
    const [ns, name] = WORKLOADS[w];
    await until(`${w} to roll out`, () => {
      const d = JSON.parse(kubectl(['-n', ns, 'get', 'deployment', name, '-o', 'json']).stdout) as { spec: { replicas: number }; status: { updatedReplicas?: number; replicas?: number } };
      const pods = this.pods(w);
      const done = d.status.updatedReplicas === d.spec.replicas && d.status.replicas === d.spec.replicas && pods.length === d.spec.replicas && pods.every((p) => p.status.phase === 'Running');
      return done ? true : undefined;
    }, { timeoutMs: seconds * 1000, intervalMs: 1000 });
  }

  /** A rollout restart: new pods, as after a node drain or an upgrade that changes the template. */
  async restart(w: Workload): Promise<void> {
    const [ns, name] = WORKLOADS[w];
    kubectl(['-n', ns, 'rollout', 'restart', `deployment/${name}`]);
    await this.ready(w);
  }

  /** SIGKILLs the container of one pod through containerd on its node; the kubelet restarts it. */
  kill(p: Pod): void {
    const status = p.status.containerStatuses?.[0];
    const id = status?.containerID?.replace(/^containerd:\/\//, '');
    const node = realNodes().find((n) => n.name === p.spec.nodeName);
    if (!id || !node) throw new Error(`pod ${p.metadata.name} runs no container on a real node (node ${p.spec.nodeName}, container ${status?.containerID})`);
    const r = run('/usr/bin/ctr', ['--address', node.containerdSocket, '-n', 'k8s.io', 'tasks', 'kill', '--signal', 'SIGKILL', id]);
    if (r.status !== 0) throw new Error(`ctr tasks kill ${id}: ${r.stderr}`);
  }
}

/** The test evaluation image in the local registry, as the platform would name it (registry.rlmesh.dev, by digest). */
export async function evaluationImage(): Promise<string> {
  const { digest } = await publishEvaluationImage();
  return `registry.rlmesh.dev/${EVALUATION_REPOSITORY}@${digest}`;
}

/** A small evaluation of the test image: runs `seconds`, exits `exitCode`. */
export function smallEvaluation(image: string, env: Record<string, string> = {}): Record<string, unknown> {
  return { image, env: { TEST_DURATION: '2s', ...env }, cpu: '50m', memory: '64Mi', deadlineSeconds: '600' };
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
  }, { timeoutMs: seconds * 1000 });
}

/** Creates a cluster on the control plane, runs its printed install command and waits until it is Connected; its id. */
export async function installNewCluster(cp: ControlPlane, name: string): Promise<string> {
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name });
  runInstallCommand(cp, created.body.installCommand);
  await waitConnected(cp, created.body.clusterId);
  return created.body.clusterId;
}

export type EvaluationView = {
  id: string;
  phase: string;
  updates: { id: string; phase: string; sequence?: string | number; message?: string; pod?: string; node?: string }[];
};

export async function submit(cp: ControlPlane, clusterId: string, spec: Record<string, unknown>): Promise<string> {
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
  }, { timeoutMs: seconds * 1000, intervalMs: 500 });
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

export const cliPath = join(ROOT, 'cli/main.ts');

/** Forgets the runtime image on the real nodes, so the next pod must pull it from the registry. */
export function forgetRuntimeImage(): void {
  const image = releaseInfo().images['rlmesh-runtime']!;
  for (const node of realNodes()) {
    const ctr = (...args: string[]) => run('/usr/bin/ctr', ['--address', node.containerdSocket, '-n', 'k8s.io', ...args]);
    // the image-id reference containerd keeps beside the name (sha256:<config>), found from the manifest digest
    const configRef = ctr('images', 'ls').stdout.split('\n').find((l) => l.includes(image.digest) && l.startsWith('sha256:'))?.split(/\s+/)[0] ?? '';
    const refs = ctr('images', 'ls', '-q').stdout.split('\n').filter((r) => r.includes('rlmesh/rlmesh-runtime') || r === configRef);
    if (refs.length) {
      const r = ctr('images', 'rm', ...refs);
      if (r.status !== 0) throw new Error(`ctr images rm: ${r.stderr}`);
    }
  }
}
