// Which nodes the agent offers the platform: those an evaluation pod can be
// scheduled on by its platform requirement (kubernetes.io/os and kubernetes.io/arch
// labels, which the scheduler matches; PLATFORM_NODE_REQUIREMENTS in
// lib/fixed-names.ts, the same requirement controller/pod-spec.ts gives every pod).
// Any other node is still reported, with its architecture, allocatable resources and
// GPU models, but unschedulable and with nothing free: the platform sees the node
// and places nothing there.
import type { NodeCapacity } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { PLATFORM_NODE_REQUIREMENTS } from '../lib/fixed-names.ts';

/** Node labels the rule reads (capacity.ts keeps them from the node). */
export const PLATFORM_LABELS = PLATFORM_NODE_REQUIREMENTS.map((r) => r.key);

export function runsEvaluations(labels: Record<string, string>): boolean {
  return PLATFORM_NODE_REQUIREMENTS.every((r) => r.values.includes(labels[r.key] ?? ''));
}

/** The capacity to report for a node: as measured where evaluations can run, else unschedulable with nothing free. */
export function offered(labels: Record<string, string>, cap: NodeCapacity): NodeCapacity {
  if (runsEvaluations(labels)) return cap;
  cap.schedulable = false;
  cap.cpuMillisFree = 0n;
  cap.memoryBytesFree = 0n;
  cap.gpusFree = 0;
  return cap;
}
