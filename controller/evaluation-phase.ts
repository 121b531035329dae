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
      if (status.reason === 'DeadlineExceeded') return deadlineExceeded(ev, base, finishTime);
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
        const message = `cannot pull ${ev.spec.image}: ${waiting.message || waiting.reason}; check registry access and that the pull Secret exists in the runs namespace`;
        return { ...base, phase: 'Pending', reason: waiting.reason ?? 'ImagePullBackOff', message, conditions: nodeName ? [scheduledTrue] : [] };
      }
      if (nodeName) return { ...base, phase: 'Pending', reason: 'Scheduled', message: `pod ${podName} scheduled to node ${nodeName}`, conditions: [scheduledTrue] };
      return { ...base, phase: 'Pending', reason: 'PodCreated', message: `created pod ${podName}` };
    }
  }
}

export function deadlineExceeded(ev: RLMeshEvaluation, base: Partial<Observation>, finishTime: string): Observation {
  const message = `the evaluation ran longer than its deadline of ${ev.spec.deadlineSeconds}s and was stopped`;
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
