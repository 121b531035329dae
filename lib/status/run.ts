// rlmesh status: every check, one after another, on the operator's kube
// context. Never throws: a check that cannot read what it needs says so as a
// warn, naming the right it lacks.
import { errorMessage } from '../error-fields.ts';
import { isForbidden } from '../kube-errors.ts';
import { worstVerdict } from '../preflight/run.ts';
import { checkAgent } from './checks/agent.ts';
import { checkApiServerAddresses } from './checks/api-server-addresses.ts';
import { checkCache } from './checks/cache.ts';
import { checkCredentials } from './checks/credentials.ts';
import { checkEgressProxy } from './checks/egress-proxy.ts';
import { checkEvaluations } from './checks/evaluations.ts';
import { checkLeader } from './checks/leader.ts';
import { checkNetworkPolicyStatus } from './checks/network-policy.ts';
import { checkPreflight } from './checks/preflight.ts';
import { checkRelease } from './checks/release.ts';
import { checkSpool } from './checks/spool.ts';
import type { CheckResult, StatusCheck, StatusContext, Verdict } from './types.ts';

export type StatusReport = { at: string; namespace: string; verdict: Verdict; checks: CheckResult[] };

const CHECKS: [string, StatusCheck][] = [
  ['release', checkRelease],
  ['agent', checkAgent],
  ['credentials', checkCredentials],
  ['preflight', checkPreflight],
  ['network-policy', checkNetworkPolicyStatus],
  ['api-server-addresses', checkApiServerAddresses],
  ['controller-leader', checkLeader],
  ['egress-proxy', checkEgressProxy],
  ['cache', checkCache],
  ['evaluations', checkEvaluations],
  ['spool', checkSpool],
];

export const STATUS_CHECK_IDS = CHECKS.map(([id]) => id);

export async function runStatus(ctx: StatusContext): Promise<StatusReport> {
  const checks: CheckResult[] = [];
  for (const [id, check] of CHECKS) {
    try {
      checks.push(await check(ctx));
    } catch (err) {
      checks.push({
        id,
        verdict: 'warn',
        found: `could not check: ${errorMessage(err).slice(0, 300)}`,
        fix: isForbidden(err)
          ? "Run rlmesh status with a kube context bound to the chart's read-only roles rlmesh-status (the chart value statusRole.subjects binds them; they need no Secret), or one that may read the release and runs namespaces."
          : 'Check that the Kubernetes API is reachable from here, then run rlmesh status again.',
      });
    }
  }
  return { at: new Date(ctx.now()).toISOString(), namespace: ctx.namespace, verdict: worstVerdict(checks), checks };
}
