// NetworkPolicy enforcement probe. A short-lived pod in the runs namespace
// (restricted Pod Security, no ServiceAccount token) runs, from the runtime image,
//   /usr/local/bin/node /app/lib/preflight/netprobe.js <forbidden host:port> <allowed host:port> <grace seconds>
// which tries this controller's own metrics port (the runs namespace's
// policies forbid it; the controller's own policy admits the probe pod on it,
// so only egress enforcement blocks it) and the egress proxy (allowed). Its exit code
// and termination message become a check result, stored in ConfigMap
// rlmesh-network-policy-probe where the agent's preflight picks it up.
// Opt out with the chart value preflight.networkPolicyProbe.enabled=false.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { NAMES } from '../lib/fixed-names.ts';
import { evaluationPodUser } from '../lib/chart-knobs.ts';
import type { RuntimeConfig } from '../lib/runtime-config.ts';
import { NO_PLACEMENT, requiredNodeTerms, type ClusterPlacement } from '../lib/evaluation-placement.ts';

/** The probe's command in the runtime image, which holds lib/preflight/netprobe.ts compiled to .js. */
export const NETPROBE_COMMAND = ['/usr/local/bin/node', '/app/lib/preflight/netprobe.js'];
import { PROBE_CONFIGMAP, PROBE_KEY, probeIsFresh, readStoredProbe, type StoredProbe } from '../lib/preflight/checks/network-policy.ts';
import { isNotFound } from '../lib/kube-errors.ts';
import { probeVerdict, readCni, type ProbeOutcome, type ProbeTargets } from '../lib/preflight/network-policy.ts';
import type { CheckResult } from '../lib/preflight/types.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';
import { createBackoff } from '../lib/backoff.ts';
import { hostPort, podAddress } from '../lib/listen-address.ts';
import { withCommonLabels } from '../lib/common-labels.ts';

export const PROBE_NAME = NAMES.networkPolicyProbe;
export const PROBE_LABELS = { 'app.kubernetes.io/name': PROBE_NAME, 'app.kubernetes.io/part-of': 'rlmesh-runtime', 'app.kubernetes.io/component': 'preflight' };
export const PROBE_INTERVAL_MS = 3600_000;
/** How long the probe gives an enforcer to program a new pod's rules (kube-router takes seconds). */
const ENFORCEMENT_GRACE_SECONDS = 15;
/** The first retry while enforcement is not seen (then doubling up to the loop's retryMs). */
const FIRST_RETRY_MS = 10_000;
/** How long an evaluation pod's network-ready init container waits for its policies (pods start in bursts). */
export const GATE_GRACE_SECONDS = 60;

/** The last stored probe result (another replica may have written it) if it is recent enough to count, else undefined. */
export async function storedProbe(kc: k8s.KubeConfig, namespace: string, now = Date.now()): Promise<CheckResult | undefined> {
  // unreadable or malformed counts as no result: the fence stays closed until this controller's own probe
  const stored = await readStoredProbe(kc, namespace).catch(() => undefined);
  return stored?.verdict && stored.at && probeIsFresh(stored, now) ? { id: stored.id, verdict: stored.verdict, found: stored.found, fix: stored.fix } : undefined;
}

/** What an evaluation pod's network-ready init container checks: the Kubernetes API (forbidden in the runs namespace) and the proxy (`proxyUrl`, by address: the pod has no DNS). */
export function gateTargets(proxyUrl: string, env = process.env): { forbidden: string; allowed: string } | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) return undefined;
  const proxy = new URL(proxyUrl);
  return { forbidden: hostPort(host, port), allowed: `${proxy.hostname}:${proxy.port || '80'}` };
}

export type ProbeOptions = {
  kc: k8s.KubeConfig;
  /** where ConfigMap rlmesh-network-policy-probe goes (the release namespace) */
  namespace: string;
  runsNamespace: string;
  image: string;
  /** the cluster's pull Secret, then the join token's while the join has not written that */
  pullSecrets: string[];
  targets: ProbeTargets;
  /** runtime config pods: no fixed user under arbitraryUid, and the chart's commonLabels, podLabels and podAnnotations */
  pods?: RuntimeConfig['pods'];
  /** the operator's policy for evaluation pods: the probe runs where they do, and the admission policy holds it to it too */
  placement?: ClusterPlacement;
  log: Logger;
  /** how long to wait for the pod to finish (default 90 s; the pod's own deadline is 60 s) */
  timeoutMs?: number;
  pollMs?: number;
};

/** This pod's IP: POD_IP from the downward API, else its first non-loopback IPv4 address, else (IPv6-only) its first IPv6 one. */
export function ownPodIp(): string | undefined {
  return process.env.POD_IP || podAddress();
}

/** Forbidden: this controller's metrics port; allowed: the egress proxy at `proxyUrl` (by address: the probe pod, in the runs namespace, has no DNS). */
export function defaultProbeTargets(proxyUrl: string, metricsPort: number, podIp = ownPodIp()): ProbeTargets {
  const proxy = new URL(proxyUrl);
  return { forbidden: hostPort(podIp ?? '127.0.0.1', metricsPort), allowed: `${proxy.hostname}:${proxy.port || '80'}` };
}

/** A container running the probe program from `image` (the probe pod's, and an evaluation pod's network-ready gate). */
export function netprobeContainer(name: string, image: string, targets: ProbeTargets, graceSeconds: number): k8s.V1Container {
  return {
    name,
    image,
    // the controller's own image, which it names by digest in a released chart
    imagePullPolicy: image.includes('@sha256:') ? 'IfNotPresent' : 'Always',
    command: [...NETPROBE_COMMAND, targets.forbidden, targets.allowed, String(graceSeconds)],
    terminationMessagePolicy: 'File',
    resources: {
      requests: { cpu: '10m', memory: '32Mi', 'ephemeral-storage': '16Mi' },
      limits: { cpu: '200m', memory: '96Mi', 'ephemeral-storage': '64Mi' },
    },
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
  };
}

export function probePod(o: Pick<ProbeOptions, 'runsNamespace' | 'image' | 'pullSecrets' | 'targets' | 'pods' | 'placement'>): k8s.V1Pod {
  const policy = o.placement ?? NO_PLACEMENT;
  // the operator's labels first: the probe's own keys win (the chart refuses them anyway)
  const labels = withCommonLabels({ ...o.pods?.podLabels, ...PROBE_LABELS }, o.pods?.commonLabels);
  const annotations = o.pods?.podAnnotations ?? {};
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: `${PROBE_NAME}-`, namespace: o.runsNamespace, labels, ...(Object.keys(annotations).length > 0 ? { annotations } : {}) },
    spec: {
      restartPolicy: 'Never',
      activeDeadlineSeconds: 60,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      imagePullSecrets: [...new Set([...o.pullSecrets, ...(o.pods?.imagePullSecrets ?? []).map((s) => s.name)])].map((name) => ({ name })),
      // on the nodes evaluations may use: the operator's node selector, tolerations and required node terms (with linux/amd64)
      ...(Object.keys(policy.nodeSelector).length ? { nodeSelector: { ...policy.nodeSelector } } : {}),
      ...(policy.tolerations.length ? { tolerations: policy.tolerations as k8s.V1Toleration[] } : {}),
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: requiredNodeTerms(policy) } } },
      securityContext: { runAsNonRoot: true, ...evaluationPodUser(o.pods?.arbitraryUid), seccompProfile: { type: 'RuntimeDefault' } },
      containers: [netprobeContainer('probe', o.image, o.targets, ENFORCEMENT_GRACE_SECONDS)],
    },
  };
}

/** The outcome of a finished (or stuck) probe pod. */
export function podOutcome(pod: k8s.V1Pod): ProbeOutcome | undefined {
  const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
  if (terminated) return { kind: 'exited', exitCode: terminated.exitCode, ...(terminated.message ? { message: terminated.message.trim() } : {}) };
  if (pod.status?.phase === 'Failed') return { kind: 'not-run', reason: pod.status.message || pod.status.reason || 'the pod failed before its container ran' };
  return undefined;
}

function stuckReason(pod: k8s.V1Pod | undefined, timeoutMs: number): string {
  const waiting = pod?.status?.containerStatuses?.[0]?.state?.waiting;
  if (waiting) return `its container is waiting: ${waiting.reason}${waiting.message ? ` (${waiting.message})` : ''}`;
  const unscheduled = pod?.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False');
  if (unscheduled) return `it was not scheduled: ${unscheduled.message ?? unscheduled.reason}`;
  return `it did not finish within ${Math.round(timeoutMs / 1000)} s (phase ${pod?.status?.phase ?? 'unknown'})`;
}

export async function runNetworkPolicyProbe(o: ProbeOptions): Promise<CheckResult> {
  const core = o.kc.makeApiClient(k8s.CoreV1Api);
  const timeoutMs = o.timeoutMs ?? 90_000;
  const cni = await readCni(o.kc).catch(() => ({ names: [], enforcing: false, unknown: true }));
  let outcome: ProbeOutcome;
  if (!o.image) {
    outcome = { kind: 'not-run', reason: 'no probe image is configured (runtime config preflight.networkPolicyProbe.image)' };
  } else {
    // the previous probe pod stays until now so that users can inspect it
    const previous = await core.listNamespacedPod({ namespace: o.runsNamespace, labelSelector: `app.kubernetes.io/name=${PROBE_NAME}` });
    for (const p of previous.items) {
      await core.deleteNamespacedPod({ namespace: o.runsNamespace, name: p.metadata!.name!, gracePeriodSeconds: 0 }).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
    }
    outcome = await runPod(core, o, timeoutMs);
  }
  const result = probeVerdict(outcome, o.targets, cni);
  await storeResult(core, o.namespace, { ...result, at: new Date().toISOString() }, o.pods?.commonLabels);
  o.log[result.verdict === 'pass' ? 'info' : 'warn']({ verdict: result.verdict, found: result.found, fix: result.fix }, 'NetworkPolicy probe');
  return result;
}

async function runPod(core: k8s.CoreV1Api, o: ProbeOptions, timeoutMs: number): Promise<ProbeOutcome> {
  let created: k8s.V1Pod;
  try {
    created = await core.createNamespacedPod({ namespace: o.runsNamespace, body: probePod(o) });
  } catch (err) {
    return { kind: 'not-run', reason: `creating it was refused: ${errorMessage(err)}` };
  }
  const name = created.metadata!.name!;
  const deadline = Date.now() + timeoutMs;
  let pod: k8s.V1Pod | undefined = created;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, o.pollMs ?? 1000));
    try {
      pod = await core.readNamespacedPod({ namespace: o.runsNamespace, name });
    } catch (err) {
      if (isNotFound(err)) return { kind: 'not-run', reason: `pod ${name} was deleted before it finished` };
      throw err;
    }
    const outcome = podOutcome(pod);
    if (outcome) return outcome;
  }
  return { kind: 'not-run', reason: `pod ${o.runsNamespace}/${name}: ${stuckReason(pod, timeoutMs)}` };
}

async function storeResult(core: k8s.CoreV1Api, namespace: string, stored: StoredProbe, commonLabels: Readonly<Record<string, string>> | undefined): Promise<void> {
  const body: k8s.V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: PROBE_CONFIGMAP, namespace, labels: withCommonLabels(PROBE_LABELS, commonLabels) },
    data: { [PROBE_KEY]: JSON.stringify(stored), summary: `${stored.verdict}: ${stored.found}` },
  };
  try {
    await core.replaceNamespacedConfigMap({ namespace, name: PROBE_CONFIGMAP, body });
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await core.createNamespacedConfigMap({ namespace, body });
  }
}

/**
 * Probes now, then every hour while enforcement is seen; while it is not (evaluations wait for it),
 * again after a backoff from 10 s up to `retryMs`, since at install the proxy the probe must reach
 * may simply not be ready yet. Only while `active()` (the leader) says so; returns stop().
 */
export function startNetworkPolicyProbeLoop(
  o: ProbeOptions & { intervalMs?: number; retryMs?: number; active?: () => boolean; onResult?: (r: CheckResult) => void },
): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const schedule = (ms: number): void => {
    if (stopped) return;
    timer = setTimeout(tick, ms);
    timer.unref();
  };
  const interval = o.intervalMs ?? PROBE_INTERVAL_MS;
  const retry = Math.min(o.retryMs ?? interval, interval);
  const backoff = createBackoff(Math.min(FIRST_RETRY_MS, retry), retry);
  function tick(): void {
    if (o.active && !o.active()) return schedule(retry);
    runNetworkPolicyProbe(o)
      .then((r) => {
        o.onResult?.(r);
        if (r.verdict === 'pass') backoff.reset();
        schedule(r.verdict === 'pass' ? interval : backoff.next());
      })
      .catch((err: unknown) => {
        const next = backoff.next();
        o.log.error(errorFields(err), `NetworkPolicy probe could not run; next try in ${Math.round(next / 1000)} s`);
        schedule(next);
      });
  }
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
