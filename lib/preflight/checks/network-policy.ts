// NetworkPolicy enforcement. Before install (CLI): the CNI named by the
// cluster's DaemonSets. Inside the cluster (agent): the latest result of the
// controller's probe pod, which it writes to ConfigMap rlmesh-network-policy-probe.
import * as k8s from '@kubernetes/client-node';
import { NAMES } from '../../fixed-names.ts';
import { isForbidden, isNotFound } from '../../kube-errors.ts';
import { cniVerdict, PROBE_ID, readCni } from '../network-policy.ts';
import type { CheckResult, PreflightContext } from '../types.ts';
import { errorMessage } from '../../error-fields.ts';

export const PROBE_CONFIGMAP = NAMES.networkPolicyProbe;
export const PROBE_KEY = 'result.json';
const STALE_MS = 2 * 3600_000; // the controller probes hourly

/** Whether a stored result is recent enough to stand for the cluster as it is (the controller probes hourly). */
export const probeIsFresh = (stored: StoredProbe, now: number): boolean => now - Date.parse(stored.at) <= STALE_MS;

export type StoredProbe = CheckResult & { at: string };

export function storedProbeVerdict(stored: StoredProbe | undefined, enabled: boolean, now: number): CheckResult {
  if (!enabled) {
    return {
      id: PROBE_ID,
      verdict: 'warn',
      found: 'the NetworkPolicy probe is off (preflight.networkPolicyProbe.enabled=false): enforcement is not verified',
      fix: 'Set preflight.networkPolicyProbe.enabled=true, or verify by hand that your CNI enforces NetworkPolicy.',
    };
  }
  if (!stored) {
    return {
      id: PROBE_ID,
      verdict: 'warn',
      found: `the controller has not reported a NetworkPolicy probe yet (ConfigMap ${PROBE_CONFIGMAP} is missing)`,
      fix: 'Check that the controller runs (kubectl -n rlmesh-system get pods); it probes at start and every hour.',
    };
  }
  if (!probeIsFresh(stored, now)) {
    return { ...pick(stored), verdict: stored.verdict === 'fail' ? 'fail' : 'warn', found: `${stored.found} (probed at ${stored.at}, more than 2 h ago)`, fix: stored.verdict === 'fail' ? stored.fix : 'Check that the controller runs; it probes every hour.' };
  }
  return { ...pick(stored), found: `${stored.found} (probed at ${stored.at})` };
}

const pick = (s: CheckResult): CheckResult => ({ id: PROBE_ID, verdict: s.verdict, found: s.found, fix: s.fix });

export async function readStoredProbe(kc: k8s.KubeConfig, namespace: string): Promise<StoredProbe | undefined> {
  try {
    const cm = await kc.makeApiClient(k8s.CoreV1Api).readNamespacedConfigMap({ namespace, name: PROBE_CONFIGMAP });
    const raw = cm.data?.[PROBE_KEY];
    return raw ? (JSON.parse(raw) as StoredProbe) : undefined;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    if (isForbidden(err)) throw new Error(`cannot read ConfigMap ${namespace}/${PROBE_CONFIGMAP}: ${errorMessage(err)}`);
    throw err;
  }
}

export async function checkNetworkPolicy(ctx: PreflightContext): Promise<CheckResult> {
  if (ctx.mode === 'cli') return cniVerdict(await readCni(ctx.kc));
  const stored = ctx.settings.networkPolicyProbe ? await readStoredProbe(ctx.kc, ctx.settings.namespace) : undefined;
  return storedProbeVerdict(stored, ctx.settings.networkPolicyProbe, (ctx.now ?? Date.now)());
}
