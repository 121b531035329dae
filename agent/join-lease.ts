// Only one replica ever trades a join token: it must hold the Lease
// rlmesh-cluster-agent-join first (the Deployment is Recreate, but a rollout
// stuck with two pods, or a manual scale, must still not join twice).
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { sleep } from '../lib/backoff.ts';
import { isConflict, isNotFound } from '../lib/kube-errors.ts';

export const JOIN_LEASE = 'rlmesh-cluster-agent-join';

export type LeaseOptions = { kc: k8s.KubeConfig; namespace: string; holder: string; durationSeconds: number; log: Logger; signal?: AbortSignal };

export type HeldLease = { release(): Promise<void> };

// the apiserver wants RFC 3339 with exactly six fractional digits here; client-node passes strings through
const microTime = (d: Date) => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z') as unknown as k8s.V1MicroTime;

/** Waits until this replica holds the join Lease; renews it while held. */
export async function acquireJoinLease(o: LeaseOptions): Promise<HeldLease> {
  const api = o.kc.makeApiClient(k8s.CoordinationV1Api);
  let logged = false;
  for (;;) {
    const now = new Date();
    const spec: k8s.V1LeaseSpec = { holderIdentity: o.holder, leaseDurationSeconds: o.durationSeconds, acquireTime: microTime(now), renewTime: microTime(now) };
    try {
      const existing = await api.readNamespacedLease({ name: JOIN_LEASE, namespace: o.namespace }).catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      });
      if (!existing) {
        await api.createNamespacedLease({ namespace: o.namespace, body: { metadata: { name: JOIN_LEASE, namespace: o.namespace }, spec } });
        return held(api, o);
      }
      const holder = existing.spec?.holderIdentity;
      const renewed = existing.spec?.renewTime ? new Date(existing.spec.renewTime as unknown as string).getTime() : 0;
      const expired = renewed + (existing.spec?.leaseDurationSeconds ?? o.durationSeconds) * 1000 < now.getTime();
      if (!holder || holder === o.holder || expired) {
        // resourceVersion makes this a compare-and-swap: of two racing replicas one gets 409
        await api.replaceNamespacedLease({ name: JOIN_LEASE, namespace: o.namespace, body: { metadata: existing.metadata, spec: { ...spec, leaseTransitions: (existing.spec?.leaseTransitions ?? 0) + 1 } } });
        return held(api, o);
      }
      if (!logged) {
        o.log.info({ lease: `${o.namespace}/${JOIN_LEASE}`, holder }, 'another agent replica holds the join Lease; waiting for it to finish the join');
        logged = true;
      }
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    await sleep(1000 + Math.random() * 1000, o.signal);
    if (o.signal?.aborted) throw new Error('aborted while waiting for the join Lease');
  }
}

function held(api: k8s.CoordinationV1Api, o: LeaseOptions): HeldLease {
  const renew = setInterval(() => {
    void (async () => {
      const l = await api.readNamespacedLease({ name: JOIN_LEASE, namespace: o.namespace });
      if (l.spec?.holderIdentity !== o.holder) return;
      await api.replaceNamespacedLease({ name: JOIN_LEASE, namespace: o.namespace, body: { metadata: l.metadata, spec: { ...l.spec, renewTime: microTime(new Date()) } } });
    })().catch((err: unknown) => o.log.warn({ err: (err as Error).message }, 'could not renew the join Lease'));
  }, (o.durationSeconds * 1000) / 3);
  renew.unref();
  return {
    async release() {
      clearInterval(renew);
      try {
        const l = await api.readNamespacedLease({ name: JOIN_LEASE, namespace: o.namespace });
        if (l.spec?.holderIdentity !== o.holder) return;
        await api.replaceNamespacedLease({ name: JOIN_LEASE, namespace: o.namespace, body: { metadata: l.metadata, spec: { ...l.spec, holderIdentity: undefined, renewTime: undefined } } });
      } catch (err) {
        o.log.warn({ err: (err as Error).message }, 'could not release the join Lease; it expires on its own');
      }
    },
  };
}
