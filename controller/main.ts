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
import { hostname } from 'node:os';
import * as k8s from '@kubernetes/client-node';
import { reuseConnections } from '../lib/kube-transport.ts';
import { createLogger } from '../lib/logger.ts';
import { OpsServer } from '../lib/ops-server.ts';
import { listenHost as listenHostFromEnv } from '../lib/listen-address.ts';
import { loadRuntimeConfig, type RuntimeConfig } from '../lib/runtime-config.ts';
import { parseControllerFlags, USAGE, type ControllerFlags } from './flags.ts';
import { ControllerInformers } from './informers.ts';
import { LeaderElector } from './leader-election.ts';
import { createMetrics } from './metrics.ts';
import type { RoleContext } from './role-context.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';

const log = createLogger('controller');
// a watch silent this long is re-opened from its last resourceVersion (the apiserver sends bookmarks well within it)
const WATCH_SILENCE_MS = 300_000;

let flags: ControllerFlags;
try {
  flags = parseControllerFlags(process.argv.slice(2));
} catch (err) {
  log.fatal(errorMessage(err));
  process.exit(2);
}
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}
const role = flags.role;
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
if (flags.kubeconfig) kc.loadFromFile(flags.kubeconfig);
else kc.loadFromDefault();
reuseConnections(kc);
const metrics = createMetrics();
const identity = flags.identity ?? process.env.POD_NAME ?? `${hostname()}-${process.pid}`;
const stoppers: (() => Promise<void> | void)[] = [];
let synced = false;

// every interface and address family in a pod (kubelet probes, Prometheus); RLMESH_LISTEN_HOST=127.0.0.1 when run on a shared host
const listenHost = listenHostFromEnv();
const ops = new OpsServer({
  registry: metrics.registry,
  // a standby is ready: it serves probes and waits for the Lease; a leader is ready once its informers synced
  notReady: () => (elector.leading && !synced ? 'leading, informers not synced yet' : undefined),
});
const metricsPort = flags['metrics-port'] ?? config.ports.metrics;
const opsPorts = await ops.listen({ host: listenHost, port: flags['health-port'] ?? config.ports.health }, { host: listenHost, port: metricsPort });
for (const server of ['health', 'metrics'] as const) log.info({ server, port: opsPorts[server] }, 'listening');

const lease =
  role === 'cache-filler'
    ? { namespace: runs, name: 'rlmesh-artifact-cache-filler' }
    : { namespace: config.namespace, name: 'rlmesh-cluster-controller' };
const roleContext: RoleContext = {
  kc,
  core: kc.makeApiClient(k8s.CoreV1Api),
  custom: kc.makeApiClient(k8s.CustomObjectsApi),
  config,
  flags,
  metrics,
  log,
  identity,
  nodeName: flags['node-name'] ?? process.env.NODE_NAME,
  informers: new ControllerInformers({ kc, log, runs, watchSilenceMs: WATCH_SILENCE_MS, metrics: metrics.informer }),
  metricsPort,
  leading: () => elector.leading,
  onStop: (...stop) => stoppers.push(...stop),
};
const elector = new LeaderElector({
  coordination: kc.makeApiClient(k8s.CoordinationV1Api),
  ...lease,
  identity,
  leaseDurationSeconds: flags['lease-duration-seconds'],
  commonLabels: config.pods?.commonLabels,
  log,
  onStartedLeading: () => {
    metrics.leader.set({ role }, 1);
    // each role's code runs only in a controller that plays it: the reconciler never initializes the S3 client
    Promise.all([
      reconcilerOn ? import('./reconciler-role.ts').then((m) => m.startReconcilerRole(roleContext)) : undefined,
      fillerOn ? import('./filler-role.ts').then((m) => m.startFillerRole(roleContext)) : undefined,
    ]).then(
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
      await ops.close();
      process.exit(0);
    })();
  });
}
