// The controller on the real local cluster: its CRDs applied with kubectl, a
// system and a runs namespace of its own (so parallel tests of other areas do
// not collide), the two ServiceAccounts with the least rights each role needs,
// and the controller started as child processes authenticated as those
// ServiceAccounts through TokenRequest, so RBAC is exercised for real.
//
// Why processes and not the chart's pods: each file runs its own controller
// pair in namespaces of its own beside other files' (one chart release per
// cluster could not), kills the leader at a chosen moment, shortens retention
// and retry times by flag and turns kwok pod outcomes into the cases it wants.
// The chart's controller and filler pods run on the real node in test/e2e.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, createWriteStream } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { adminKubeConfig, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { KWOK_TOLERATION, outcomeEnv, type Outcome } from '../support/kwok-outcome.ts';
import { until } from '../support/until.ts';
import { GROUP, VERSION, type Artifact, type EvaluationSpec, type RLMeshCache, type RLMeshEvaluation } from '../../lib/crds/types.ts';
import { sourcesSecretName, urlKey } from '../../agent/assignments.ts';
import { tempDir } from '../support/temp.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
export const NODE = join(root, 'node_modules/.bin/node');

export const RECONCILER_SA = 'rlmesh-cluster-controller';
export const FILLER_SA = 'rlmesh-artifact-cache-filler';

/** The rights each role needs; the chart's RBAC must grant these and nothing more. */
export function rbacManifests(sys: string, runs: string, suffix: string): object[] {
  const role = (name: string, namespace: string, rules: object[]) => ({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name, namespace }, rules });
  const bind = (kind: 'Role' | 'ClusterRole', name: string, namespace: string | undefined, sa: string, saNs: string) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: kind === 'Role' ? 'RoleBinding' : 'ClusterRoleBinding',
    metadata: namespace ? { name, namespace } : { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind, name },
    subjects: [{ kind: 'ServiceAccount', name: sa, namespace: saNs }],
  });
  const clusterRole = (name: string, rules: object[]) => ({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules });
  const lease = (name: string) => [
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [name], verbs: ['get', 'update'] },
  ];
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: RECONCILER_SA, namespace: sys } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: FILLER_SA, namespace: runs } },
    // reconciler: pods and evaluations in the runs namespace
    role(RECONCILER_SA, runs, [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'create', 'delete'] },
      { apiGroups: [GROUP], resources: ['rlmeshevaluations'], verbs: ['get', 'list', 'watch', 'delete'] },
      { apiGroups: [GROUP], resources: ['rlmeshevaluations/status'], verbs: ['patch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ]),
    bind('Role', RECONCILER_SA, runs, RECONCILER_SA, sys),
    role(RECONCILER_SA, sys, [
      ...lease('rlmesh-cluster-controller'),
      { apiGroups: [''], resources: ['services'], resourceNames: ['rlmesh-egress-proxy'], verbs: ['get'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
      { apiGroups: [''], resources: ['persistentvolumeclaims'], resourceNames: ['rlmesh-agent-spool'], verbs: ['get'] },
    ]),
    bind('Role', RECONCILER_SA, sys, RECONCILER_SA, sys),
    clusterRole(`${suffix}-reconciler`, [
      { apiGroups: [GROUP], resources: ['rlmeshcaches'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['persistentvolumes'], verbs: ['get'] },
    ]),
    bind('ClusterRole', `${suffix}-reconciler`, undefined, RECONCILER_SA, sys),
    // cache filler: evaluations (read, status.artifacts), the S3 credential Secrets, the cache object
    role(FILLER_SA, runs, [
      { apiGroups: [GROUP], resources: ['rlmeshevaluations'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [GROUP], resources: ['rlmeshevaluations/status'], verbs: ['patch'] },
      ...lease('rlmesh-artifact-cache-filler'),
    ]),
    bind('Role', FILLER_SA, runs, FILLER_SA, runs),
    clusterRole(`${suffix}-filler`, [
      { apiGroups: [GROUP], resources: ['rlmeshcaches'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
      { apiGroups: [GROUP], resources: ['rlmeshcaches/status'], verbs: ['patch'] },
    ]),
    bind('ClusterRole', `${suffix}-filler`, undefined, FILLER_SA, runs),
  ];
}

export function apply(objects: object[]): void {
  kubectl(['apply', '-f', '-'], { input: objects.map((o) => JSON.stringify(o)).join('\n') });
}

export type Env = {
  id: string;
  sys: string;
  runs: string;
  cacheName: string;
  configPath: string;
  dir: string;
  /** the filler's --sources-dir: the artifact-sources Secrets as the kubelet projects them into the chart's filler pod */
  sourcesDir: string;
  custom: k8s.CustomObjectsApi;
  core: k8s.CoreV1Api;
  cleanup: () => Promise<void>;
};

/** Namespaces, CRDs, RBAC, the cache PVC and a runtime config for one test file. */
export async function setupEnv(opts: { accessModes?: string[]; startDeadlineSeconds?: number; placement?: Record<string, unknown> } = {}): Promise<Env> {
  const id = `ctl${randomBytes(3).toString('hex')}`;
  const sys = `${id}-system`;
  const runs = `${id}-runs`;
  const cacheName = id;
  kubectl(['apply', '--server-side', '--force-conflicts', '-f', join(root, 'crds')]);
  kubectl(['wait', '--for=condition=Established', 'crd/rlmeshevaluations.rlmesh.dev', 'crd/rlmeshcaches.rlmesh.dev', '--timeout=60s']);
  apply([
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: sys } },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: runs, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } },
  ]);
  apply(rbacManifests(sys, runs, id));
  apply([
    // the egress proxy's Service: the controller gives evaluation pods its ClusterIP
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'rlmesh-egress-proxy', namespace: sys },
      spec: { selector: { 'app.kubernetes.io/name': 'rlmesh-egress-proxy' }, ports: [{ name: 'proxy', port: 3128, targetPort: 3128 }] },
    },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'rlmesh-artifact-cache', namespace: runs },
      spec: { accessModes: opts.accessModes ?? ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    },
  ]);
  const dir = tempDir(`rlmesh-${id}-`);
  const configPath = join(dir, 'config.json');
  const sourcesDir = join(dir, 'artifact-sources');
  mkdirSync(sourcesDir);
  writeFileSync(
    configPath,
    JSON.stringify({
      namespace: sys,
      runsNamespace: runs,
      controlPlane: {},
      credentials: {},
      observability: {},
      gpuFeatureDiscovery: {},
      egress: { proxyUrl: `http://rlmesh-egress-proxy.${sys}.svc:3128` },
      artifactCache: { cacheName, accessModes: opts.accessModes ?? ['ReadWriteOnce'] },
      // these namespaces have no NetworkPolicies and the pods land on kwok nodes, so no probe could see
      // enforcement: the documented opt-out, as an operator whose rlmesh-runs another layer fences sets it
      // (the fence itself is proven on the real node in test/e2e/network-policies.test.ts)
      evaluations: { runWithoutNetworkPolicyEnforcement: true, ...(opts.startDeadlineSeconds ? { startDeadlineSeconds: opts.startDeadlineSeconds } : {}), ...(opts.placement ? { placement: opts.placement } : {}) },
    }),
  );
  const kc = adminKubeConfig();
  return {
    id,
    sys,
    runs,
    cacheName,
    configPath,
    dir,
    sourcesDir,
    custom: kc.makeApiClient(k8s.CustomObjectsApi),
    core: kc.makeApiClient(k8s.CoreV1Api),
    cleanup: async () => {
      kubectl(['delete', 'namespace', sys, runs, '--wait=false', '--ignore-not-found'], { allowFail: true });
      kubectl(['delete', 'rlmeshcache', cacheName, '--ignore-not-found', '--wait=false'], { allowFail: true });
      kubectl(['delete', 'clusterrole,clusterrolebinding', `${id}-reconciler`, `${id}-filler`, '--ignore-not-found'], { allowFail: true });
    },
  };
}

export type ControllerProcess = { child: ChildProcess; logFile: string; stop: () => Promise<void>; kill9: () => Promise<void> };

/** Starts `node controller/main.ts` as a child process authenticated as the role's ServiceAccount. */
export async function startController(
  env: Env,
  role: 'reconciler' | 'cache-filler',
  args: string[] = [],
  extraEnv: Record<string, string> = {},
  main = join(root, 'controller/main.ts'),
): Promise<ControllerProcess> {
  const [ns, sa] = role === 'reconciler' ? [env.sys, RECONCILER_SA] : [env.runs, FILLER_SA];
  const kubeconfig = await serviceAccountKubeconfig(ns, sa);
  const logDir = join(env.dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const logFile = join(logDir, `${role}-${Date.now()}.log`);
  const child = spawn(
    NODE,
    [main, `--role=${role}`, `--kubeconfig=${kubeconfig}`, '--metrics-port=0', '--health-port=0', '--lease-duration-seconds=3', '--waiting-retry-seconds=1', ...(role === 'cache-filler' ? [`--sources-dir=${env.sourcesDir}`] : []), ...args],
    { env: { ...process.env, RLMESH_CONFIG: env.configPath, LOG_LEVEL: 'debug', ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const out = createWriteStream(logFile);
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    logFile,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000)]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
    kill9: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** An artifact as a test writes it: a presigned URL in place of the Secret reference the agent makes. */
type TestArtifact = Omit<Artifact, 'source'> & { source: Artifact['source'] | { httpsUrl: string; s3?: unknown } };
type TestSpec = Omit<Partial<EvaluationSpec>, 'artifacts'> & { artifacts?: TestArtifact[] };

// the presigned URLs of a body evaluation() made, for createEvaluation() to write as its entry: a symbol key
// survives a spread of the body ({ ...body, metadata }) and never reaches the apiserver (JSON leaves it out)
const URLS = Symbol('presigned URLs');

/**
 * An RLMeshEvaluation for a kwok node (it tolerates their taint); `outcome`
 * becomes environment of its container (test/support/kwok-outcome.ts), from
 * which kwok plays how its pod ends. An artifact given by `httpsUrl` gets what
 * the agent makes of one: a reference into the evaluation's entry of artifact credentials.
 */
export function evaluation(name: string, spec: TestSpec, outcome: Outcome = {}): object {
  const env = [...(spec.env ?? []), ...outcomeEnv(outcome)];
  const placement = { ...spec.placement, tolerations: [...(spec.placement?.tolerations ?? []), KWOK_TOLERATION] };
  const urls: Record<string, string> = {};
  const artifacts = spec.artifacts?.map((a) => {
    if (!('httpsUrl' in a.source)) return a;
    const { httpsUrl, ...rest } = a.source;
    urls[urlKey(a.name)] = httpsUrl;
    return { ...a, source: { ...rest, httpsUrlSecretRef: { name: sourcesSecretName(name), key: urlKey(a.name) } } };
  });
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'RLMeshEvaluation',
    metadata: { name },
    spec: { evaluationId: `ev_${name}`, image: 'registry.rlmesh.dev/envs/test:1', deadlineSeconds: 600, ...spec, ...(artifacts ? { artifacts } : {}), placement, ...(env.length ? { env } : {}) },
    ...(Object.keys(urls).length ? { [URLS]: urls } : {}),
  };
}

/**
 * Writes an evaluation's entry of artifact credentials where the filler reads it: the file the
 * kubelet projects from the agent's artifact-sources Secrets into the chart's filler pod (the filler
 * runs as a process here, so the test stands in for that projection; test/e2e/artifacts.test.ts has the kubelet do it).
 */
export function writeSources(env: Env, entry: string, data: Record<string, string>): void {
  writeFileSync(join(env.sourcesDir, entry), JSON.stringify({ writtenAt: new Date().toISOString(), data }));
}

/** As the agent does: the evaluation's presigned URLs into its entry of artifact credentials, then the evaluation. */
export async function createEvaluation(env: Env, body: object): Promise<RLMeshEvaluation> {
  const urls = (body as { [URLS]?: Record<string, string> })[URLS];
  if (urls) writeSources(env, sourcesSecretName((body as { metadata: { name: string } }).metadata.name), urls);
  return (await env.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: env.runs, plural: 'rlmeshevaluations', body })) as RLMeshEvaluation;
}

export async function getEvaluation(env: Env, name: string): Promise<RLMeshEvaluation | undefined> {
  try {
    return (await env.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: env.runs, plural: 'rlmeshevaluations', name })) as RLMeshEvaluation;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

export async function getCache(env: Env): Promise<RLMeshCache | undefined> {
  try {
    return (await env.custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: 'rlmeshcaches', name: env.cacheName })) as RLMeshCache;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

export async function waitForPhase(env: Env, name: string, phases: string[], timeoutMs = 60_000): Promise<RLMeshEvaluation> {
  return until(
    `evaluation ${name} in phase ${phases.join('|')}`,
    async () => {
      const ev = await getEvaluation(env, name);
      return ev?.status?.phase && phases.includes(ev.status.phase) ? ev : (false as const);
    },
    { timeoutMs },
  );
}

export async function eventsFor(env: Env, name: string): Promise<k8s.CoreV1Event[]> {
  const list = await env.core.listNamespacedEvent({ namespace: env.runs, fieldSelector: `involvedObject.name=${name},involvedObject.kind=RLMeshEvaluation` });
  return list.items.sort((a, b) => String(a.metadata?.name).localeCompare(String(b.metadata?.name)));
}

export async function getPod(env: Env, name: string): Promise<k8s.V1Pod | undefined> {
  try {
    return await env.core.readNamespacedPod({ name, namespace: env.runs });
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

/** Sum of the samples of a metric (name with labels as a prefix) from a controller process's /metrics. */
export async function metric(proc: ControllerProcess, name: string): Promise<number> {
  const line = readFileSync(proc.logFile, 'utf8')
    .split('\n')
    .find((l) => l.includes('"server":"metrics"'));
  if (!line) throw new Error(`the controller has not logged its metrics port yet (${proc.logFile})`);
  const port = (JSON.parse(line) as { port: number }).port;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}
