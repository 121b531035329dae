// rlmesh-cluster-agent: the cluster's only link to the control plane.
//   config → health/metrics → spool → credentials (join once, or GitOps Secrets)
//   → /v1/info → session ⇄ control plane
//   node/pod informers → node reports; assignments → RLMeshEvaluations;
//   evaluation status → spool → updates; control Secret watch → re-authentication.
import { readFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import { create } from '@bufbuild/protobuf';
import { CredentialRotatedSchema, type ControlMessage, type PreflightReport } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { startAgentPreflight } from '../lib/preflight/agent.ts';
import { createLogger } from '../lib/logger.ts';
import { Assignments } from './assignments.ts';
import { createBackoff, sleep } from '../lib/backoff.ts';
import { CapacityReporter } from './capacity.ts';
import { startClusterRanges } from './cluster-ranges.ts';
import { loadAgentConfig, type AgentConfig } from './config.ts';
import { obtainCredentials } from './credential-bootstrap.ts';
import { CredentialWatch } from './credential-watch.ts';
import { CredentialStore } from './credentials.ts';
import { tokenHash } from '../lib/credential-secret.ts';
import { EvaluationStatus, toUpdate } from './evaluation-status.ts';
import { Health } from './health.ts';
import { controlPlaneClient, fetchInfo, JoinError, type ControlPlaneClient, type ControlPlaneInfo } from './join.ts';
import { createMetrics } from './metrics.ts';
import { Session } from './session.ts';
import { Spool } from './spool.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';

const log = createLogger('agent');
const AGENT_VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(`usage: rlmesh-runtime agent
The cluster agent takes no flags: the chart's runtime config (RLMESH_CONFIG, default
/etc/rlmesh/config/config.json) and the Deployment's env configure it:
  RLMESH_JOIN_TOKEN   the single-use join token (absent with your own Secrets)
  POD_NAME, POD_NAMESPACE, RLMESH_SPOOL_DIR (default /var/lib/rlmesh/spool)
  RLMESH_AGENT_*_MS   timing overrides for tests (heartbeat, silence, backoff, report delay)
See agent/README.md.`);
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

let credentialProblem: string | undefined = 'credentials not loaded yet';
// assigned once credentials exist; the health and metrics endpoints read them before that
// eslint-disable-next-line prefer-const
let session: Session | undefined;
// eslint-disable-next-line prefer-const
let credWatch: CredentialWatch | undefined;
/** rotations being written (purpose and value hash): a resent one is not written twice at once */
const rotationsInFlight = new Set<string>();
const metrics = createMetrics({
  spoolBytes: () => spool.bytes,
  spoolRecords: () => spool.records,
  spoolMaxBytes: cfg.runtime.agent.spoolMaxBytes,
  credentialAgeSeconds: () => credWatch?.ageSeconds ?? 0,
});
const health = new Health({
  registry: metrics.registry,
  notReady: () => credentialProblem ?? (session?.live ? undefined : `no live session to the control plane (${session?.currentState ?? 'not started'})`),
});
const ports = await health.listen(cfg.listenHost, cfg.runtime.ports.health, cfg.runtime.ports.metrics);
log.info({ healthPort: ports.health, metricsPort: ports.metrics, version: AGENT_VERSION }, 'agent starting');

const abort = new AbortController();
const store = new CredentialStore(kc, cfg.runtime);
let cp: ControlPlaneClient;
try {
  cp = controlPlaneClient(cfg.runtime);
} catch (err) {
  log.fatal(errorMessage(err));
  process.exit(2);
}

const creds = await obtainCredentials({
  cfg,
  kc,
  store,
  cp,
  log,
  agentVersion: AGENT_VERSION,
  signal: abort.signal,
  onJoinOutcome: (o) => metrics.joins.inc({ outcome: o }),
  setProblem: (p) => (credentialProblem = p),
});
credentialProblem = undefined;

await discover(cp);
let kubernetesVersion = '';
kc.makeApiClient(k8s.VersionApi)
  .getCode()
  .then((v) => (kubernetesVersion = v.gitVersion))
  .catch(() => undefined);

credWatch = new CredentialWatch({
  kc,
  namespace: cfg.runtime.namespace,
  name: cfg.runtime.credentials.controlSecret,
  log,
  watchSilenceMs: cfg.timing.watchSilenceMs,
  informerMetrics: metrics.informer,
  initial: creds,
  onChange: () => session?.reauthenticate(),
  onProblem: (p) => (credentialProblem = p),
});
credWatch.start();

const assignments = new Assignments({
  kc,
  namespace: cfg.runtime.runsNamespace,
  imageRegistries: cfg.runtime.agent.imageRegistries,
  log,
  onOutcome: (evaluationId, phase, reason, message) => evaluations.observe(evaluationId, { phase, reason, message, pod: '', node: '' }),
});

const evaluations = new EvaluationStatus({
  kc,
  namespace: cfg.runtime.runsNamespace,
  spool,
  log,
  watchSilenceMs: cfg.timing.watchSilenceMs,
  informerMetrics: metrics.informer,
  send: (u) => {
    if (session?.sendUpdate(u)) metrics.updatesSent.inc();
  },
});

let capacityReady = false;
let lastPreflight: PreflightReport | undefined;
const capacity = new CapacityReporter({
  kc,
  log,
  nodeSelector: cfg.runtime.agent.nodeSelector,
  reportDelayMs: cfg.timing.reportDelayMs,
  watchSilenceMs: cfg.timing.watchSilenceMs,
  informerMetrics: metrics.informer,
  send: (report, latencyMs) => {
    if (!session?.sendNodeReport(report)) return;
    metrics.reportsSent.inc();
    metrics.reportLatency.observe(latencyMs / 1000);
  },
});

session = new Session({
  // the configured API host and port, which discover() checked /v1/info names (never another endpoint)
  target: { host: cfg.runtime.controlPlane.apiHost, port: cfg.runtime.controlPlane.apiPort },
  ca: cp.ca,
  credential: () => credWatch!.credentials,
  agentVersion: AGENT_VERSION,
  kubernetesVersion: () => kubernetesVersion,
  timing: cfg.timing,
  log,
  // at most 10,000 ids in Hello keeps it small; the rest are simply resent and deduplicated by id
  pendingIds: () => spool.pending().slice(0, 10_000).map((p) => p.id),
  onConnected: () => {
    // what the control plane may have missed: every unacked update, and the nodes as they are now
    for (const p of spool.pending()) if (session!.sendUpdate(toUpdate(p))) metrics.updatesSent.inc();
    if (capacityReady && session!.sendNodeReport(capacity.fullReport())) metrics.reportsSent.inc();
    if (lastPreflight) session!.send({ case: 'preflightReport', value: lastPreflight });
  },
  onMessage: (m) => handle(m),
  onState: (s) => metrics.setState(s),
  onReconnect: () => metrics.reconnects.inc(),
});
session.start();

void startWithRetry('evaluation status informer', () => evaluations.start());

const capacitySynced = startWithRetry('node and pod informers', async () => {
  await capacity.start();
  capacityReady = true;
  if (session!.sendNodeReport(capacity.fullReport())) metrics.reportsSent.inc();
});

// the cluster's own ranges, for the egress proxy to refuse (ConfigMap rlmesh-cluster-ranges)
const stopClusterRanges = startClusterRanges({ kc, namespace: cfg.runtime.namespace, log });

// preflight once the informers have synced (or after 30 s) and every hour: ConfigMap
// rlmesh-preflight, and the latest report upstream (again on every connect)
const stopPreflight = startAgentPreflight({
  kc,
  config: cfg.runtime,
  log,
  firstRunAfter: capacitySynced,
  send: (r) => {
    lastPreflight = r;
    session!.send({ case: 'preflightReport', value: r });
  },
});

function handle(m: ControlMessage): void {
  switch (m.msg.case) {
    case 'welcome':
      log.debug({ sessionId: m.msg.value.sessionId, pingIntervalSeconds: m.msg.value.pingIntervalSeconds }, 'welcome');
      return;
    case 'ack': {
      const ids = m.msg.value.ids;
      session!.acked(ids);
      spool.ack(ids).then(
        (acked) => {
          metrics.updatesAcked.inc(acked.length);
          if (acked.length) void evaluations.reported(acked);
        },
        (err: unknown) => log.error(errorFields(err), 'could not record acks in the spool; they will be redelivered and deduplicated'),
      );
      return;
    }
    case 'assignment': {
      const a = m.msg.value;
      retrying(`assignment ${a.evaluationId}`, () => assignments.assign(a)).then(
        () => metrics.assignments.inc({ outcome: 'accepted' }),
        () => metrics.assignments.inc({ outcome: 'failed' }),
      );
      return;
    }
    case 'cancellation': {
      const c = m.msg.value;
      void retrying(`cancellation ${c.evaluationId}`, () => assignments.cancel(c)).catch(() => undefined);
      return;
    }
    case 'credentialRotation': {
      const r = m.msg.value;
      // the control plane sends an unconfirmed rotation again while the session lives: one writer per value
      const key = `${r.purpose}:${tokenHash(r.value)}`;
      if (rotationsInFlight.has(key)) return;
      rotationsInFlight.add(key);
      void (async () => {
        // until stored: a rotation given up on leaves the agent with a credential that expires after the overlap
        await retrying(`storing the rotated ${r.purpose} credential`, () => store.writeRotation(r.purpose, r.value), { forever: true });
        if (r.purpose === 'control') credWatch!.use({ ...credWatch!.credentials, control: r.value });
        session!.send({ case: 'credentialRotated', value: create(CredentialRotatedSchema, { purpose: r.purpose }) });
        log.info({ purpose: r.purpose }, 'rotated credential written to its Secret');
      })()
        .catch(() => undefined)
        .finally(() => rotationsInFlight.delete(key));
      return;
    }
    default:
      return;
  }
}

/** Kubernetes writes that must not be lost to a transient API error: retried with backoff for a few minutes. */
async function retrying(what: string, fn: () => Promise<void>, opts: { forever?: boolean } = {}): Promise<void> {
  const backoff = createBackoff(cfg.timing.backoffBaseMs, cfg.timing.backoffMaxMs);
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if ((attempt >= 10 && !opts.forever) || abort.signal.aborted) {
        log.error(errorFields(err), `${what} failed ${attempt} times; giving up until the control plane sends it again (next session)`);
        throw err;
      }
      const delay = backoff.next();
      log.warn({ ...errorFields(err), retryInMs: delay }, `${what} failed; retrying`);
      await sleep(delay, abort.signal);
    }
  }
}

/** settles once started, or once the failure is logged */
function startWithRetry(what: string, fn: () => Promise<void>): Promise<void> {
  return fn().catch((err: unknown) => void log.error(errorFields(err), `${what} failed to start`));
}

async function discover(client: ControlPlaneClient): Promise<ControlPlaneInfo> {
  const backoff = createBackoff(cfg.timing.backoffBaseMs, cfg.timing.backoffMaxMs);
  for (;;) {
    try {
      const info = await fetchInfo(client);
      credentialProblem = undefined;
      return info;
    } catch (err) {
      const delay = backoff.next();
      credentialProblem = `cannot discover the session endpoint: ${errorMessage(err)}`;
      log.error({ ...(err instanceof JoinError ? { code: err.code } : {}), retryInMs: delay }, err instanceof JoinError ? err.message : `GET /v1/info failed: ${errorMessage(err)}`);
      await sleep(delay, abort.signal);
    }
  }
}

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'agent stopping');
  abort.abort();
  stopPreflight();
  stopClusterRanges();
  await Promise.allSettled([session?.stop(), capacity.stop(), evaluations.stop(), credWatch?.stop()]);
  await spool.close().catch(() => undefined);
  await health.close();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
