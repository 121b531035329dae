// rlmesh-cluster-agent: the cluster's only link to the control plane.
//   config → health/metrics → spool → credentials (join once, or GitOps Secrets)
//   → /v1/info → session ⇄ control plane
//   node/pod informers → node reports; assignments → RLMeshEvaluations;
//   evaluation status → spool → updates; control Secret watch → re-authentication;
//   the operator's drain (rlmesh drain) → refusals and an OperatorDrain upstream.
import { readFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import { OpsServer } from '../lib/ops-server.ts';
import type { PreflightReport } from '../lib/gen/rlmesh/v1/session_pb.ts';
import type { OperatorDrain } from '../lib/operator-drain.ts';
import { startAgentPreflight } from '../lib/preflight/agent.ts';
import { createLogger } from '../lib/logger.ts';
import { ArtifactSources } from './artifact-sources.ts';
import { Assignments, sourcesSecretName } from './assignments.ts';
import { CapacityReporter } from './capacity.ts';
import { controlMessageHandler } from './control-messages.ts';
import { startClusterRanges } from './cluster-ranges.ts';
import { loadAgentConfig, USAGE, wantsHelp, type AgentConfig } from './config.ts';
import { obtainCredentials } from './credential-bootstrap.ts';
import { CredentialWatch } from './credential-watch.ts';
import { CredentialStore } from './credentials.ts';
import { EvaluationStatus, toUpdate } from './evaluation-updates.ts';
import { controlPlaneClient, discoverUntilReachable, type ControlPlaneClient } from './join.ts';
import { OutputHostsPublisher } from './output-hosts.ts';
import { operatorDrainMessage, OperatorDrainWatch } from './operator-drain.ts';
import { createMetrics } from './metrics.ts';
import { Session } from './control-plane-session.ts';
import { Readiness } from './readiness.ts';
import { retryingWrites } from './retrying.ts';
import { Spool } from './spool.ts';
import { RotationLog, startStatusPublisher } from './status-publisher.ts';
import { tokenHash } from '../lib/credential-secret.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';
import { NAMES } from '../lib/fixed-names.ts';

const log = createLogger('agent');
const AGENT_VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

if (wantsHelp(process.argv.slice(2))) {
  console.log(USAGE);
  process.exit(0);
}

let cfg: AgentConfig;
try {
  cfg = loadAgentConfig();
} catch (err) {
  log.fatal(errorMessage(err));
  process.exit(2);
}

const kc = new k8s.KubeConfig();
kc.loadFromDefault();

let spool: Spool;
try {
  spool = await Spool.open(cfg.spoolDir, { maxBytes: cfg.runtime.agent.spoolMaxBytes, log });
} catch (err) {
  log.fatal(errorFields(err), `cannot open the spool at ${cfg.spoolDir}: check the spool PVC is mounted there and writable by the agent's user (or set RLMESH_SPOOL_DIR)`);
  process.exit(1);
}

const readiness = new Readiness();
const metrics = createMetrics({
  spoolBytes: () => spool.bytes,
  spoolRecords: () => spool.records,
  spoolMaxBytes: cfg.runtime.agent.spoolMaxBytes,
  credentialAgeSeconds: readiness.credentialAgeSeconds,
});
const ops = new OpsServer({ registry: metrics.registry, notReady: readiness.notReady });
const ports = await ops.listen({ host: cfg.listenHost, port: cfg.runtime.ports.health }, { host: cfg.listenHost, port: cfg.runtime.ports.metrics });
log.info({ healthPort: ports.health, metricsPort: ports.metrics, version: AGENT_VERSION }, 'agent starting');

const abort = new AbortController();
const timing = { backoffBaseMs: cfg.timing.backoffBaseMs, backoffMaxMs: cfg.timing.backoffMaxMs, signal: abort.signal, log };
const store = new CredentialStore(kc, cfg.runtime);
let cp: ControlPlaneClient;
try {
  cp = controlPlaneClient(cfg.runtime);
} catch (err) {
  log.fatal(errorMessage(err));
  process.exit(2);
}

// The session is made first and started last: the parts below send through it, and it calls back into them
// once started. Its connection opens now, while the credential and /v1/info are under way.
let kubernetesVersion = '';
let capacityReady = false;
let lastPreflight: PreflightReport | undefined;
const session: Session = new Session({
  // the configured API host and port, which discoverUntilReachable() checked /v1/info names (never another endpoint)
  target: { host: cfg.runtime.controlPlane.apiHost, port: cfg.runtime.controlPlane.apiPort },
  ca: cp.ca,
  proxy: cp.proxy,
  credential: () => credWatch.credentials,
  agentVersion: AGENT_VERSION,
  kubernetesVersion: () => kubernetesVersion,
  timing: cfg.timing,
  log,
  // at most 10,000 ids in Hello keeps it small; the rest are simply resent and deduplicated by id
  pendingIds: () => spool.pending().slice(0, 10_000).map((p) => p.id),
  onConnected: () => {
    // what the control plane may have missed: every unacked update, and the nodes as they are now
    for (const p of spool.pending()) if (session.sendUpdate(toUpdate(p))) metrics.updatesSent.inc();
    if (capacityReady && session.sendNodeReport(capacity.fullReport())) metrics.reportsSent.inc();
    if (lastPreflight) session.send({ case: 'preflightReport', value: lastPreflight });
    const drain = operatorDrain.known;
    if (drain !== undefined) sendOperatorDrain(drain);
  },
  onMessage: (m) => handle(m),
  onState: (s) => {
    metrics.setState(s);
    // a change of state is written soon (the publisher starts before the session does)
    statusPublisher.soon();
  },
  onReconnect: () => metrics.reconnects.inc(),
  onVersionSkew: (v) => metrics.setVersionSkew(v),
});
session.preconnect();

// credentials (the Secret, or the join) and discovery of the session endpoint do not depend on each other: both at once
const credentialsObtained = obtainCredentials({
  cfg,
  kc,
  store,
  cp,
  log,
  agentVersion: AGENT_VERSION,
  signal: abort.signal,
  onJoinOutcome: (o) => metrics.joins.inc({ outcome: o }),
  setProblem: (p) => (readiness.credentialProblem = p),
});
const discovered = discoverUntilReachable(cp, { ...timing, onProblem: (p) => p && (readiness.credentialProblem = p) });
const [creds, info] = await Promise.all([credentialsObtained, discovered]);
readiness.credentialProblem = undefined;
// the platform's output hosts, for the egress proxy (ConfigMap rlmesh-output-hosts); the session brings changes
const retrying = retryingWrites(timing);
const outputHosts = new OutputHostsPublisher({ core: kc.makeApiClient(k8s.CoreV1Api), namespace: cfg.runtime.namespace, log, retrying });
if (info.outputHosts) outputHosts.publish(info.outputHosts, 'GET /v1/info');
kc.makeApiClient(k8s.VersionApi)
  .getCode()
  .then((v) => (kubernetesVersion = v.gitVersion))
  .catch(() => undefined);

const rotations = new RotationLog();
const credWatch = new CredentialWatch({
  kc,
  namespace: cfg.runtime.namespace,
  name: cfg.runtime.credentials.controlSecret,
  log,
  watchSilenceMs: cfg.timing.watchSilenceMs,
  informerMetrics: metrics.informer,
  initial: creds,
  onChange: (c) => {
    // the operator wrote a rotated value into the control Secret they deliver: no longer awaited
    rotations.secretHolds('control', tokenHash(c.control));
    session.reauthenticate();
  },
  onProblem: (p) => (readiness.credentialProblem = p),
});
readiness.attach({ session, credentials: credWatch });
credWatch.start();

// the artifacts' credentials, for the cache filler's mounted volume: written before each evaluation, removed after it
const artifactSources = new ArtifactSources({
  core: kc.makeApiClient(k8s.CoreV1Api),
  namespace: cfg.runtime.runsNamespace,
  commonLabels: cfg.runtime.pods?.commonLabels,
  log,
  // owned by the agent's ClusterRole, as its other Secrets: helm uninstall removes them
  owner: async () => {
    const name = cfg.runtime.credentials.ownerClusterRole;
    const role = await kc.makeApiClient(k8s.RbacAuthorizationV1Api).readClusterRole({ name });
    return { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name, uid: role.metadata!.uid! };
  },
});

const evaluations = new EvaluationStatus({
  kc,
  namespace: cfg.runtime.runsNamespace,
  spool,
  log,
  watchSilenceMs: cfg.timing.watchSilenceMs,
  informerMetrics: metrics.informer,
  send: (u) => {
    if (session.sendUpdate(u)) metrics.updatesSent.inc();
  },
  onFinished: (name) => void artifactSources.remove(sourcesSecretName(name)),
});

const assignments = new Assignments({
  kc,
  namespace: cfg.runtime.runsNamespace,
  imageRegistries: cfg.runtime.agent.imageRegistries,
  ...(cfg.runtime.evaluations?.placement ? { placement: cfg.runtime.evaluations.placement } : {}),
  commonLabels: cfg.runtime.pods?.commonLabels,
  log,
  onOutcome: (evaluationId, phase, reason, message) => evaluations.observe(evaluationId, { phase, reason, message, pod: '', node: '' }),
  sources: artifactSources,
});

const capacity = new CapacityReporter({
  kc,
  log,
  nodeSelector: cfg.runtime.agent.nodeSelector,
  ...(cfg.runtime.evaluations?.placement ? { placement: cfg.runtime.evaluations.placement } : {}),
  runsNamespace: cfg.runtime.runsNamespace,
  reportDelayMs: cfg.timing.reportDelayMs,
  watchSilenceMs: cfg.timing.watchSilenceMs,
  informerMetrics: metrics.informer,
  send: (report, latencyMs) => {
    if (!session.sendNodeReport(report)) return;
    metrics.reportsSent.inc();
    metrics.reportLatency.observe(latencyMs / 1000);
  },
});

// the operator's drain: the platform is told on every change and every connect
const operatorDrain = new OperatorDrainWatch({
  kc,
  namespace: cfg.runtime.namespace,
  log,
  watchSilenceMs: cfg.timing.watchSilenceMs,
  informerMetrics: metrics.informer,
  onChange: (d) => {
    sendOperatorDrain(d);
    statusPublisher.soon();
  },
});
function sendOperatorDrain(d: OperatorDrain | null): void {
  session.send(operatorDrainMessage(d));
}

let draining = false;
let drainingSince: string | undefined;
const handle = controlMessageHandler({
  log, session, spool, evaluations, assignments, store, credWatch, metrics, retrying, registryHost: cfg.runtime.controlPlane.registryHost,
  rotations,
  outputHosts,
  onDraining: (d, since) => {
    if (d !== draining) statusPublisher.soon();
    draining = d;
    drainingSince = d ? since : undefined;
  },
  operatorDrain: () => operatorDrain.current(),
  namespace: cfg.runtime.namespace,
});

// what rlmesh status shows of the agent: ConfigMap rlmesh-agent-status, from here on
const statusPublisher = startStatusPublisher({
  kc,
  namespace: cfg.runtime.namespace,
  commonLabels: cfg.runtime.pods?.commonLabels,
  log,
  sources: {
    agentVersion: AGENT_VERSION, session, credentials: credWatch, rotations, spool, spoolMaxBytes: cfg.runtime.agent.spoolMaxBytes, draining: () => draining,
    drains: () => {
      const operator = operatorDrain.known;
      return { ...(draining ? { platform: drainingSince ? { since: drainingSince } : {} } : {}), ...(operator ? { operator } : {}) };
    },
    unfinished: () => evaluations.unfinished(),
  },
  secrets: [
    { namespace: cfg.runtime.namespace, name: cfg.runtime.credentials.controlSecret },
    { namespace: cfg.runtime.namespace, name: cfg.runtime.credentials.pullSecret },
    { namespace: cfg.runtime.runsNamespace, name: cfg.runtime.credentials.pullSecret },
  ],
});
session.start();

void startWithRetry('evaluation status informer', async () => {
  await evaluations.start();
  // what an event missed (the agent was down, a write failed): at start and every 10 minutes
  const sweep = () =>
    artifactSources
      .sweep((entry) => evaluations.stateOf(entry.slice(0, -NAMES.sourcesSecretSuffix.length)) ?? 'running')
      .catch((err: unknown) => log.warn(errorFields(err), 'could not sweep the artifact credentials of finished evaluations; trying again in 10 minutes'));
  void sweep();
  setInterval(sweep, 10 * 60_000).unref();
});
void startWithRetry('operator drain informer', () => operatorDrain.start());

const capacitySynced = startWithRetry('node, pod and ResourceQuota informers', async () => {
  await capacity.start();
  capacityReady = true;
  if (session.sendNodeReport(capacity.fullReport())) metrics.reportsSent.inc();
});

// the cluster's own ranges, for the egress proxy to refuse (ConfigMap rlmesh-cluster-ranges)
const stopClusterRanges = startClusterRanges({ kc, namespace: cfg.runtime.namespace, log, watchSilenceMs: cfg.timing.watchSilenceMs, informerMetrics: metrics.informer });

// preflight once the informers have synced (or after 30 s) and every hour: ConfigMap
// rlmesh-preflight, and the latest report upstream (again on every connect)
const stopPreflight = startAgentPreflight({
  kc,
  config: cfg.runtime,
  log,
  firstRunAfter: capacitySynced,
  send: (r) => {
    lastPreflight = r;
    session.send({ case: 'preflightReport', value: r });
  },
});

/** settles once started, or once the failure is logged */
function startWithRetry(what: string, fn: () => Promise<void>): Promise<void> {
  return fn().catch((err: unknown) => void log.error(errorFields(err), `${what} failed to start`));
}

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'agent stopping');
  abort.abort();
  stopPreflight();
  statusPublisher.stop();
  await Promise.allSettled([stopClusterRanges(), session.stop(), capacity.stop(), evaluations.stop(), credWatch.stop(), operatorDrain.stop()]);
  await spool.close().catch(() => undefined);
  await ops.close();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
