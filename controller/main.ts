// rlmesh-cluster-controller. Two roles from one entrypoint:
//   --role=reconciler    RLMeshEvaluation -> pod in the runs namespace, status,
//                        Events, deadline, cancellation, garbage collection
//                        (Deployment rlmesh-cluster-controller, rlmesh-system)
//   --role=cache-filler  fills and evicts the artifact cache on the PVC it
//                        mounts at --cache-dir (a Deployment in the runs
//                        namespace, because a pod can mount only a PVC of its
//                        own namespace)
//   --role=all           both in one process (local runs and tests)
// Each role acts only while it holds its leader Lease.
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { CACHE, EVALUATION, GROUP, VERSION, isFinished, type RLMeshCache, type RLMeshEvaluation } from '../lib/crds/types.ts';
import { startInformer, type Informer } from '../lib/informer.ts';
import type { Page } from '../lib/list-pages.ts';
import { createLogger } from '../lib/logger.ts';
import { loadRuntimeConfig, type RuntimeConfig } from '../lib/runtime-config.ts';
import { ArtifactFetcher } from './cache/fetch.ts';
import { ArtifactStore } from './cache/store.ts';
import { CacheFiller } from './cache-filler.ts';
import { EvaluationReconciler } from './evaluation-reconciler.ts';
import { EventRecorder } from './events.ts';
import { LeaderElector } from './leader-election.ts';
import { createMetrics } from './metrics.ts';
import { defaultProbeTargets, gateTargets, GATE_GRACE_SECONDS, startNetworkPolicyProbeLoop, storedProbePassed } from './network-policy-probe.ts';
import { LABEL_MANAGED_BY, MANAGED_BY } from './pod-spec.ts';
import { resolveProxyUrl } from './proxy-address.ts';
import { WorkQueue } from './work-queue.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';

const log = createLogger('controller');

const { values: a } = parseArgs({
  options: {
    help: { type: 'boolean', short: 'h', default: false },
    role: { type: 'string', default: 'reconciler' },
    kubeconfig: { type: 'string' },
    'cache-dir': { type: 'string', default: '/var/lib/rlmesh/cache' },
    'node-name': { type: 'string' },
    identity: { type: 'string' },
    'lease-duration-seconds': { type: 'string', default: '15' },
    'gc-after-seconds': { type: 'string', default: '3600' },
    'watchdog-seconds': { type: 'string', default: '300' },
    'waiting-retry-seconds': { type: 'string', default: '10' },
    'max-concurrent': { type: 'string' },
    'capacity-bytes': { type: 'string' },
    'secret-grace-seconds': { type: 'string', default: '60' },
    concurrency: { type: 'string', default: '16' },
    'fetch-attempts': { type: 'string', default: '5' },
    'fetch-retry-ms': { type: 'string', default: '500' },
    'chunk-bytes': { type: 'string', default: String(32 * 1024 * 1024) },
    'ranged-threshold-bytes': { type: 'string', default: String(256 * 1024 * 1024) },
    'metrics-port': { type: 'string' },
    'health-port': { type: 'string' },
  },
  strict: true,
});
if (a.help) {
  console.log(`usage: rlmesh-runtime controller [--role reconciler|cache-filler|all] [--cache-dir DIR]
  [--lease-duration-seconds 15] [--gc-after-seconds 3600] [--max-concurrent N] [--waiting-retry-seconds 10]
  [--concurrency 16] [--fetch-attempts 5] [--fetch-retry-ms 500] [--chunk-bytes N] [--ranged-threshold-bytes N]
  [--metrics-port N] [--health-port N] [--kubeconfig FILE] [--node-name NAME] [--identity ID]
The runtime config comes from RLMESH_CONFIG (default /etc/rlmesh/config/config.json). See controller/README.md.`);
  process.exit(0);
}

function num(name: keyof typeof a, min = 0): number {
  const v = Number(a[name]);
  if (!Number.isFinite(v) || v < min) {
    log.fatal({ flag: name, value: a[name] }, `--${name} must be a number >= ${min}`);
    process.exit(2);
  }
  return v;
}

const role = a.role as string;
if (!['reconciler', 'cache-filler', 'all'].includes(role)) {
  log.fatal({ role }, '--role must be reconciler, cache-filler or all');
  process.exit(2);
}
const reconcilerOn = role !== 'cache-filler';
const fillerOn = role !== 'reconciler';

let config: RuntimeConfig;
try {
  config = loadRuntimeConfig();
} catch (err) {
  log.fatal(errorMessage(err));
  process.exit(1);
}
const runs = config.runsNamespace;
const kc = new k8s.KubeConfig();
if (a.kubeconfig) kc.loadFromFile(a.kubeconfig);
else kc.loadFromDefault();
const core = kc.makeApiClient(k8s.CoreV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const coordination = kc.makeApiClient(k8s.CoordinationV1Api);
const metrics = createMetrics();
const identity = a.identity ?? process.env.POD_NAME ?? `${hostname()}-${process.pid}`;
const nodeName = a['node-name'] ?? process.env.NODE_NAME;
const watchdogMs = num('watchdog-seconds', 1) * 1000;
const stoppers: (() => Promise<void> | void)[] = [];
let synced = false;

type Verb = 'add' | 'update' | 'delete';

function informer<T extends k8s.KubernetesObject>(
  opts: Pick<Parameters<typeof startInformer<T>>[0], 'name' | 'path' | 'list' | 'labelSelector'>,
  onChange: (obj: T, verb: Verb) => void,
): Informer<T> {
  const i = startInformer<T>({ kc, log, watchSilenceMs: watchdogMs, metrics: metrics.informer, ...opts });
  for (const verb of ['add', 'update', 'delete'] as const) i.on(verb, (obj) => onChange(obj, verb));
  return i;
}

function evaluationInformer(onChange: (ev: RLMeshEvaluation, verb: Verb) => void): Informer<RLMeshEvaluation & k8s.KubernetesObject> {
  return informer<RLMeshEvaluation & k8s.KubernetesObject>({
    name: EVALUATION.plural,
    path: `/apis/${GROUP}/${VERSION}/namespaces/${runs}/${EVALUATION.plural}`,
    list: (page) => custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: runs, plural: EVALUATION.plural, ...page }) as Promise<Page<RLMeshEvaluation>>,
  }, onChange);
}

function cacheInformer(onChange: (c: RLMeshCache) => void): Informer<RLMeshCache & k8s.KubernetesObject> {
  return informer<RLMeshCache & k8s.KubernetesObject>({
    name: CACHE.plural,
    path: `/apis/${GROUP}/${VERSION}/${CACHE.plural}`,
    list: (page) => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: CACHE.plural, ...page }) as Promise<Page<RLMeshCache>>,
  }, onChange);
}

const keyOf = (ev: { metadata?: { namespace?: string; name?: string } }): string => `${ev.metadata?.namespace}/${ev.metadata?.name}`;

function queue(name: string, worker: (key: string) => Promise<void | { requeueAfterMs?: number }>): WorkQueue {
  return new WorkQueue({
    worker,
    concurrency: num('concurrency', 1),
    log,
    metrics: metrics.workQueue(name),
    onProcessed: (_key, ok, ms) => {
      metrics.reconciles.inc({ queue: name, outcome: ok ? 'ok' : 'error' });
      metrics.reconcileSeconds.observe({ queue: name }, ms / 1000);
    },
  });
}

async function startReconciler(): Promise<void> {
  // the queue only runs once started, after the reconciler below exists
  const q = queue('evaluations', (key) => reconciler.reconcile(key));
  const evaluations = evaluationInformer((ev) => q.add(keyOf(ev)));
  // capacity freed (a pod finished or went away, the cache node became known): evaluations
  // that are Waiting try again; everything else is driven by its own object's events
  const requeueWaiting = (): void => {
    for (const ev of evaluations.cache.list(runs)) if (ev.status?.phase === 'Waiting') q.add(keyOf(ev));
  };
  const finishedPods = new Set<string>();
  const labelSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
  const pods = informer<k8s.V1Pod & k8s.KubernetesObject>({
    name: 'pods',
    path: `/api/v1/namespaces/${runs}/pods`,
    labelSelector,
    list: (page) => core.listNamespacedPod({ namespace: runs, labelSelector, ...page }),
  }, (pod, verb) => {
    const owner = pod.metadata?.ownerReferences?.find((o) => o.kind === EVALUATION.kind);
    if (owner) q.add(`${pod.metadata?.namespace}/${owner.name}`);
    const name = pod.metadata?.name ?? '';
    const finished = pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
    if (verb === 'delete') finishedPods.delete(name);
    if (verb === 'delete' || (finished && !finishedPods.has(name))) {
      if (finished) finishedPods.add(name);
      requeueWaiting();
    }
  });
  const caches = cacheInformer(() => requeueWaiting());
  stoppers.push(() => evaluations.stop(), () => pods.stop(), () => caches.stop(), () => q.stop());
  await Promise.all([evaluations.synced, pods.synced, caches.synced]);
  // new evaluation pods wait in an init container for their NetworkPolicies while the probe finds them enforced
  const probe = config.preflight?.networkPolicyProbe;
  const proxyUrl = await resolveProxyUrl(core, config.egress.proxyUrl, log);
  log.info({ proxyUrl }, 'evaluation pods reach the egress proxy by its ClusterIP');
  let enforced = probe?.enabled ? await storedProbePassed(kc, config.namespace) : false;
  const reconciler = new EvaluationReconciler({
    core,
    custom,
    evaluations: evaluations.cache,
    pods: pods.cache,
    caches: caches.cache,
    events: new EventRecorder(core, 'rlmesh-cluster-controller', identity, log),
    metrics,
    log,
    settings: {
      namespace: runs,
      pullSecret: config.credentials.pullSecret,
      proxyUrl,
      networkGate: () => {
        const targets = gateTargets(proxyUrl);
        return enforced && probe?.image && targets ? { image: probe.image, ...targets, graceSeconds: GATE_GRACE_SECONDS } : undefined;
      },
      cacheName: config.artifactCache.cacheName,
      pvcName: config.artifactCache.pvcName,
      accessModes: config.artifactCache.accessModes,
      gcAfterMs: num('gc-after-seconds') * 1000,
      waitingRetryMs: num('waiting-retry-seconds') * 1000,
      ...(a['max-concurrent'] ? { maxConcurrent: num('max-concurrent', 1) } : {}),
    },
  });
  q.start();
  for (const ev of evaluations.cache.list(runs)) q.add(keyOf(ev));
  log.info({ namespace: runs }, 'evaluation reconciler started');
  // preflight: does the CNI enforce NetworkPolicy? (result read by the agent's preflight)
  if (probe?.enabled) {
    const stop = startNetworkPolicyProbeLoop({
      kc,
      namespace: config.namespace,
      runsNamespace: runs,
      image: probe.image,
      // the probe may run before the join wrote the pull Secret: the join token's pulls the runtime image until then
      pullSecrets: [config.credentials.pullSecret, config.credentials.joinPullSecret].filter(Boolean),
      targets: defaultProbeTargets(proxyUrl, metricsPort),
      log,
      active: () => elector.leading,
      onResult: (r) => (enforced = r.verdict === 'pass'),
    });
    stoppers.push(stop);
  }
}

async function startFiller(): Promise<void> {
  const store = new ArtifactStore(a['cache-dir']!);
  try {
    await store.init();
  } catch (err) {
    log.fatal({ cacheDir: a['cache-dir'] }, `cannot use the artifact cache directory: ${errorMessage(err)}; mount the cache PVC read-write there (or pass --cache-dir)`);
    process.exit(1);
  }
  const fetcher = new ArtifactFetcher(store, log, metrics, {
    attempts: num('fetch-attempts', 1),
    baseDelayMs: num('fetch-retry-ms'),
    chunkBytes: num('chunk-bytes', 1024),
    rangedThresholdBytes: num('ranged-threshold-bytes'),
  });
  let filler: CacheFiller | undefined = undefined;
  const q = queue('artifacts', (key) => filler!.reconcile(key));
  const evaluations = evaluationInformer((ev, verb) => {
    q.add(keyOf(ev));
    if (verb === 'delete') filler?.forget(ev);
    // a finished or deleted evaluation releases its artifacts for eviction
    if (verb === 'delete' || isFinished(ev.status?.phase)) filler?.scheduleHousekeeping();
  });
  const caches = cacheInformer(() => filler?.scheduleHousekeeping());
  stoppers.push(() => evaluations.stop(), () => caches.stop(), () => q.stop());
  await Promise.all([evaluations.synced, caches.synced]);
  filler = new CacheFiller({
    core,
    custom,
    evaluations: evaluations.cache,
    caches: caches.cache,
    store,
    fetcher,
    metrics,
    log,
    settings: {
      namespace: runs,
      cacheName: config.artifactCache.cacheName,
      pvcName: config.artifactCache.pvcName,
      accessModes: config.artifactCache.accessModes,
      ...(nodeName ? { nodeName } : {}),
      ...(a['capacity-bytes'] ? { capacityBytes: num('capacity-bytes', 1) } : {}),
      secretGraceMs: num('secret-grace-seconds') * 1000,
    },
  });
  await filler.ensureCacheObject();
  await filler.housekeeping();
  const tick = setInterval(() => filler!.scheduleHousekeeping(0), 30_000);
  tick.unref();
  stoppers.push(() => clearInterval(tick));
  q.start();
  for (const ev of evaluations.cache.list(runs)) q.add(keyOf(ev));
  log.info({ namespace: runs, cacheDir: store.root, nodeName }, 'artifact cache filler started');
}

function serve(name: string, port: number, handler: Parameters<typeof createServer>[1]): Server {
  const server = createServer(handler);
  // all interfaces in a pod (kubelet probes, Prometheus); RLMESH_LISTEN_HOST=127.0.0.1 when run on a shared host
  server.listen(port, process.env.RLMESH_LISTEN_HOST, () => log.info({ server: name, port: (server.address() as { port: number }).port }, 'listening'));
  return server;
}

const metricsPort = a['metrics-port'] ? num('metrics-port') : config.ports.metrics;
const metricsServer = serve('metrics', metricsPort, (req, res) => {
  if (req.url === '/metrics') {
    metrics.registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body),
      () => res.writeHead(500).end(),
    );
  } else res.writeHead(404).end();
});
const healthServer = serve('health', a['health-port'] ? num('health-port') : config.ports.health, (req, res) => {
  if (req.url === '/healthz') res.writeHead(200).end('ok');
  else if (req.url === '/readyz') res.writeHead(synced || !elector.leading ? 200 : 503).end(synced ? 'leader' : elector.leading ? 'syncing' : 'standby');
  else res.writeHead(404).end();
});

const lease =
  role === 'cache-filler'
    ? { namespace: runs, name: 'rlmesh-artifact-cache-filler' }
    : { namespace: config.namespace, name: 'rlmesh-cluster-controller' };
const elector = new LeaderElector({
  coordination,
  ...lease,
  identity,
  leaseDurationSeconds: num('lease-duration-seconds', 1),
  log,
  onStartedLeading: () => {
    metrics.leader.set({ role }, 1);
    Promise.all([reconcilerOn ? startReconciler() : undefined, fillerOn ? startFiller() : undefined]).then(
      () => {
        synced = true;
      },
      (err: unknown) => {
        log.fatal(errorFields(err), 'could not start; exiting so Kubernetes restarts the controller');
        process.exit(1);
      },
    );
  },
  onStoppedLeading: () => {
    metrics.leader.set({ role }, 0);
    // everything in memory assumed leadership: a fresh process rejoins the election cleanly
    log.error('lost leadership; exiting so a fresh start rejoins the election');
    process.exit(1);
  },
});
log.info({ role, identity, lease: `${lease.namespace}/${lease.name}` }, 'waiting to become leader');
elector.start();

let shuttingDown = false;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    if (shuttingDown) return;
    shuttingDown = true;
    log.info({ signal: sig }, 'shutting down; releasing the leader Lease');
    void (async () => {
      for (const s of stoppers) await Promise.resolve(s()).catch(() => {});
      await elector.stop();
      metricsServer.close();
      healthServer.close();
      process.exit(0);
    })();
  });
}
