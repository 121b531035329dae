// What an evaluation's status should say, computed from what the controller
// observed (its pod, its artifacts, a refusal). Pure, so every rule is tested
// without a cluster.
import type { V1Pod } from '@kubernetes/client-node';
import { isFinished, type Condition, type EvaluationStatus, type Phase, type RLMeshEvaluation } from '../lib/crds/types.ts';
import { NETWORK_GATE_CONTAINER } from './pod-spec.ts';

export type ConditionObservation = Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>;

export type Observation = {
  phase: Phase;
  reason: string;
  message: string;
  podName?: string;
  nodeName?: string;
  startTime?: string;
  finishTime?: string;
  exitCode?: number;
  conditions?: ConditionObservation[];
};

const iso = (d: Date | string | undefined): string | undefined => (d === undefined ? undefined : new Date(d).toISOString());

/** The phase an evaluation's pod is in, in the cluster's own words where it refuses. */
export function observePod(pod: V1Pod, ev: RLMeshEvaluation, now = new Date()): Observation {
  const podName = pod.metadata?.name;
  const nodeName = pod.spec?.nodeName || undefined;
  const status = pod.status ?? {};
  const terminated = status.containerStatuses?.find((c) => c.state?.terminated)?.state?.terminated;
  const waiting = status.containerStatuses?.find((c) => c.state?.waiting)?.state?.waiting;
  const scheduled = status.conditions?.find((c) => c.type === 'PodScheduled');
  // when a container started, not when the kubelet accepted the pod: an image that never pulls never started
  const started = status.containerStatuses?.map((c) => c.state?.running?.startedAt ?? c.state?.terminated?.startedAt).find((t) => t !== undefined);
  const startTime = iso(started);
  const base = { podName, nodeName, startTime };
  const scheduledTrue: ConditionObservation = { type: 'Scheduled', status: 'True', reason: 'Scheduled', message: `pod ${podName} is on node ${nodeName}` };

  switch (status.phase) {
    case 'Succeeded': {
      const exitCode = terminated?.exitCode ?? 0;
      const finishTime = iso(terminated?.finishedAt) ?? now.toISOString();
      return {
        ...base,
        phase: 'Succeeded',
        reason: 'Completed',
        message: `the evaluation exited with code ${exitCode}`,
        exitCode,
        finishTime,
        conditions: [scheduledTrue, { type: 'Completed', status: 'True', reason: 'Completed', message: `exit code ${exitCode}` }],
      };
    }
    case 'Failed': {
      const finishTime = iso(terminated?.finishedAt) ?? now.toISOString();
      if (status.reason === 'DeadlineExceeded') return deadlineExceeded(ev, base, finishTime, podHoldup(pod));
      const gate = status.initContainerStatuses?.find((c) => c.name === NETWORK_GATE_CONTAINER)?.state?.terminated;
      if (gate && gate.exitCode !== 0) {
        const message = `the evaluation did not start: its pod's NetworkPolicies were not in force in time (${gate.message?.trim() || `exit code ${gate.exitCode}`}); the egress proxy must be its only way out. Check the CNI's NetworkPolicy enforcement (rlmesh preflight, check network-policy) and submit it again`;
        return { ...base, phase: 'Failed', reason: 'NetworkNotReady', message, finishTime, conditions: [{ type: 'Completed', status: 'True', reason: 'NetworkNotReady', message }] };
      }
      const exitCode = terminated?.exitCode;
      const reason = exitCode !== undefined && exitCode !== 0 ? 'NonZeroExit' : status.reason || 'PodFailed';
      const message =
        exitCode !== undefined
          ? `the evaluation container exited with code ${exitCode}${terminated?.reason ? ` (${terminated.reason})` : ''}${terminated?.message ? `: ${terminated.message}` : ''}`
          : `the evaluation pod failed: ${status.message || status.reason || 'no reason given by the kubelet'}`;
      return {
        ...base,
        phase: 'Failed',
        reason,
        message,
        exitCode,
        finishTime,
        conditions: [{ type: 'Completed', status: 'True', reason, message }],
      };
    }
    case 'Running':
      return { ...base, phase: 'Running', reason: 'Started', message: `running on node ${nodeName}`, conditions: [scheduledTrue] };
    default: {
      if (scheduled?.status === 'False') {
        // the scheduler's own words, e.g. "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
        const message = scheduled.message || 'no node can run the evaluation pod yet';
        return {
          ...base,
          phase: 'Waiting',
          reason: scheduled.reason || 'Unschedulable',
          message,
          conditions: [{ type: 'Scheduled', status: 'False', reason: scheduled.reason || 'Unschedulable', message }],
        };
      }
      if (waiting && /ImagePull|ErrImage|InvalidImageName/.test(waiting.reason ?? '')) {
        const secrets = (pod.spec?.imagePullSecrets ?? []).map((r) => r.name).filter(Boolean);
        const ns = pod.metadata?.namespace ?? 'rlmesh-runs';
        const message = `cannot pull ${ev.spec.image}: ${waiting.message || waiting.reason}; check registry access and that the pull Secret exists in the runs namespace (the pod pulls with ${secrets.join(', ') || 'none'} in ${ns}, each a kubernetes.io/dockerconfigjson with a credential for its registry; rlmesh preflight checks those of evaluations.imagePullSecrets)`;
        return { ...base, phase: 'Pending', reason: waiting.reason ?? 'ImagePullBackOff', message, conditions: nodeName ? [scheduledTrue] : [] };
      }
      if (nodeName) return { ...base, phase: 'Pending', reason: 'Scheduled', message: `pod ${podName} scheduled to node ${nodeName}`, conditions: [scheduledTrue] };
      return { ...base, phase: 'Pending', reason: 'PodCreated', message: `created pod ${podName}` };
    }
  }
}

export function deadlineExceeded(ev: RLMeshEvaluation, base: Partial<Observation>, finishTime: string, holdup?: Holdup): Observation {
  // the kubelet counts activeDeadlineSeconds from when it accepted the pod, so a pod whose image never pulled reaches it too
  const message =
    (base.startTime ?? ev.status?.startTime) === undefined
      ? `the evaluation's pod reached its deadline of ${ev.spec.deadlineSeconds}s before its container started, and was stopped${holdup ? `; ${lastWord(holdup)}` : ''}`
      : `the evaluation ran longer than its deadline of ${ev.spec.deadlineSeconds}s and was stopped`;
  return {
    ...base,
    phase: 'Failed',
    reason: 'DeadlineExceeded',
    message,
    finishTime,
    conditions: [{ type: 'Completed', status: 'True', reason: 'DeadlineExceeded', message }],
  };
}

/** Milliseconds until the pod's deadline passes (negative when it has), or undefined before it starts. */
export function msUntilDeadline(pod: V1Pod, ev: RLMeshEvaluation, now = Date.now()): number | undefined {
  const started = pod.status?.startTime;
  if (!started) return undefined;
  return new Date(started).getTime() + ev.spec.deadlineSeconds * 1000 - now;
}

/** What last kept an evaluation from starting, in the words of the part of the cluster that kept it. */
export type Holdup = { by: 'scheduler' | 'kubelet' | 'quota' | 'controller'; reason: string; message: string; container?: string };

const BY: Record<Holdup['by'], string> = {
  scheduler: 'the scheduler',
  kubelet: 'the kubelet',
  quota: "the API server's ResourceQuota admission",
  controller: 'the controller',
};
const lastWord = (h: Holdup): string =>
  `${BY[h.by]} last said ${h.reason}${h.container ? ` (container ${h.container})` : ''}${h.message.trim() ? `: ${h.message.trim().replace(/\.$/, '')}` : ''}`;
const IMAGE_PULL = /ImagePull|ErrImage|InvalidImageName/;

/** Why a pod that has not started is not running yet: the scheduler's refusal, else a waiting or still-running container. */
export function podHoldup(pod: V1Pod): Holdup | undefined {
  const status = pod.status ?? {};
  const scheduled = status.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False') return { by: 'scheduler', reason: scheduled.reason || 'Unschedulable', message: scheduled.message ?? '' };
  for (const c of [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])]) {
    const waiting = c.state?.waiting;
    // PodInitializing only says an init container is still at work; that one is named below
    if (waiting?.reason && waiting.reason !== 'PodInitializing') {
      return { by: 'kubelet', reason: waiting.reason, message: waiting.message ?? '', container: c.name };
    }
  }
  const init = status.initContainerStatuses?.find((c) => c.state?.running);
  if (init) return { by: 'kubelet', reason: 'Initializing', message: 'the init container was still running', container: init.name };
  return undefined;
}

// reasons the controller itself waits for (the pod is not created yet); their messages say what to do
const CONTROLLER_WAITS = new Set(['ConcurrencyLimit', 'CacheNodeUnknown', 'NetworkPolicyNotEnforced', 'ControllerForbidden', 'UserNamespacesUnsupported']);

/** The holdup an evaluation's status last recorded, for when there is no pod to ask (a quota refusal, a wait of the controller's). */
export function statusHoldup(status: EvaluationStatus | undefined): Holdup | undefined {
  if ((status?.phase !== 'Waiting' && status?.phase !== 'Pending') || !status.reason || PENDING_STEPS.has(status.reason)) return undefined;
  const reason = status.reason;
  const by = reason === 'QuotaExceeded' ? 'quota' : CONTROLLER_WAITS.has(reason) ? 'controller' : status.phase === 'Waiting' ? 'scheduler' : 'kubelet';
  return { by, reason, message: status.message ?? '' };
}

/**
 * When an evaluation's start deadline began: its creation, or, when it has
 * artifacts, the moment the cache held them all. Fetching is not counted: it
 * is progress with failures of its own (source errors, digest and size
 * mismatches, retries), it lasts as long as the artifacts are large, and
 * without a pod it holds none of the quota.
 */
export function startClock(ev: RLMeshEvaluation): { from: number; since: string } | undefined {
  const created = ev.metadata.creationTimestamp;
  if (created === undefined) return undefined;
  const cached = ev.status?.artifacts;
  if ((ev.spec.artifacts?.length ?? 0) > 0 && cached?.state === 'Ready' && cached.updatedAt) {
    return { from: Math.max(new Date(created).getTime(), new Date(cached.updatedAt).getTime()), since: 'its artifacts were cached' };
  }
  return { from: new Date(created).getTime(), since: 'it was created' };
}

/** Milliseconds until the evaluation must have started (negative when that has passed), or undefined without a creation time. */
export function msUntilStartDeadline(ev: RLMeshEvaluation, startDeadlineSeconds: number, now = Date.now()): number | undefined {
  const clock = startClock(ev);
  return clock && clock.from + startDeadlineSeconds * 1000 - now;
}

function startHint(h: Holdup | undefined, image: string): string {
  if (h?.by === 'scheduler') return 'Add or free nodes that fit its resources and placement (a node pool that scales up must do so in time). ';
  if (h?.by === 'kubelet' && IMAGE_PULL.test(h.reason)) return `Check that ${image} exists and that its registry accepts the cluster's pull Secret. `;
  if (h?.by === 'kubelet') return 'Fix what the kubelet names. ';
  if (h?.by === 'quota') return 'Raise the quota (evaluations.resourceQuota.hard) or run fewer evaluations at once. ';
  if (h?.reason === 'ConcurrencyLimit') return 'Raise controller.maxConcurrent or run fewer evaluations at once. ';
  // the controller's other waits say what to do in their own message
  return '';
}

/** The evaluation did not start within evaluations.startDeadlineSeconds: Failed, quoting what held it last and what to do. */
export function startDeadlineExceeded(ev: RLMeshEvaluation, holdup: Holdup | undefined, startDeadlineSeconds: number, base: Partial<Observation> = {}, now = new Date()): Observation {
  const since = startClock(ev)?.since ?? 'it was created';
  const why = holdup
    ? lastWord(holdup)
    : base.nodeName
      ? `node ${base.nodeName} never reported its containers (is its kubelet up?)`
      : 'no scheduler took the pod or said why (is one running for it?)';
  const message =
    `the evaluation did not start within ${startDeadlineSeconds}s of when ${since} (evaluations.startDeadlineSeconds)${base.podName ? `, so its pod ${base.podName} was stopped` : ''}: ${why}. ` +
    `${startHint(holdup, ev.spec.image)}Where starting legitimately takes longer (a cold pull of a large image, GPU nodes scaling up), raise evaluations.startDeadlineSeconds`;
  return {
    ...base,
    phase: 'Failed',
    reason: 'StartDeadlineExceeded',
    message,
    finishTime: now.toISOString(),
    conditions: [{ type: 'Completed', status: 'True', reason: 'StartDeadlineExceeded', message }],
  };
}

/**
 * The status after an observation: conditions keep their transition time while
 * their status holds; finished phases never change again.
 */
export function nextStatus(current: EvaluationStatus | undefined, obs: Observation, generation: number | undefined, now = new Date()): EvaluationStatus {
  const cur = current ?? {};
  if (isFinished(cur.phase)) return cur;
  const conditions = [...(cur.conditions ?? [])];
  for (const c of obs.conditions ?? []) {
    const i = conditions.findIndex((x) => x.type === c.type);
    const prev = i >= 0 ? conditions[i] : undefined;
    const next: Condition = {
      ...c,
      lastTransitionTime: prev && prev.status === c.status ? prev.lastTransitionTime : now.toISOString(),
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    };
    if (i >= 0) conditions[i] = next;
    else conditions.push(next);
  }
  const out: EvaluationStatus = {
    ...cur,
    phase: obs.phase,
    reason: obs.reason,
    message: obs.message,
    conditions,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  for (const k of ['podName', 'nodeName', 'startTime', 'finishTime', 'exitCode'] as const) {
    if (obs[k] !== undefined) (out as Record<string, unknown>)[k] = obs[k];
  }
  if (isFinished(obs.phase) && !out.finishTime) out.finishTime = now.toISOString();
  return out;
}

/** The fields this controller owns, for a merge patch and for comparing with what is stored. */
export function ownedFields(s: EvaluationStatus): Record<string, unknown> {
  const { phase, reason, message, conditions, podName, nodeName, startTime, finishTime, exitCode, observedGeneration } = s;
  return { phase, reason, message, conditions, podName, nodeName, startTime, finishTime, exitCode, observedGeneration };
}

export function sameOwnedFields(a: EvaluationStatus | undefined, b: EvaluationStatus): boolean {
  return JSON.stringify(ownedFields(a ?? {})) === JSON.stringify(ownedFields(b));
}

// progress within Pending that is not news: the pod was created, then scheduled
const PENDING_STEPS = new Set(['PodCreated', 'Scheduled']);

/**
 * Whether `next` is worth a status write over `current`: one write per phase
 * change, not per step. A Pending pod that is scheduled waits for its next
 * phase (Running carries its node); anything a user must act on, such as an
 * image that does not pull, is written at once, and so is its end.
 */
export function worthWriting(current: EvaluationStatus | undefined, next: EvaluationStatus): boolean {
  if (sameOwnedFields(current, next)) return false;
  const c = current ?? {};
  const routine = c.phase === 'Pending' && next.phase === 'Pending' && PENDING_STEPS.has(c.reason ?? '') && PENDING_STEPS.has(next.reason ?? '');
  return !(routine && c.podName === next.podName);
}
