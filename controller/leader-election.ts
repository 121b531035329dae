// Leader election on a coordination.k8s.io Lease, so that of several replicas
// only one acts. The holder renews every retry period; a candidate takes the
// Lease once renewTime + leaseDurationSeconds has passed. Updates carry the
// resourceVersion they read, so two candidates can never both win the same
// term. A leader that cannot renew within its renew deadline stops leading.
import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isConflict, isNotFound } from '../lib/kube-errors.ts';
import { errorMessage as apiMessage } from '../lib/error-fields.ts';

export type LeaderElectionOptions = {
  coordination: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  log: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
};

export class LeaderElector {
  readonly #o: LeaderElectionOptions;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  #leading = false;
  #lastRenew = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #observedRecord = '';
  #observedAt = 0;

  constructor(opts: LeaderElectionOptions) {
    this.#o = opts;
    this.#renewDeadlineMs = opts.renewDeadlineMs ?? Math.round(opts.leaseDurationSeconds * 1000 * (2 / 3));
    this.#retryPeriodMs = opts.retryPeriodMs ?? Math.max(200, Math.round((opts.leaseDurationSeconds * 1000) / 5));
  }

  get leading(): boolean {
    return this.#leading;
  }

  start(): void {
    void this.#tick();
  }

  /** Stops campaigning; a leader releases the Lease so a standby takes over at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    if (!this.#leading) return;
    this.#leading = false;
    try {
      const lease = await this.#o.coordination.readNamespacedLease({ name: this.#o.name, namespace: this.#o.namespace });
      if (lease.spec?.holderIdentity === this.#o.identity) {
        lease.spec.holderIdentity = undefined;
        lease.spec.leaseDurationSeconds = 1;
        lease.spec.renewTime = new V1MicroTime(0);
        await this.#o.coordination.replaceNamespacedLease({ name: this.#o.name, namespace: this.#o.namespace, body: lease });
      }
    } catch (err) {
      this.#o.log.warn({ err: apiMessage(err) }, 'could not release the leader Lease; the standby takes over when it expires');
    }
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    try {
      const held = await this.#tryAcquireOrRenew();
      if (held) {
        this.#lastRenew = Date.now();
        if (!this.#leading) {
          this.#leading = true;
          this.#o.log.info({ lease: `${this.#o.namespace}/${this.#o.name}`, identity: this.#o.identity }, 'became leader');
          this.#o.onStartedLeading();
        }
      } else if (this.#leading) {
        this.#lose('another replica holds the Lease');
      }
    } catch (err) {
      if (this.#leading && Date.now() - this.#lastRenew > this.#renewDeadlineMs) {
        this.#lose(`could not renew the Lease within ${this.#renewDeadlineMs} ms: ${apiMessage(err)}`);
      } else if (!isConflict(err)) {
        this.#o.log.warn({ err: apiMessage(err) }, 'leader election: Lease request failed; retrying');
      }
    }
    if (!this.#stopped) {
      this.#timer = setTimeout(() => void this.#tick(), this.#retryPeriodMs);
    }
  }

  #lose(why: string): void {
    this.#leading = false;
    this.#o.log.error({ lease: `${this.#o.namespace}/${this.#o.name}`, why }, 'lost leadership');
    this.#o.onStoppedLeading();
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const { coordination, namespace, name, identity, leaseDurationSeconds } = this.#o;
    const now = new V1MicroTime(Date.now());
    let lease: V1Lease;
    try {
      lease = await coordination.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await coordination.createNamespacedLease({
        namespace,
        body: {
          metadata: { name, namespace },
          spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
        },
      });
      return true;
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity;
    // like client-go, expiry is measured on our own clock from when we last saw the
    // record change, so clock skew between replicas does not matter
    const record = `${holder ?? ''}|${spec.renewTime ? new Date(spec.renewTime).toISOString() : ''}`;
    if (record !== this.#observedRecord) {
      this.#observedRecord = record;
      this.#observedAt = Date.now();
    }
    const expired = !holder || this.#observedAt + (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000 < Date.now();
    if (holder && holder !== identity && !expired) return false;
    const transition = holder !== identity;
    lease.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds,
      renewTime: now,
      acquireTime: transition ? now : spec.acquireTime,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (transition ? 1 : 0),
    };
    await coordination.replaceNamespacedLease({ name, namespace, body: lease });
    return true;
  }
}
