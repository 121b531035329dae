// The artifact cache's access modes vs the nodes evaluations can use: a
// ReadWriteOnce cache pins every evaluation pod to the one node that holds it.
import type * as k8s from '@kubernetes/client-node';
import { listNodes, nameList, nodeName, usableNodes } from '../kube.ts';
import type { CheckResult, PreflightContext } from '../types.ts';
import { isRwxProvisioner, listStorageClasses } from './storage-class.ts';

const GPU_RESOURCES = ['nvidia.com/gpu', 'amd.com/gpu'];

const ID = 'access-modes';

export function accessModesVerdict(accessModes: string[], nodes: k8s.V1Node[], classes: k8s.V1StorageClass[], className: string): CheckResult {
  const usable = usableNodes(nodes).map(nodeName);
  const modes = `[${accessModes.join(', ')}]`;
  if (accessModes.includes('ReadWriteMany')) {
    return { id: ID, verdict: 'pass', found: `artifact cache ${modes} on storage.className ${className || '(default)'}; ${usable.length} schedulable node(s)`, fix: 'Nothing to do.' };
  }
  if (usable.length <= 1) {
    return { id: ID, verdict: 'pass', found: `artifact cache ${modes}; ${usable.length} schedulable node(s)${usable.length ? ` (${usable[0]})` : ''}`, fix: 'Nothing to do.' };
  }
  const rwx = classes.filter((c) => isRwxProvisioner(c.provisioner)).map((c) => c.metadata?.name ?? '');
  const target = rwx[0] ?? '<an RWX StorageClass, e.g. NFS, CephFS, EFS, Filestore or Azure Files>';
  const gpus = gpuNodes(usableNodes(nodes));
  return {
    id: ID,
    verdict: 'warn',
    found:
      `artifact cache ${modes} with ${usable.length} schedulable nodes (${nameList(usable)}): every evaluation that needs artifacts runs on the one node that holds the cache volume, ` +
      'and one asking for what that node lacks (GPUs, more cpu or memory than it has, a placement that excludes it) fails as CacheNodeCannotRun' +
      (gpus ? `; the nodes differ in GPUs (${gpus}), so evaluations that need GPUs and artifacts fail unless the cache lands on a node with enough of them` : '') +
      (rwx.length ? `; ReadWriteMany-capable StorageClasses: ${rwx.join(', ')}` : '; no StorageClass with a known ReadWriteMany provisioner'),
    fix: `To run evaluations with artifacts on every node, set storage.className=${target} and artifactCache.storage.sharedPvc.accessModes=[ReadWriteMany].`,
  };
}

/** "gpu-a: nvidia.com/gpu 8, …" when the nodes' GPUs are not all alike; undefined when they are. */
function gpuNodes(nodes: k8s.V1Node[]): string | undefined {
  const gpusOf = (n: k8s.V1Node): string =>
    GPU_RESOURCES
      .filter((r) => Number(n.status?.allocatable?.[r] ?? 0) > 0)
      .map((r) => `${r} ${n.status!.allocatable![r]}`)
      .join(', ');
  const all = nodes.map((n) => ({ name: nodeName(n), gpus: gpusOf(n) }));
  if (new Set(all.map((n) => n.gpus)).size <= 1) return undefined;
  const withGpus = all.filter((n) => n.gpus !== '');
  return `${nameList(withGpus.map((n) => `${n.name}: ${n.gpus}`))}; ${all.length - withGpus.length} without`;
}

export async function checkAccessModes(ctx: PreflightContext): Promise<CheckResult> {
  const [nodes, classes] = await Promise.all([listNodes(ctx), listStorageClasses(ctx.kc)]);
  return accessModesVerdict(ctx.settings.accessModes, nodes, classes, ctx.settings.storageClassName);
}
