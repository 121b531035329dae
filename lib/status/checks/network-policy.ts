// NetworkPolicy enforcement as the controller's probe last saw it (ConfigMap
// rlmesh-network-policy-probe), and what that means here: without it the
// controller starts no evaluation pod (controller/network-fence.ts) unless the
// operator opted out.
import { NOT_ENFORCED_REASON } from '../../evaluation-reasons.ts';
import { storedProbeVerdict, type StoredProbe, PROBE_CONFIGMAP, PROBE_KEY } from '../../preflight/checks/network-policy.ts';
import { configMap, runtimeFacts } from '../reads.ts';
import type { CheckResult, StatusContext } from '../types.ts';

export function networkPolicyVerdict(stored: StoredProbe | undefined, o: { probeEnabled: boolean; runWithoutEnforcement: boolean; now: number }): CheckResult {
  const seen = storedProbeVerdict(stored, o.probeEnabled, o.now);
  const r: CheckResult = { ...seen, id: 'network-policy' };
  if (r.verdict === 'pass') return { ...r, found: `enforced: ${r.found}` };
  if (o.runWithoutEnforcement) return { ...r, verdict: 'warn', found: `${r.found}; evaluations run anyway (evaluations.runWithoutNetworkPolicyEnforcement=true)`, fix: `Make sure another layer fences the runs namespace; ${r.fix}` };
  return {
    ...r,
    verdict: 'fail',
    found: `${r.found}; evaluations wait as ${NOT_ENFORCED_REASON}`,
    fix: `${r.fix.replace(/\.$/, '')}. The controller probes again within a minute; if another layer fences the runs namespace, set evaluations.runWithoutNetworkPolicyEnforcement=true.`,
  };
}

export async function checkNetworkPolicyStatus(ctx: StatusContext): Promise<CheckResult> {
  const [cm, facts] = await Promise.all([configMap(ctx, ctx.namespace, PROBE_CONFIGMAP), runtimeFacts(ctx)]);
  const raw = cm?.data?.[PROBE_KEY];
  return networkPolicyVerdict(raw ? (JSON.parse(raw) as StoredProbe) : undefined, {
    probeEnabled: facts?.probeEnabled ?? true,
    runWithoutEnforcement: facts?.runWithoutNetworkPolicyEnforcement ?? false,
    now: ctx.now(),
  });
}
