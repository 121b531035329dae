// The controller's leader and the cache filler's: their Leases' holders, and
// whether each renewed within its duration (lib/lease.ts's rule).
import * as k8s from '@kubernetes/client-node';
import { orUndefined, runsNamespace, runtimeDeployments } from '../reads.ts';
import { ago, type CheckResult, type StatusContext } from '../types.ts';

export type LeaseView = { role: string; namespace: string; name: string; lease: k8s.V1Lease | undefined };

function describe(l: LeaseView, now: number): { ok: boolean; text: string } {
  const spec = l.lease?.spec;
  if (!spec?.holderIdentity) return { ok: false, text: `${l.role}: no leader (Lease ${l.namespace}/${l.name} ${l.lease ? 'has no holder' : 'does not exist'})` };
  const renewed = spec.renewTime ? new Date(spec.renewTime as unknown as string).getTime() : 0;
  const expired = now - renewed > (spec.leaseDurationSeconds ?? 15) * 1000;
  return { ok: !expired, text: `${l.role}: ${spec.holderIdentity}, renewed ${ago(now - renewed)} ago${expired ? ' (expired)' : ''}` };
}

export function leaderVerdict(namespace: string, leases: LeaseView[], now: number): CheckResult {
  const seen = leases.map((l) => describe(l, now));
  const found = seen.map((s) => s.text).join('; ');
  if (seen.every((s) => s.ok)) return { id: 'controller-leader', verdict: 'pass', found, fix: 'Nothing to do.' };
  return {
    id: 'controller-leader',
    verdict: 'fail',
    found,
    fix: `No replica leads, so nothing reconciles: check the controller's pods (kubectl -n ${namespace} get pods -l app.kubernetes.io/name=rlmesh-cluster-controller) and their logs; a replica takes the Lease within its duration once it runs.`,
  };
}

export async function checkLeader(ctx: StatusContext): Promise<CheckResult> {
  const coordination = ctx.kc.makeApiClient(k8s.CoordinationV1Api);
  const runs = await runsNamespace(ctx);
  const filler = (await runtimeDeployments(ctx, runs)).some((d) => d.metadata?.name === 'rlmesh-artifact-cache-filler');
  const views: Omit<LeaseView, 'lease'>[] = [
    { role: 'controller', namespace: ctx.namespace, name: 'rlmesh-cluster-controller' },
    ...(filler ? [{ role: 'cache filler', namespace: runs, name: 'rlmesh-artifact-cache-filler' }] : []),
  ];
  const leases = await Promise.all(views.map(async (v) => ({ ...v, lease: await orUndefined(coordination.readNamespacedLease({ namespace: v.namespace, name: v.name })) })));
  return leaderVerdict(ctx.namespace, leases, ctx.now());
}
