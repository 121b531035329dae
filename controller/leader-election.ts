// Leader election on a coordination.k8s.io Lease (lib/lease.ts, client-go's
// expiry rule), so that of several replicas only one acts. The holder renews
// every retry period; a leader that cannot renew within its renew deadline
// stops leading.
import type { CoordinationV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isConflict } from '../lib/kube-errors.ts';
import { errorMessage } from '../lib/error-fields.ts';
import { Lease } from '../lib/lease.ts';

export type LeaderElectionOptions = {
  coordination: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  /** the chart's commonLabels (runtime config pods.commonLabels), on the Lease */
  commonLabels?: Readonly<Record<string, string>>;
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
  readonly #lease: Lease;

  constructor(opts: LeaderElectionOptions) {
    this.#o = opts;
    this.#renewDeadlineMs = opts.renewDeadlineMs ?? Math.round(opts.leaseDurationSeconds * 1000 * (2 / 3));
    this.#retryPeriodMs = opts.retryPeriodMs ?? Math.max(200, Math.round((opts.leaseDurationSeconds * 1000) / 5));
    this.#lease = new Lease({
      coordination: opts.coordination,
      namespace: opts.namespace,
      name: opts.name,
      identity: opts.identity,
      leaseDurationSeconds: opts.leaseDurationSeconds,
      commonLabels: opts.commonLabels,
    });
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
      await this.#lease.release();
    } catch (err) {
      this.#o.log.warn({ err: errorMessage(err) }, 'could not release the leader Lease; the standby takes over when it expires');
    }
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    try {
      const held = await this.#lease.tryAcquireOrRenew();
      if (held) {
        this.#lastRenew = Date.now();
        if (!this.#leading) {
          this.#leading = true;
          this.#o.log.info({ lease: this.#lease.description, identity: this.#o.identity }, 'became leader');
          this.#o.onStartedLeading();
        }
      } else if (this.#leading) {
        this.#lose('another replica holds the Lease');
      }
    } catch (err) {
      if (this.#leading && Date.now() - this.#lastRenew > this.#renewDeadlineMs) {
        this.#lose(`could not renew the Lease within ${this.#renewDeadlineMs} ms: ${errorMessage(err)}`);
      } else if (!isConflict(err)) {
        this.#o.log.warn({ err: errorMessage(err) }, 'leader election: Lease request failed; retrying');
      }
    }
    if (!this.#stopped) {
      this.#timer = setTimeout(() => void this.#tick(), this.#retryPeriodMs);
    }
  }

  #lose(why: string): void {
    this.#leading = false;
    this.#o.log.error({ lease: this.#lease.description, why }, 'lost leadership');
    this.#o.onStoppedLeading();
  }
}
