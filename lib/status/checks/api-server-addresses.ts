// Whether the NetworkPolicies still let the chart's pods reach the Kubernetes
// API: the addresses of its rule (read at install, or network.apiServerAddresses)
// against where Service default/kubernetes leads now. Managed control planes move
// the API's addresses; a pod whose policy lacks the new ones loses the API.
import * as k8s from '@kubernetes/client-node';
import { apiServerAddressesLine, liveApiServerAddresses, outside } from '../../preflight/checks/api-server-addresses.ts';
import { orUndefined } from '../reads.ts';
import type { CheckResult, StatusContext } from '../types.ts';

const ID = 'api-server-addresses';
const POLICY = 'rlmesh-cluster-controller';

type Rule = k8s.V1NetworkPolicyEgressRule;

/** The CIDRs of the policy's Kubernetes API rule: TCP ports only, to ipBlocks only (the DNS rule has UDP). */
export function apiRuleCidrs(egress: Rule[]): string[] | undefined {
  const rule = egress.find((r) => r.to?.length && r.to.every((p) => p.ipBlock) && r.ports?.length && r.ports.every((p) => (p.protocol ?? 'TCP') === 'TCP'));
  return rule?.to?.map((p) => p.ipBlock!.cidr);
}

export function apiServerDriftVerdict(live: string[], inPolicy: string[] | undefined, namespace: string): CheckResult {
  if (!inPolicy) {
    return { id: ID, verdict: 'warn', found: `NetworkPolicy ${namespace}/${POLICY} has no Kubernetes API rule`, fix: 'Upgrade the release (helm upgrade --reuse-values) so the chart renders its policies again.' };
  }
  const missing = outside(live, inPolicy);
  if (missing.length) {
    return {
      id: ID,
      verdict: 'fail',
      found: `the Kubernetes API now answers at ${missing.join(', ')}, which the NetworkPolicies do not open (they allow ${inPolicy.join(', ')}): the chart's pods cannot reach it there`,
      fix: `Run helm upgrade rlmesh … -n ${namespace} --reuse-values, which reads the API's addresses again when network.apiServerAddresses is empty; otherwise set ${apiServerAddressesLine(live)}.`,
    };
  }
  return { id: ID, verdict: 'pass', found: `the NetworkPolicies open the Kubernetes API's addresses (${live.join(', ')})`, fix: 'Nothing to do.' };
}

export async function checkApiServerAddresses(ctx: StatusContext): Promise<CheckResult> {
  const policy = await orUndefined(ctx.kc.makeApiClient(k8s.NetworkingV1Api).readNamespacedNetworkPolicy({ namespace: ctx.namespace, name: POLICY }));
  const live = await liveApiServerAddresses(ctx.kc);
  return apiServerDriftVerdict(live, policy ? apiRuleCidrs(policy.spec?.egress ?? []) : undefined, ctx.namespace);
}
