// Which nodes the agent offers the platform: those an evaluation pod can be
// scheduled on. Always by its platform requirement (kubernetes.io/os and
// kubernetes.io/arch labels, which the scheduler matches; PLATFORM_NODE_REQUIREMENTS
// in lib/fixed-names.ts, the same requirement controller/pod-spec.ts gives every
// pod), and by the operator's policy for evaluation pods (lib/evaluation-placement.ts):
// evaluations.nodeSelector, the required node terms of evaluations.affinity, and no
// NoSchedule or NoExecute taint that evaluations.tolerations does not tolerate.
// Any other node is still reported, with its architecture, allocatable resources and
// GPU models, but unschedulable and with nothing free: the platform sees the node
// and places nothing there. agent.reportNodeSelector narrows the nodes reported at all.
import type { NodeCapacity } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { PLATFORM_NODE_REQUIREMENTS } from '../lib/fixed-names.ts';
import { nodeRefusal, NO_PLACEMENT, type ClusterPlacement, type NodeFacts } from '../lib/evaluation-placement.ts';

/** Node labels the platform rule reads (capacity.ts keeps them from the node, with those the operator's policy reads). */
export const PLATFORM_LABELS = PLATFORM_NODE_REQUIREMENTS.map((r) => r.key);

/** Whether evaluation pods can land on a node of these labels (and taints) under the policy. */
export function runsEvaluations(labels: Record<string, string>, placement: ClusterPlacement = NO_PLACEMENT, node: Partial<NodeFacts> = {}): boolean {
  return nodeRefusal(placement, { name: node.name ?? '', labels, taints: node.taints ?? [] }) === undefined;
}

/** The capacity to report for a node: as measured where evaluations can run, else unschedulable with nothing free. */
export function offered(node: NodeFacts, cap: NodeCapacity, placement: ClusterPlacement = NO_PLACEMENT): NodeCapacity {
  if (nodeRefusal(placement, node) === undefined) return cap;
  cap.schedulable = false;
  cap.cpuMillisFree = 0n;
  cap.memoryBytesFree = 0n;
  cap.gpusFree = 0;
  return cap;
}
