// The operator's policy for evaluation pods: the chart values evaluations.nodeSelector,
// tolerations, affinity, priorityClassName, runtimeClassName, podLabels and
// podAnnotations, carried in the runtime config (evaluations.placement). The platform
// cannot override them: its placement (an assignment's node_selector) only narrows
// the cluster's.
// - node selectors are ANDed; a key both set to different values is a conflict;
// - required node terms: each of the cluster's terms ANDed with the runtime's
//   platform requirement (linux/amd64) and, when the pod must run on the cache's
//   node, that node (node selector terms are ORed, so AND distributes over them);
//   preferred terms and pod (anti-)affinity pass through;
// - tolerations, priorityClassName, runtimeClassName, labels and annotations: the cluster's.
// A conflict is refused before anything is created (agent/assignments.ts, and the
// controller for an evaluation written by hand), and the agent reports only the
// nodes this policy allows (agent/eligible-nodes.ts).
import type { V1Affinity, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1Toleration } from '@kubernetes/client-node';
import { z } from 'zod';
import { PLATFORM_NODE_REQUIREMENTS } from './fixed-names.ts';
import { matchesNodeSelectorTerms, requirementHolds } from './preflight/label-selector.ts';

/** evaluations.placement in the runtime config (the chart's values schema checks each field, lib/values-schema.ts). */
export const clusterPlacementSchema = z
  .object({
    nodeSelector: z.record(z.string(), z.string()).default({}),
    tolerations: z.array(z.record(z.string(), z.unknown())).default([]),
    affinity: z.record(z.string(), z.unknown()).default({}),
    priorityClassName: z.string().default(''),
    runtimeClassName: z.string().default(''),
    podLabels: z.record(z.string(), z.string()).default({}),
    podAnnotations: z.record(z.string(), z.string()).default({}),
  })
  .strict();

export type ClusterPlacement = z.output<typeof clusterPlacementSchema>;

/** No policy: what an install without these values (or a config rendered before they existed) means. */
export const NO_PLACEMENT: ClusterPlacement = clusterPlacementSchema.parse({});

/** Keys of the labels and annotations the controller sets on every evaluation pod (controller/pod-spec.ts): evaluations.podLabels and podAnnotations may not set them. */
export const RESERVED_LABEL_KEYS = ['app.kubernetes.io/managed-by', 'app.kubernetes.io/name', 'app.kubernetes.io/part-of', 'app.kubernetes.io/instance', 'app.kubernetes.io/component'];
/** The prefix of the keys the runtime itself uses (rlmesh.dev/evaluation, rlmesh.dev/evaluation-id, …). */
export const RESERVED_KEY_PREFIX = 'rlmesh.dev/';
export const isReservedKey = (key: string): boolean => key.startsWith(RESERVED_KEY_PREFIX) || RESERVED_LABEL_KEYS.includes(key);

type NodeAffinity = {
  requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: V1NodeSelectorTerm[] };
  preferredDuringSchedulingIgnoredDuringExecution?: unknown[];
};

/** The cluster's required node terms (ORed); none: every node. */
export function clusterNodeTerms(p: ClusterPlacement): V1NodeSelectorTerm[] {
  return (p.affinity.nodeAffinity as NodeAffinity | undefined)?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
}

const platformRequirements = (): V1NodeSelectorRequirement[] => PLATFORM_NODE_REQUIREMENTS.map((r) => ({ ...r, values: [...r.values] }));

/**
 * The required node terms of an evaluation pod: each of the cluster's terms with the
 * platform requirement (and the pinned node) ANDed in, or the platform requirement alone.
 */
export function requiredNodeTerms(p: ClusterPlacement, pinnedNode?: string): V1NodeSelectorTerm[] {
  const pinned: V1NodeSelectorRequirement[] = pinnedNode ? [{ key: 'metadata.name', operator: 'In', values: [pinnedNode] }] : [];
  const cluster = clusterNodeTerms(p);
  const terms = cluster.length > 0 ? cluster : [{}];
  return terms.map((t) => {
    const fields = [...(t.matchFields ?? []), ...pinned];
    return { matchExpressions: [...(t.matchExpressions ?? []), ...platformRequirements()], ...(fields.length ? { matchFields: fields } : {}) };
  });
}

/** The affinity of an evaluation pod: requiredNodeTerms(), and the cluster's preferred terms and pod (anti-)affinity as they are. */
export function evaluationAffinity(p: ClusterPlacement, pinnedNode?: string): V1Affinity {
  const node = p.affinity.nodeAffinity as NodeAffinity | undefined;
  const preferred = node?.preferredDuringSchedulingIgnoredDuringExecution;
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: requiredNodeTerms(p, pinnedNode) },
      ...(preferred?.length ? { preferredDuringSchedulingIgnoredDuringExecution: preferred as never } : {}),
    },
    ...(p.affinity.podAffinity ? { podAffinity: p.affinity.podAffinity as never } : {}),
    ...(p.affinity.podAntiAffinity ? { podAntiAffinity: p.affinity.podAntiAffinity as never } : {}),
  };
}

/** The pod's nodeSelector: the platform's and the cluster's, ANDed (placementConflict() refused a key they disagree on). */
export function mergedNodeSelector(p: ClusterPlacement, platform: Record<string, string> | undefined): Record<string, string> {
  return { ...(platform ?? {}), ...p.nodeSelector };
}

export type PlacementConflict = { reason: 'PlacementConflict'; message: string };

const requirementText = (r: V1NodeSelectorRequirement): string =>
  r.operator === 'Exists' || r.operator === 'DoesNotExist' ? `${r.key} ${r.operator}` : `${r.key} ${r.operator} [${(r.values ?? []).join(', ')}]`;

/**
 * Why the platform's node selector cannot hold together with this cluster's policy,
 * or undefined when some node could satisfy both. A conflict names the key, both
 * values and the chart value that decides.
 */
export function placementConflict(p: ClusterPlacement, platform: Record<string, string> | undefined): PlacementConflict | undefined {
  const asked = platform ?? {};
  for (const [key, value] of Object.entries(asked)) {
    const ours = p.nodeSelector[key];
    if (ours !== undefined && ours !== value) {
      return {
        reason: 'PlacementConflict',
        message: `the platform placed the evaluation on nodes with ${key}=${value}, but this cluster runs evaluations only on nodes with ${key}=${ours} (chart value evaluations.nodeSelector): no node has both, so no evaluation was created. Ask the platform to place it on the nodes this cluster reports, or change evaluations.nodeSelector.${key}`,
      };
    }
  }
  // a term is ruled out when one of its requirements fails for a label the platform fixes
  const terms = requiredNodeTerms(p);
  const failing = (t: V1NodeSelectorTerm) => (t.matchExpressions ?? []).find((r) => Object.hasOwn(asked, r.key) && !requirementHolds(r, asked[r.key]));
  const failed = terms.map(failing);
  if (failed.every((f) => f !== undefined)) {
    const fromCluster = clusterNodeTerms(p).length > 0;
    const why = [...new Map(failed.map((r) => [requirementText(r!), r!])).values()]
      .map((r) => `${r.key}=${asked[r.key]} fails ${requirementText(r)}`)
      .join('; ');
    const platformReq = failed.every((r) => PLATFORM_NODE_REQUIREMENTS.some((q) => q.key === r!.key));
    return {
      reason: 'PlacementConflict',
      message: `the platform placed the evaluation on nodes this cluster does not run evaluations on: ${why}${platformReq ? ' (the runtime runs on linux/amd64 nodes only)' : ''}, so no evaluation was created. Ask the platform to place it on the nodes this cluster reports${fromCluster && !platformReq ? ', or change the required node terms of evaluations.affinity' : ''}`,
    };
  }
  return undefined;
}

export type Taint = { key: string; value?: string; effect: string };

/** Whether a toleration tolerates a taint, as the scheduler reads it. */
export function tolerates(t: V1Toleration, taint: Taint): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if ((t.operator ?? 'Equal') === 'Exists') return !t.key || t.key === taint.key;
  return t.key === taint.key && (t.value ?? '') === (taint.value ?? '');
}

/** The taints that keep a pod off a node: NoSchedule and NoExecute (PreferNoSchedule only steers). */
export const BLOCKING_EFFECTS = ['NoSchedule', 'NoExecute'];

/** The node labels the policy reads: its nodeSelector's and its required terms' keys (with the platform's). */
export function placementLabelKeys(p: ClusterPlacement): string[] {
  return [...new Set([...Object.keys(p.nodeSelector), ...requiredNodeTerms(p).flatMap((t) => (t.matchExpressions ?? []).map((r) => r.key))])];
}

export type NodeFacts = { name: string; labels: Record<string, string>; taints: readonly Taint[] };

/** Why an evaluation pod could not land on this node under the policy, or undefined when it could. */
export function nodeRefusal(p: ClusterPlacement, node: NodeFacts): string | undefined {
  for (const [k, v] of Object.entries(p.nodeSelector)) if (node.labels[k] !== v) return `label ${k} is not ${v} (evaluations.nodeSelector)`;
  if (!matchesNodeSelectorTerms(requiredNodeTerms(p), node)) return 'it matches no required node term (linux/amd64 and evaluations.affinity)';
  const tolerations = p.tolerations as V1Toleration[];
  const taint = node.taints.find((t) => BLOCKING_EFFECTS.includes(t.effect) && !tolerations.some((tol) => tolerates(tol, t)));
  if (taint) return `taint ${taint.key}${taint.value ? `=${taint.value}` : ''}:${taint.effect} is not tolerated (evaluations.tolerations)`;
  return undefined;
}
