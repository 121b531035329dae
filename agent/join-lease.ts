// Only one replica ever trades a join token: it must hold the Lease
// rlmesh-cluster-agent-join first (the Deployment is Recreate, but a rollout
// stuck with two pods, or a manual scale, must still not join twice).
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { sleep } from '../lib/backoff.ts';
import { errorFields } from '../lib/error-fields.ts';
import { isConflict } from '../lib/kube-errors.ts';
import { Lease } from '../lib/lease.ts';

export const JOIN_LEASE = 'rlmesh-cluster-agent-join';

export type LeaseOptions = {
  kc: k8s.KubeConfig;
  namespace: string;
  holder: string;
  durationSeconds: number;
  /** the chart's commonLabels (runtime config pods.commonLabels) */
  commonLabels?: Readonly<Record<string, string>>;
  log: Logger;
  signal?: AbortSignal;
};

export type HeldLease = { release(): Promise<void> };

/** Waits until this replica holds the join Lease; renews it while held. */
export async function acquireJoinLease(o: LeaseOptions): Promise<HeldLease> {
  const lease = new Lease({
    coordination: o.kc.makeApiClient(k8s.CoordinationV1Api),
    namespace: o.namespace,
    name: JOIN_LEASE,
    identity: o.holder,
    leaseDurationSeconds: o.durationSeconds,
    commonLabels: o.commonLabels,
  });
  let logged = false;
  for (;;) {
    try {
      if (await lease.tryAcquireOrRenew()) return held(lease, o);
      if (!logged) {
        o.log.info({ lease: lease.description, holder: lease.holder }, 'another agent replica holds the join Lease; waiting for it to finish the join');
        logged = true;
      }
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    await sleep(1000 + Math.random() * 1000, o.signal);
    if (o.signal?.aborted) throw new Error('aborted while waiting for the join Lease');
  }
}

function held(lease: Lease, o: LeaseOptions): HeldLease {
  const renew = setInterval(() => {
    lease.renew().catch((err: unknown) => o.log.warn(errorFields(err), 'could not renew the join Lease'));
  }, (o.durationSeconds * 1000) / 3);
  renew.unref();
  return {
    async release() {
      clearInterval(renew);
      try {
        await lease.release();
      } catch (err) {
        o.log.warn(errorFields(err), 'could not release the join Lease; it expires on its own');
      }
    },
  };
}
