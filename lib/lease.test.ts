import { ApiException, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Lease } from './lease.ts';

/** An apiserver's Lease endpoints in memory: stored as sent on the wire (JSON), resourceVersion checked on replace. */
function fakeCoordination() {
  const leases = new Map<string, V1Lease>();
  let version = 0;
  const key = (namespace: string, name: string) => `${namespace}/${name}`;
  const stored = (l: V1Lease): V1Lease => JSON.parse(JSON.stringify({ ...l, metadata: { ...l.metadata, resourceVersion: String(++version) } })) as V1Lease;
  const api = {
    readNamespacedLease: async ({ name, namespace }: { name: string; namespace: string }) => {
      const l = leases.get(key(namespace, name));
      if (!l) throw new ApiException(404, 'not found', {}, {});
      return structuredClone(l);
    },
    createNamespacedLease: async ({ namespace, body }: { namespace: string; body: V1Lease }) => {
      const k = key(namespace, body.metadata!.name!);
      if (leases.has(k)) throw new ApiException(409, 'already exists', {}, {});
      leases.set(k, stored(body));
      return structuredClone(leases.get(k)!);
    },
    replaceNamespacedLease: async ({ name, namespace, body }: { name: string; namespace: string; body: V1Lease }) => {
      const k = key(namespace, name);
      if (leases.get(k)?.metadata?.resourceVersion !== body.metadata?.resourceVersion) throw new ApiException(409, 'conflict', {}, {});
      leases.set(k, stored(body));
      return structuredClone(leases.get(k)!);
    },
  };
  return { api: api as unknown as CoordinationV1Api, spec: () => leases.get('ns/l')?.spec, labels: () => leases.get('ns/l')?.metadata?.labels };
}

function candidates(clocks: Record<string, () => number>) {
  const { api, spec } = fakeCoordination();
  const lease = (identity: string) => new Lease({ coordination: api, namespace: 'ns', name: 'l', identity, leaseDurationSeconds: 10, now: clocks[identity] });
  return { api, spec, lease };
}

describe('Lease', () => {
  it('creates the Lease for the first candidate with MicroTime values and renews it', async () => {
    let t = Date.UTC(2026, 0, 1);
    const { spec, lease } = candidates({ a: () => t });
    const a = lease('a');
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(spec()).toMatchObject({ holderIdentity: 'a', leaseDurationSeconds: 10, leaseTransitions: 0 });
    expect(JSON.stringify(spec()!.renewTime)).toBe('"2026-01-01T00:00:00.000000Z"'); // MicroTime: six fractional digits
    t += 3000;
    expect(await a.renew()).toBe(true);
    expect(JSON.stringify(spec()!.renewTime)).toBe('"2026-01-01T00:00:03.000000Z"');
    expect(spec()!.leaseTransitions).toBe(0);
  });

  it("judges expiry on the observer's clock, not by the holder's renewTime", async () => {
    // b's clock runs an hour ahead: by renewTime a's Lease would look long expired
    let ta = Date.UTC(2026, 0, 1);
    let tb = ta + 3_600_000;
    const { spec, lease } = candidates({ a: () => ta, b: () => tb });
    const a = lease('a');
    const b = lease('b');
    await a.tryAcquireOrRenew();
    expect(await b.tryAcquireOrRenew()).toBe(false);
    expect(b.holder).toBe('a');
    ta += 9000;
    tb += 9000;
    await a.renew(); // the record changed: b's observation starts again
    expect(await b.tryAcquireOrRenew()).toBe(false);
    tb += 9000;
    expect(await b.tryAcquireOrRenew()).toBe(false);
    tb += 1001; // ten seconds and a bit since b last saw a change
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(spec()).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    expect(await a.renew()).toBe(false);
  });

  it('refuses the second of two racing writes of one term (409 from the resourceVersion)', async () => {
    const t = Date.UTC(2026, 0, 1);
    const { api, lease } = candidates({ a: () => t, b: () => t });
    const first = await api.readNamespacedLease({ name: 'l', namespace: 'ns' }).catch(() => undefined);
    expect(first).toBeUndefined();
    const results = await Promise.allSettled([lease('a').tryAcquireOrRenew(), lease('b').tryAcquireOrRenew()]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const rejected = results.find((r) => r.status === 'rejected')!;
    expect((rejected.reason as ApiException<unknown>).code).toBe(409);
  });

  it("carries the chart's commonLabels: on the Lease it creates, and added to one written before they were set", async () => {
    const t = Date.UTC(2026, 0, 1);
    const fresh = fakeCoordination();
    await new Lease({ coordination: fresh.api, namespace: 'ns', name: 'l', identity: 'a', leaseDurationSeconds: 10, commonLabels: { team: 'ml' }, now: () => t }).tryAcquireOrRenew();
    expect(fresh.labels()).toEqual({ team: 'ml' });

    const old = fakeCoordination();
    await new Lease({ coordination: old.api, namespace: 'ns', name: 'l', identity: 'a', leaseDurationSeconds: 10, now: () => t }).tryAcquireOrRenew();
    expect(old.labels() ?? {}).toEqual({});
    expect(await new Lease({ coordination: old.api, namespace: 'ns', name: 'l', identity: 'a', leaseDurationSeconds: 10, commonLabels: { team: 'ml' }, now: () => t }).renew()).toBe(true);
    expect(old.labels()).toEqual({ team: 'ml' });
  });

  it('release frees the Lease so another candidate takes it at once; only the holder can release', async () => {
    const t = Date.UTC(2026, 0, 1);
    const { spec, lease } = candidates({ a: () => t, b: () => t });
    const a = lease('a');
    const b = lease('b');
    await a.tryAcquireOrRenew();
    expect(await b.tryAcquireOrRenew()).toBe(false);
    expect(await b.release()).toBe(false);
    expect(spec()!.holderIdentity).toBe('a');
    expect(await a.release()).toBe(true);
    expect(spec()!.holderIdentity).toBeUndefined();
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(spec()!.holderIdentity).toBe('b');
  });
});
