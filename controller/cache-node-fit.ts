// With a ReadWriteOnce artifact cache, an evaluation that reads artifacts can run
// only on the node holding the volume. This decides whether that node could ever
// run it: its allocatable (what it has, not what is free now), the platform's and
// the cluster's placement, and its taints. A node that could not fails the
// evaluation at once instead of leaving its pod Pending until the start deadline.
import type { V1Node, V1Toleration } from '@kubernetes/client-node';
import type { RLMeshEvaluation } from '../lib/crds/types.ts';
import { nodeRefusal, type ClusterPlacement, type Taint } from '../lib/evaluation-placement.ts';
import { bytes, cpuMillis, parseQuantity } from '../lib/quantity.ts';
import { GPU_RESOURCE } from './pod-spec.ts';

export const CACHE_NODE_CANNOT_RUN = 'CacheNodeCannotRun';

// Taints the node lifecycle and autoscalers set for a while (cordon, not-ready,
// pressure, scale-down): they pass, so a node in maintenance fails nothing for good.
const PASSING_TAINT_PREFIXES = ['node.kubernetes.io/', 'node.cloudprovider.kubernetes.io/', 'ToBeDeletedByClusterAutoscaler', 'DeletionCandidateOfClusterAutoscaler', 'karpenter.sh/disrupt'];
const lasting = (t: Taint): boolean => !PASSING_TAINT_PREFIXES.some((p) => t.key.startsWith(p));

/** What the node lacks for this evaluation, each as a phrase; empty when it could run it. */
export function cacheNodeShortfalls(node: V1Node, ev: RLMeshEvaluation, policy: ClusterPlacement): string[] {
  const allocatable = node.status?.allocatable ?? {};
  const lacks: string[] = [];
  const r = ev.spec.resources;
  if (r?.cpu && cpuMillis(r.cpu) > cpuMillis(allocatable.cpu)) lacks.push(`cpu ${r.cpu} asked, ${allocatable.cpu ?? 0} allocatable`);
  if (r?.memory && bytes(r.memory) > bytes(allocatable.memory)) lacks.push(`memory ${r.memory} asked, ${allocatable.memory ?? 0} allocatable`);
  if (r?.gpu && r.gpu.count > 0) {
    const name = GPU_RESOURCE[r.gpu.vendor];
    const has = parseQuantity(allocatable[name]);
    if (has === 0) lacks.push(`no ${name} (${r.gpu.count} asked)`);
    else if (r.gpu.count > has) lacks.push(`${name} ${r.gpu.count} asked, ${has} allocatable`);
  }
  const labels = node.metadata?.labels ?? {};
  for (const [key, value] of Object.entries(ev.spec.placement?.nodeSelector ?? {})) {
    if (labels[key] !== value) lacks.push(`label ${key} is not ${value} (the platform's node selector)`);
  }
  const tolerations = [...(policy.tolerations as V1Toleration[]), ...((ev.spec.placement?.tolerations ?? []) as V1Toleration[])];
  const taints = ((node.spec?.taints ?? []) as Taint[]).filter(lasting);
  const refused = nodeRefusal({ ...policy, tolerations: tolerations as ClusterPlacement['tolerations'] }, { name: node.metadata?.name ?? '', labels, taints });
  if (refused) lacks.push(refused);
  return lacks;
}

/** The evaluation's failure message: the node, what it lacks and the fix. */
export function cacheNodeCannotRunMessage(pvcName: string, nodeName: string, lacks: readonly string[]): string {
  return (
    `the artifact cache ${pvcName} is ReadWriteOnce, so an evaluation that reads artifacts runs only on node ${nodeName}, which holds the volume, ` +
    `and ${nodeName} can never run this one: ${lacks.join('; ')}. ` +
    'To run evaluations with artifacts on every node, set storage.className to a ReadWriteMany StorageClass and artifactCache.storage.sharedPvc.accessModes=[ReadWriteMany]'
  );
}
