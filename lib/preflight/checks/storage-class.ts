// The StorageClass the cache and spool PVCs get: storage.className, or the
// cluster default. It must exist and provision volumes dynamically, or the
// PVCs rlmesh-artifact-cache (100Gi) and rlmesh-agent-spool (10Gi) stay Pending.
import * as k8s from '@kubernetes/client-node';
import type { CheckResult, PreflightContext } from '../types.ts';

const ID = 'storage-class';
const NO_PROVISIONER = 'kubernetes.io/no-provisioner';

export const isDefaultClass = (sc: k8s.V1StorageClass): boolean =>
  sc.metadata?.annotations?.['storageclass.kubernetes.io/is-default-class'] === 'true' ||
  sc.metadata?.annotations?.['storageclass.beta.kubernetes.io/is-default-class'] === 'true';

export const describeClasses = (classes: k8s.V1StorageClass[]): string =>
  classes.length === 0
    ? 'no StorageClasses'
    : `StorageClasses: ${classes.map((c) => `${c.metadata?.name} (${c.provisioner}${isDefaultClass(c) ? ', default' : ''})`).join(', ')}`;

export function storageClassVerdict(classes: k8s.V1StorageClass[], className: string): CheckResult {
  const all = describeClasses(classes);
  let chosen: k8s.V1StorageClass | undefined;
  if (className) {
    chosen = classes.find((c) => c.metadata?.name === className);
    if (!chosen) {
      return {
        id: ID,
        verdict: 'fail',
        found: `storage.className is ${className}, but the cluster has no such StorageClass; ${all}`,
        fix: `Set storage.className to one of the StorageClasses listed, or create StorageClass ${className}.`,
      };
    }
  } else {
    const defaults = classes.filter(isDefaultClass);
    if (defaults.length === 0) {
      return {
        id: ID,
        verdict: 'fail',
        found: `no default StorageClass (storage.className is empty); ${all}`,
        fix: classes.length
          ? `Set storage.className to one of the StorageClasses listed, or mark one default: kubectl annotate storageclass <name> storageclass.kubernetes.io/is-default-class=true.`
          : 'Install a dynamic storage provisioner (the CSI driver of your platform) and mark its StorageClass default, or set storage.className.',
      };
    }
    // the API server picks the newest when several are default
    chosen = [...defaults].sort((a, b) => String(b.metadata?.creationTimestamp ?? '').localeCompare(String(a.metadata?.creationTimestamp ?? '')))[0]!;
  }
  const name = chosen.metadata?.name ?? '';
  const how = className ? `storage.className ${name}` : `default StorageClass ${name}`;
  if (chosen.provisioner === NO_PROVISIONER) {
    return {
      id: ID,
      verdict: 'fail',
      found: `${how} has provisioner ${NO_PROVISIONER}: it binds only PersistentVolumes created by hand; ${all}`,
      fix: 'Set storage.className to a StorageClass with a dynamic provisioner (a CSI driver), or make one the default.',
    };
  }
  return { id: ID, verdict: 'pass', found: `${how} (provisioner ${chosen.provisioner}, dynamic); ${all}`, fix: 'Nothing to do.' };
}

export async function listStorageClasses(kc: k8s.KubeConfig): Promise<k8s.V1StorageClass[]> {
  return (await kc.makeApiClient(k8s.StorageV1Api).listStorageClass()).items;
}

export async function checkStorageClass(ctx: PreflightContext): Promise<CheckResult> {
  return storageClassVerdict(await listStorageClasses(ctx.kc), ctx.settings.storageClassName);
}
