// The rlmesh.dev/gpu.* labels for a node's GPUs, and the patch that sets them
// (and removes them from a node that no longer has GPUs).
import * as k8s from '@kubernetes/client-node';
import { GPU_MODELS } from './gpu-models.ts';
import type { GpuDevice } from './pci-devices.ts';

export const LABELS = {
  vendor: 'rlmesh.dev/gpu.vendor',
  product: 'rlmesh.dev/gpu.product',
  memory: 'rlmesh.dev/gpu.memory',
  count: 'rlmesh.dev/gpu.count',
} as const;

/** Labels for the node; null removes a label. A node with several models is labelled by its most common one. */
export function gpuLabels(gpus: GpuDevice[]): Record<string, string | null> {
  if (gpus.length === 0) return Object.fromEntries(Object.values(LABELS).map((l) => [l, null]));
  const counts = new Map<string, number>();
  for (const g of gpus) counts.set(`${g.vendor}/${g.deviceId}`, (counts.get(`${g.vendor}/${g.deviceId}`) ?? 0) + 1);
  const [top] = [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]!;
  const gpu = gpus.find((g) => `${g.vendor}/${g.deviceId}` === top)!;
  const model = GPU_MODELS[gpu.vendor][gpu.deviceId];
  const memoryMiB = gpu.vramBytes !== undefined ? Math.floor(gpu.vramBytes / 2 ** 20) : model?.memoryMiB;
  return {
    [LABELS.vendor]: gpu.vendor,
    [LABELS.product]: model?.product ?? `${gpu.vendor.toUpperCase()}-${gpu.deviceId.replace(/^0x/, '')}`,
    [LABELS.memory]: memoryMiB !== undefined ? String(memoryMiB) : null,
    [LABELS.count]: String(gpus.filter((g) => `${g.vendor}/${g.deviceId}` === top).length),
  };
}

/** Merge-patches the node's labels, only when they differ. Returns whether it patched. */
export async function applyLabels(core: k8s.CoreV1Api, nodeName: string, labels: Record<string, string | null>): Promise<boolean> {
  const node = await core.readNode({ name: nodeName });
  const current = node.metadata?.labels ?? {};
  const changed = Object.entries(labels).some(([k, v]) => (v === null ? k in current : current[k] !== v));
  if (!changed) return false;
  await core.patchNode(
    { name: nodeName, body: { metadata: { labels } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
  return true;
}
