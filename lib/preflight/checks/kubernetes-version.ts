// Kubernetes version vs the floor the runtime is tested against.
import * as k8s from '@kubernetes/client-node';
import type { CheckResult, PreflightContext } from '../types.ts';

export const KUBERNETES_FLOOR = { major: 1, minor: 34 };
const ID = 'kubernetes-version';

export function versionVerdict(gitVersion: string): CheckResult {
  const m = /^v?(\d+)\.(\d+)/.exec(gitVersion);
  const floor = `${KUBERNETES_FLOOR.major}.${KUBERNETES_FLOOR.minor}`;
  if (!m) {
    return { id: ID, verdict: 'warn', found: `the API server reports version "${gitVersion}", which is not major.minor`, fix: `Check that the cluster runs Kubernetes ${floor} or newer.` };
  }
  const [major, minor] = [Number(m[1]), Number(m[2])];
  const ok = major > KUBERNETES_FLOOR.major || (major === KUBERNETES_FLOOR.major && minor >= KUBERNETES_FLOOR.minor);
  if (ok) return { id: ID, verdict: 'pass', found: `Kubernetes ${gitVersion} (floor ${floor})`, fix: 'Nothing to do.' };
  return {
    id: ID,
    verdict: 'fail',
    found: `Kubernetes ${gitVersion}; the runtime needs ${floor} or newer (its CRDs and pod specs use fields older API servers drop)`,
    fix: `Upgrade the cluster to Kubernetes ${floor} or newer, then run rlmesh preflight again.`,
  };
}

export async function checkKubernetesVersion(ctx: PreflightContext): Promise<CheckResult> {
  const info = await ctx.kc.makeApiClient(k8s.VersionApi).getCode();
  return versionVerdict(info.gitVersion);
}
