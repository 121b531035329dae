// What the agent's integration tests share: their own namespaces (so they never
// touch a chart another test installed), the chart's own agent RBAC rendered
// into them, the real control plane as a child process and the agent as a
// child process authenticated as ServiceAccount rlmesh-cluster-agent.
//
// Why a process and not the chart's pod: these suites steer the agent at
// points a pod cannot be held to (SIGKILL in the middle of a 1,000-update
// burst, a control plane swapped for another on an ephemeral port, the
// apiserver taken away and back, clocks and intervals shortened by flag) and
// read its log line by line as it happens. The same code runs as the chart's
// pod on the real node in test/e2e (spec.test.ts, faults.test.ts), which is
// what proves the pod: image, probes, mounts, securityContext, NetworkPolicy.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import * as k8s from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { AgentMessageSchema, ClusterSession } from '../../lib/gen/rlmesh/v1/session_pb.ts';
import { adminKubeConfig, helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { api, ROOT, startControlPlane, type ControlPlane } from '../support/runtime.ts';
import { until, type UntilOptions } from '../support/until.ts';
import { get, OFFLINE_API_SERVER, podTemplate, render, TOKEN } from '../chart/chart.ts';
import { KWOK_TOLERATION } from '../support/kwok-outcome.ts';
import type { ClusterPlacement } from '../../lib/evaluation-placement.ts';
import { tempDir } from '../support/temp.ts';
import pkg from '../../package.json' with { type: 'json' };

// reassigned by useNamespaces (live ESM bindings)
export let SYSTEM = 'rlmesh-agent-it';
export let RUNS = 'rlmesh-agent-it-runs';
let clusterScopedSuffix = '-agent-it';

/** Another pair of namespaces (the benchmark uses its own, so it never races the tests). */
export function useNamespaces(system: string, runs: string): void {
  SYSTEM = system;
  RUNS = runs;
  clusterScopedSuffix = `-${system}`;
}
export const SA = 'rlmesh-cluster-agent';
const NODE = join(ROOT, 'node_modules/.bin/node');

export type RbacMode = { joinToken: boolean; controlSecret?: string; pullSecret?: string; observability?: boolean };

/**
 * Namespaces, the CRDs, and the chart's ServiceAccount + agent RBAC (templates/rbac-agent.yaml)
 * rendered into the test namespaces. Cluster-scoped names get a suffix so a chart
 * installed by another test keeps its own.
 */
export function installAgentRbac(mode: RbacMode = { joinToken: true, observability: true }): void {
  kubectl(['apply', '-f', join(ROOT, 'crds')]);
  const args = [
    'template', 'rlmesh', join(ROOT, 'charts/rlmesh-runtime'), '-n', SYSTEM, '--kube-version', '1.35.4',
    '--show-only', 'templates/serviceaccounts.yaml', '--show-only', 'templates/rbac-agent.yaml',
    '--set', 'gpuFeatureDiscovery.enabled=false', '--set', `observability.enabled=${mode.observability ?? false}`, ...OFFLINE_API_SERVER,
  ];
  if (mode.joinToken) args.push('--set', `joinToken=rlm_jt_${'x'.repeat(32)}`);
  else args.push('--set', `credentials.controlSecret=${mode.controlSecret ?? 'rlmesh-secrets'}`, '--set', `credentials.pullSecret=${mode.pullSecret ?? 'rlmesh-registry-pull'}`);
  const rendered = helm(args).stdout;
  const docs = parseAllDocuments(rendered).map((d) => d.toJS() as k8s.KubernetesObject & { roleRef?: { kind: string; name: string } }).filter(Boolean);
  for (const d of docs) {
    if (d.metadata?.namespace === 'rlmesh-runs') d.metadata.namespace = RUNS;
    if (d.kind === 'ClusterRole' || d.kind === 'ClusterRoleBinding') d.metadata!.name += clusterScopedSuffix;
    // the agent reads its own ClusterRole (the owner of its Secrets) by name
    for (const rule of (d as { rules?: { resourceNames?: string[] }[] }).rules ?? []) {
      if (d.kind === 'ClusterRole' && rule.resourceNames) rule.resourceNames = rule.resourceNames.map((n) => (n === 'rlmesh-cluster-agent' ? n + clusterScopedSuffix : n));
    }
    if (d.kind === 'ClusterRoleBinding' && d.roleRef) d.roleRef.name += clusterScopedSuffix;
  }
  const ns = [SYSTEM, RUNS].map((n) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: n } }));
  const file = join(tempDir('agent-rbac-'), 'rbac.json');
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...ns, ...docs] }));
  kubectl(['apply', '-f', file]);
}

/** Removes what a previous test left: our Secrets, the join Lease, evaluations. */
export function resetAgentState(): void {
  for (const ns of [SYSTEM, RUNS]) {
    kubectl(['-n', ns, 'delete', 'secrets', '--all', '--ignore-not-found', '--wait=false'], { allowFail: true });
  }
  kubectl(['-n', SYSTEM, 'delete', 'lease', 'rlmesh-cluster-agent-join', '--ignore-not-found'], { allowFail: true });
  kubectl(['-n', RUNS, 'delete', 'rlmeshevaluations', '--all', '--ignore-not-found', '--wait=false'], { allowFail: true });
}

export async function controlPlane(dataDir?: string, listen?: string): Promise<ControlPlane> {
  return startControlPlane({ ...(dataDir ? { dataDir } : {}), ...(listen ? { listen } : {}), args: ['--ping-interval', '1', '--silence-timeout', '10', '--test-clock'] });
}

export async function newCluster(cp: ControlPlane, name = 'agent-it'): Promise<{ clusterId: string; joinToken: string }> {
  const r = await api<{ clusterId: string; joinToken: string }>(cp, 'POST', '/v1/clusters', { name });
  if (r.status !== 201) throw new Error(`POST /v1/clusters: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export async function newInstallCommand(cp: ControlPlane, clusterId: string): Promise<string> {
  const r = await api<{ joinToken: string }>(cp, 'POST', `/v1/clusters/${clusterId}/install-command`);
  if (r.status !== 200) throw new Error(`install-command: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.joinToken;
}

export type ClusterView = {
  id: string;
  status: string;
  lastSeenAt: string | null;
  live: boolean;
  nodeReport: { report: { nodes?: { name: string; gpusAllocatable?: number; gpusFree?: number; cpuMillisFree?: string }[] }; receivedAt: string; received: number } | null;
  updates: { distinct: number; duplicatesReceived: number };
};

export async function cluster(cp: ControlPlane, id: string): Promise<ClusterView> {
  const r = await api<ClusterView>(cp, 'GET', `/v1/clusters/${id}`);
  if (r.status !== 200) throw new Error(`GET cluster: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export function runtimeConfig(cp: ControlPlane, over: { controlSecret?: string; pullSecret?: string; observability?: boolean; spoolMaxBytes?: number; nodeSelector?: string; placement?: Partial<ClusterPlacement> } = {}): string {
  const url = new URL(cp.url);
  const config = {
    namespace: SYSTEM,
    runsNamespace: RUNS,
    controlPlane: { apiHost: url.hostname, apiPort: Number(url.port), registryHost: 'registry.rlmesh.dev', caBundlePath: cp.caFile },
    credentials: {
      ownerClusterRole: `rlmesh-cluster-agent${clusterScopedSuffix}`,
      ...(over.controlSecret ? { controlSecret: over.controlSecret } : {}),
      ...(over.pullSecret ? { pullSecret: over.pullSecret } : {}),
    },
    observability: { enabled: over.observability ?? false },
    gpuFeatureDiscovery: {},
    egress: {},
    artifactCache: {},
    agent: { nodeSelector: over.nodeSelector ?? '', spoolMaxBytes: over.spoolMaxBytes ?? 64 * 1024 * 1024 },
    // kwok's nodes are tainted: the agent offers only nodes whose NoSchedule taints evaluations tolerate
    evaluations: { runWithoutNetworkPolicyEnforcement: false, placement: { ...over.placement, tolerations: [KWOK_TOLERATION, ...(over.placement?.tolerations ?? [])] } },
    ports: { health: 0, metrics: 0 },
  };
  const file = join(tempDir('agent-config-'), 'config.json');
  writeFileSync(file, JSON.stringify(config));
  return file;
}

/** the agent's timing flags, shrunk for tests (production: the defaults) */
export const FAST_TIMING: string[] = [
  '--heartbeat-ms=1000', '--silence-ms=5000', '--backoff-base-ms=200', '--backoff-max-ms=2000',
  '--auth-backoff-ms=2000', '--report-delay-ms=250', '--lease-seconds=15',
];

/** The memory settings the chart gives the agent container. */
export function chartAgentEnv(): Record<string, string> {
  const d = get(render(['--set', `joinToken=${TOKEN}`, '--show-only', 'templates/agent.yaml']), 'Deployment', 'rlmesh-system', 'rlmesh-cluster-agent');
  const env = podTemplate(d).spec.containers[0]?.env ?? [];
  return Object.fromEntries(env.filter((e) => e.value !== undefined && /^(NODE_OPTIONS|MALLOC_)/.test(e.name)).map((e) => [e.name, e.value!]));
}

export type AgentProcess = {
  proc: ChildProcess;
  /** Date.now() right before the process was spawned */
  startedAt: number;
  logFile: string;
  spoolDir: string;
  log(): string;
  /** parsed JSON log lines */
  lines(): { level: number; msg: string; [k: string]: unknown }[];
  /** Waits for a log line matching re (the agent exiting without it is the last error reported) */
  waitFor(what: string, re: RegExp, options?: UntilOptions): Promise<string>;
  ports(): Promise<{ health: number; metrics: number }>;
  readyz(): Promise<{ status: number; body: string }>;
  metrics(): Promise<string>;
  stop(signal?: NodeJS.Signals): Promise<void>;
};

/** `main`: the agent's entry file; the sources by default, or the compiled build the image runs (test/bench). */
/** `timing`: the agent's timing flags (FAST_TIMING by default); `args`: more flags after them, which win. */
export async function startAgent(opts: { configFile: string; token?: string; spoolDir?: string; env?: Record<string, string>; timing?: string[]; args?: string[]; name?: string; main?: string }): Promise<AgentProcess> {
  const spoolDir = opts.spoolDir ?? tempDir('agent-spool-');
  mkdirSync(spoolDir, { recursive: true });
  const logFile = join(tempDir('agent-log-'), 'agent.log');
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    RLMESH_CONFIG: opts.configFile,
    POD_NAMESPACE: SYSTEM,
    POD_NAME: opts.name ?? `rlmesh-cluster-agent-${process.pid}`,
    RLMESH_LISTEN_HOST: '127.0.0.1',
    KUBECONFIG: await serviceAccountKubeconfig(SYSTEM, SA),
    ...(opts.token ? { RLMESH_JOIN_TOKEN: opts.token } : {}),
    ...(opts.env ?? {}),
  };
  const out = openSync(logFile, 'a');
  const startedAt = Date.now();
  const args = [`--spool-dir=${spoolDir}`, ...(opts.timing ?? FAST_TIMING), ...(opts.args ?? [])];
  const proc = spawn(NODE, [opts.main ?? join(ROOT, 'agent/main.ts'), ...args], { env, stdio: ['ignore', out, out] });
  const log = () => readFileSync(logFile, 'utf8');
  const lines = () =>
    log()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; [k: string]: unknown });
  const ports = async () => {
    const line = await until('agent health port', () => lines().find((l) => l.msg === 'agent starting'), { timeoutMs: 30_000 });
    return { health: line.healthPort as number, metrics: line.metricsPort as number };
  };
  const get = async (path: string) => {
    const p = await ports();
    const res = await fetch(`http://127.0.0.1:${path === '/metrics' ? p.metrics : p.health}${path}`);
    return { status: res.status, body: await res.text() };
  };
  return {
    proc,
    startedAt,
    logFile,
    spoolDir,
    log,
    lines,
    waitFor: (what, re, options) =>
      until(what, () => {
        if (proc.exitCode !== null && !re.test(log())) throw new Error(`the agent exited (${proc.exitCode}): ${log().slice(-2000)}`);
        return log().split('\n').find((l) => re.test(l));
      }, options),
    ports,
    readyz: () => get('/readyz'),
    metrics: async () => (await get('/metrics')).body,
    stop: (signal = 'SIGTERM') =>
      new Promise((ok) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return ok();
        proc.once('exit', () => ok());
        proc.kill(signal);
      }),
  };
}

export function secret(ns: string, name: string): k8s.V1Secret | undefined {
  const r = kubectl(['-n', ns, 'get', 'secret', name, '-o', 'json'], { allowFail: true });
  return r.status === 0 ? (JSON.parse(r.stdout) as k8s.V1Secret) : undefined;
}

export const decode = (s: k8s.V1Secret | undefined, key: string): string | undefined => (s?.data?.[key] ? Buffer.from(s.data[key], 'base64').toString('utf8') : undefined);

export const admin = () => adminKubeConfig();

/** Opens a session with `credential` as an agent would: 'connected' once the control plane answers, else its refusal. */
export async function tryConnect(cp: ControlPlane, credential: string): Promise<ConnectError | 'connected'> {
  const transport = createGrpcTransport({ baseUrl: cp.url, nodeOptions: { ca: readFileSync(cp.caFile, 'utf8') } });
  const client = createClient(ClusterSession, transport);
  const ac = new AbortController();
  async function* hello() {
    yield create(AgentMessageSchema, { msg: { case: 'hello', value: { agentVersion: pkg.version } } });
    await new Promise((r) => setTimeout(r, 5000));
  }
  try {
    for await (const _m of client.connect(hello(), { signal: ac.signal, headers: { authorization: `Bearer ${credential}` } })) {
      ac.abort();
      return 'connected';
    }
    return 'connected';
  } catch (err) {
    if (ac.signal.aborted) return 'connected';
    return ConnectError.from(err);
  }
}

