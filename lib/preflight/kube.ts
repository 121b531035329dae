// Small helpers for reading nodes; API errors are read with lib/kube-errors.ts.
import * as k8s from '@kubernetes/client-node';
import { listPages } from '../list-pages.ts';
import type { PreflightContext } from './types.ts';

// one list per preflight run, shared by the checks that read nodes
const nodesOfRun = new WeakMap<PreflightContext, Promise<k8s.V1Node[]>>();

/** The nodes the run looks at (settings.nodeSelector), listed once per run. */
export function listNodes(ctx: PreflightContext): Promise<k8s.V1Node[]> {
  let nodes = nodesOfRun.get(ctx);
  if (!nodes) nodesOfRun.set(ctx, (nodes = listNodesPaged(ctx.kc, ctx.settings.nodeSelector)));
  return nodes;
}

/** The nodes (a page at a time), without their image lists and managed fields: a large cluster's nodes are mostly those. */
async function listNodesPaged(kc: k8s.KubeConfig, labelSelector: string): Promise<k8s.V1Node[]> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const { items } = await listPages(
    (p) => core.listNode({ ...p, ...(labelSelector ? { labelSelector } : {}) }),
    (n) => {
      if (n.status) delete n.status.images;
      if (n.metadata) delete n.metadata.managedFields;
      return n;
    },
  );
  return items;
}

/** Why an ordinary pod cannot land on the node, or undefined when it can. */
export function unschedulableReason(node: k8s.V1Node): string | undefined {
  if (node.spec?.unschedulable) return 'cordoned';
  const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready && ready.status !== 'True') return 'not Ready';
  const taint = node.spec?.taints?.find((t) => t.effect === 'NoSchedule' || t.effect === 'NoExecute');
  if (taint) return `taint ${taint.key}${taint.value ? `=${taint.value}` : ''}:${taint.effect}`;
  return undefined;
}

export const nodeArch = (node: k8s.V1Node): string =>
  node.metadata?.labels?.['kubernetes.io/arch'] ?? node.status?.nodeInfo?.architecture ?? 'unknown';
export const nodeOs = (node: k8s.V1Node): string => node.metadata?.labels?.['kubernetes.io/os'] ?? node.status?.nodeInfo?.operatingSystem ?? 'unknown';

/** Nodes an evaluation pod can run on: Linux amd64, schedulable. */
export function usableNodes(nodes: k8s.V1Node[]): k8s.V1Node[] {
  return nodes.filter((n) => nodeOs(n) === 'linux' && nodeArch(n) === 'amd64' && unschedulableReason(n) === undefined);
}

export const nodeName = (node: k8s.V1Node): string => node.metadata?.name ?? '(unnamed)';

/** "a, b, c" or "a, b, c and 4 more" */
export function nameList(names: string[], max = 5): string {
  if (names.length <= max) return names.join(', ');
  return `${names.slice(0, max).join(', ')} and ${names.length - max} more`;
}
