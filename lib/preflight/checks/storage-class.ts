// The StorageClasses the cache and spool PVCs get: storage.className, or the
// cluster default, and agent.spool.storageClassName for the spool when set.
// Each must exist and provision volumes dynamically, or the PVCs
// rlmesh-artifact-cache (100Gi) and rlmesh-agent-spool (10Gi) stay Pending.
import * as k8s from '@kubernetes/client-node';
import type { CheckResult, PreflightContext } from '../types.ts';

const ID = 'storage-class';
const NO_PROVISIONER = 'kubernetes.io/no-provisioner';

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
export const isRwxProvisioner = (p: string): boolean => RWX_PROVISIONERS.some((known) => p === known || p.endsWith(`/${known}`) || p.includes('nfs'));

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

/**
 * What the agent's spool gets: a single-writer journal wants block storage that can attach on
 * another node. Undefined when there is nothing to add to the cache's verdict.
 */
export function spoolClassVerdict(classes: k8s.V1StorageClass[], className: string, spoolClassName: string): CheckResult | undefined {
  const all = describeClasses(classes);
  const block = classes.find((c) => isDefaultClass(c) && !isRwxProvisioner(c.provisioner))?.metadata?.name ?? '<a block-storage class, e.g. gp3, pd-balanced, managed-csi>';
  if (spoolClassName === '' || spoolClassName === className) {
    const shared = className ? classes.find((c) => c.metadata?.name === className && isRwxProvisioner(c.provisioner)) : undefined;
    if (!shared) return undefined;
    return {
      id: ID,
      verdict: 'warn',
      found: `the agent spool PVC rlmesh-agent-spool follows storage.className onto ${className} (provisioner ${shared.provisioner}), a ReadWriteMany class, for a journal one process writes (some RWX classes provision 1 TiB at least)`,
      fix: `Set agent.spool.storageClassName=${block} on a new install (an existing spool keeps its class; chart README, "Several nodes").`,
    };
  }
  const chosen = classes.find((c) => c.metadata?.name === spoolClassName);
  const fix = `Set agent.spool.storageClassName to a block-storage class that can attach on another node (${block}), or leave it empty to follow storage.className.`;
  if (!chosen) return { id: ID, verdict: 'fail', found: `agent.spool.storageClassName is ${spoolClassName}, but the cluster has no such StorageClass; ${all}`, fix };
  if (chosen.provisioner === NO_PROVISIONER) {
    return { id: ID, verdict: 'fail', found: `agent.spool.storageClassName ${spoolClassName} has provisioner ${NO_PROVISIONER}: it binds only PersistentVolumes created by hand`, fix };
  }
  if (isRwxProvisioner(chosen.provisioner)) {
    return { id: ID, verdict: 'warn', found: `agent.spool.storageClassName ${spoolClassName} (provisioner ${chosen.provisioner}) is a ReadWriteMany class, for a journal one process writes`, fix };
  }
  return { id: ID, verdict: 'pass', found: `agent spool on agent.spool.storageClassName ${spoolClassName} (provisioner ${chosen.provisioner})`, fix: 'Nothing to do.' };
}

const RANK = { pass: 0, warn: 1, fail: 2 } as const;

/** The cache's verdict with the spool's joined in: the worse verdict, both findings, the fixes that apply. */
export function withSpool(cache: CheckResult, spool: CheckResult | undefined): CheckResult {
  if (!spool) return cache;
  const verdict = RANK[spool.verdict] > RANK[cache.verdict] ? spool.verdict : cache.verdict;
  const fixes = [cache, spool].filter((r) => r.verdict !== 'pass').map((r) => r.fix);
  return { id: ID, verdict, found: `${cache.found}; ${spool.found}`, fix: fixes.length ? fixes.join(' ') : 'Nothing to do.' };
}

export async function checkStorageClass(ctx: PreflightContext): Promise<CheckResult> {
  const classes = await listStorageClasses(ctx.kc);
  const { storageClassName, spoolStorageClassName } = ctx.settings;
  return withSpool(storageClassVerdict(classes, storageClassName), spoolClassVerdict(classes, storageClassName, spoolStorageClassName));
}
