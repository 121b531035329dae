// The artifact cache's access modes vs the nodes evaluations can use: a
// ReadWriteOnce cache pins every evaluation pod to the one node that holds it.
import type * as k8s from '@kubernetes/client-node';
import { listNodes, nameList, nodeName, usableNodes } from '../kube.ts';
import type { CheckResult, PreflightContext } from '../types.ts';
import { listStorageClasses } from './storage-class.ts';

const ID = 'access-modes';

// Provisioners known to give ReadWriteMany volumes.
const RWX_PROVISIONERS = [
  'nfs.csi.k8s.io',
  'cephfs.csi.ceph.com',
  'efs.csi.aws.com',
  'filestore.csi.storage.gke.io',
  'file.csi.azure.com',
  'kubernetes.io/azure-file',
  'nfs-subdir-external-provisioner',
  'driver.longhorn.io',
];
const isRwxProvisioner = (p: string): boolean => RWX_PROVISIONERS.some((known) => p === known || p.endsWith(`/${known}`) || p.includes('nfs'));

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
  return {
    id: ID,
    verdict: 'warn',
    found:
      `artifact cache ${modes} with ${usable.length} schedulable nodes (${nameList(usable)}): every evaluation pod must run on the one node that holds the cache volume` +
      (rwx.length ? `; ReadWriteMany-capable StorageClasses: ${rwx.join(', ')}` : '; no StorageClass with a known ReadWriteMany provisioner'),
    fix: `To use every node, set storage.className=${target} and artifactCache.storage.sharedPvc.accessModes=[ReadWriteMany].`,
  };
}

export async function checkAccessModes(ctx: PreflightContext): Promise<CheckResult> {
  const [nodes, classes] = await Promise.all([listNodes(ctx), listStorageClasses(ctx.kc)]);
  return accessModesVerdict(ctx.settings.accessModes, nodes, classes, ctx.settings.storageClassName);
}
