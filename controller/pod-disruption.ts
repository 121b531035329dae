// Why an evaluation pod stopped, or can no longer be followed, when its code is
// not the cause: the pod was evicted (kubectl drain, the taint manager, the
// kubelet under node pressure), preempted, or its node was lost. Kubernetes
// says the first three with the pod's DisruptionTarget condition; a lost node
// only with the node's Ready condition, which the node lifecycle controller
// sets to Unknown once the kubelet has been silent for its grace period
// (--node-monitor-grace-period). Pure, so every rule is tested without a cluster.
import type { V1Node, V1Pod } from '@kubernetes/client-node';

export type DisruptionReason = 'NodeLost' | 'Evicted' | 'Preempted';
export type Disruption = { reason: DisruptionReason; message: string };

const AGAIN = 'the evaluated code did not fail; submit the evaluation again';

/** The node's Ready condition when the kubelet has stopped reporting (Unknown), else undefined. */
export function lostNode(node: Pick<V1Node, 'status'> | undefined): { since?: string; message?: string } | undefined {
  const ready = node?.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'Unknown') return undefined;
  const since = ready.lastTransitionTime ? new Date(ready.lastTransitionTime).toISOString() : undefined;
  return { ...(since ? { since } : {}), ...(ready.message ? { message: ready.message } : {}) };
}

/**
 * The disruption that ended or took an evaluation's pod, if any. A pod that
 * succeeded keeps its result, whatever happened to it afterwards; a node lost
 * under a pod that already finished changes nothing.
 */
export function podDisruption(pod: V1Pod, node: Pick<V1Node, 'status'> | undefined): Disruption | undefined {
  const phase = pod.status?.phase;
  if (phase === 'Succeeded') return undefined;
  const podName = pod.metadata?.name ?? 'the evaluation pod';
  const nodeName = pod.spec?.nodeName ?? 'its node';
  const target = pod.status?.conditions?.find((c) => c.type === 'DisruptionTarget' && c.status === 'True');
  if (target) {
    const said = target.message ? ` (${target.message.trim().replace(/\.$/, '')})` : '';
    switch (target.reason) {
      case 'EvictionByEvictionAPI':
        return { reason: 'Evicted', message: `pod ${podName} was evicted from node ${nodeName} through the Eviction API, as kubectl drain, a cluster autoscaler or a descheduler does${said}; ${AGAIN}` };
      case 'PreemptionByScheduler':
        return { reason: 'Preempted', message: `pod ${podName} was preempted on node ${nodeName} by the scheduler for a pod of higher priority${said}; ${AGAIN}` };
      case 'DeletionByTaintManager':
        return lostNode(node)
          ? { reason: 'NodeLost', message: `node ${nodeName} stopped reporting, and pod ${podName} was deleted for its NoExecute taint${said}; ${AGAIN}` }
          : { reason: 'Evicted', message: `pod ${podName} was deleted from node ${nodeName} for a NoExecute taint it does not tolerate${said}; ${AGAIN}` };
      case 'DeletionByPodGC':
        return { reason: 'NodeLost', message: `pod ${podName} was deleted by the pod garbage collector because node ${nodeName} is gone or out of service${said}; ${AGAIN}` };
      case 'TerminationByKubelet':
        return { reason: 'Evicted', message: `the kubelet of node ${nodeName} stopped pod ${podName}, under node pressure or for a node shutdown${said}; ${AGAIN}` };
      default:
        return { reason: 'Evicted', message: `pod ${podName} on node ${nodeName} was disrupted: ${target.reason ?? 'no reason given'}${said}; ${AGAIN}` };
    }
  }
  if (phase === 'Failed') return undefined;
  const lost = lostNode(node);
  if (!lost || !pod.spec?.nodeName) return undefined;
  const since = lost.since ? ` since ${lost.since}` : '';
  const why = lost.message ? `: ${lost.message.trim().replace(/\.$/, '')}` : '';
  return {
    reason: 'NodeLost',
    message: `node ${nodeName} stopped reporting to the API server (its Ready condition is Unknown${since}${why}), so pod ${podName} is presumed lost with it and was stopped; ${AGAIN}. Check node ${nodeName}`,
  };
}
