// A coordination.k8s.io Lease held by one identity at a time, on client-go's
// rule: another holder has expired once this observer has not seen the Lease
// record change for leaseDurationSeconds, measured on the observer's own clock,
// so clock skew between replicas does not matter. Every write carries the
// resourceVersion it read: of two candidates racing for one term the apiserver
// refuses the second with 409 Conflict, which callers treat as "lost the race".
import { V1MicroTime, type CoordinationV1Api, type V1Lease, type V1LeaseSpec } from '@kubernetes/client-node';
import { isNotFound } from './kube-errors.ts';
import { withCommonLabels } from './common-labels.ts';

export type LeaseOptions = {
  coordination: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  /** the chart's commonLabels (runtime config pods.commonLabels) */
  commonLabels?: Readonly<Record<string, string>>;
  /** the observer's clock (ms); tests pass a fake one */
  now?: () => number;
};

export class Lease {
  readonly #o: LeaseOptions;
  readonly #now: () => number;
  #observedRecord = '';
  #observedAt = 0;
  #holder: string | undefined;

  constructor(opts: LeaseOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** namespace/name, for logs */
  get description(): string {
    return `${this.#o.namespace}/${this.#o.name}`;
  }

  /** The holder seen by the last read (undefined when the Lease was free). */
  get holder(): string | undefined {
    return this.#holder;
  }

  /**
   * Takes the Lease when it is free, ours or expired, and renews it when ours.
   * Resolves false while another live holder has it; rejects on API errors,
   * 409 Conflict included (another candidate wrote first).
   */
  async tryAcquireOrRenew(): Promise<boolean> {
    const lease = await this.#read();
    const now = new V1MicroTime(this.#now());
    if (!lease) {
      await this.#create(now);
      return true;
    }
    const spec = lease.spec ?? {};
    this.#observe(spec);
    const holder = spec.holderIdentity;
    if (holder && holder !== this.#o.identity && !this.#expired(spec)) return false;
    const transition = holder !== this.#o.identity;
    await this.#replace(lease, {
      ...spec,
      holderIdentity: this.#o.identity,
      leaseDurationSeconds: this.#o.leaseDurationSeconds,
      renewTime: now,
      acquireTime: transition ? now : spec.acquireTime,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (transition ? 1 : 0),
    });
    return true;
  }

  /** Renews the Lease only while this identity holds it; resolves false when it no longer does. */
  async renew(): Promise<boolean> {
    const lease = await this.#read();
    if (lease?.spec?.holderIdentity !== this.#o.identity) return false;
    await this.#replace(lease, { ...lease.spec, renewTime: new V1MicroTime(this.#now()) });
    return true;
  }

  /**
   * Gives the Lease up so a candidate takes it at its next try instead of
   * waiting for it to expire (as client-go's ReleaseOnCancel does). Resolves
   * false when this identity did not hold it.
   */
  async release(): Promise<boolean> {
    const lease = await this.#read();
    if (lease?.spec?.holderIdentity !== this.#o.identity) return false;
    const now = new V1MicroTime(this.#now());
    await this.#replace(lease, { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1, acquireTime: now, renewTime: now });
    return true;
  }

  async #read(): Promise<V1Lease | undefined> {
    try {
      const lease = await this.#o.coordination.readNamespacedLease({ name: this.#o.name, namespace: this.#o.namespace });
      this.#holder = lease.spec?.holderIdentity;
      return lease;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      this.#holder = undefined;
      return undefined;
    }
  }

  async #create(now: V1MicroTime): Promise<void> {
    const { namespace, name, identity, leaseDurationSeconds } = this.#o;
    await this.#o.coordination.createNamespacedLease({
      namespace,
      body: { metadata: { name, namespace, labels: withCommonLabels({}, this.#o.commonLabels) }, spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 } },
    });
    this.#holder = identity;
  }

  async #replace(lease: V1Lease, spec: V1LeaseSpec): Promise<void> {
    // metadata carries the resourceVersion that was read: the compare in compare-and-swap; a Lease
    // from before commonLabels were set gets those it lacks
    const metadata = { ...lease.metadata, labels: withCommonLabels(lease.metadata?.labels ?? {}, this.#o.commonLabels) };
    await this.#o.coordination.replaceNamespacedLease({ name: this.#o.name, namespace: this.#o.namespace, body: { ...lease, metadata, spec } });
    this.#holder = spec.holderIdentity;
  }

  #observe(spec: V1LeaseSpec): void {
    const record = JSON.stringify([spec.holderIdentity ?? '', spec.leaseDurationSeconds ?? 0, time(spec.acquireTime), time(spec.renewTime), spec.leaseTransitions ?? 0]);
    if (record !== this.#observedRecord) {
      this.#observedRecord = record;
      this.#observedAt = this.#now();
    }
  }

  #expired(spec: V1LeaseSpec): boolean {
    return this.#observedAt + (spec.leaseDurationSeconds ?? this.#o.leaseDurationSeconds) * 1000 < this.#now();
  }
}

const time = (t: Date | undefined): string => (t ? new Date(t).toISOString() : '');
