// A work queue of object keys: each key is processed by at most one worker at a
// time (a change that arrives meanwhile re-runs it afterwards), keys queued twice
// run once, and a failing key is retried with per-key exponential backoff.
import type { Logger } from 'pino';
import { backoffDelayMs } from '../lib/backoff.ts';
import type { WorkQueueMetrics } from './work-queue-metrics.ts';
import { errorFields } from '../lib/error-fields.ts';

export type WorkResult = void | { requeueAfterMs?: number };
export type Worker = (key: string) => Promise<WorkResult>;

export type WorkQueueOptions = {
  worker: Worker;
  concurrency?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  log?: Logger;
  onProcessed?: (key: string, ok: boolean, ms: number) => void;
  metrics?: WorkQueueMetrics;
};

export class WorkQueue {
  readonly #worker: Worker;
  readonly #concurrency: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #log: Logger | undefined;
  readonly #onProcessed: WorkQueueOptions['onProcessed'];
  readonly #metrics: WorkQueueMetrics | undefined;
  readonly #queuedAt = new Map<string, number>();
  readonly #queue: string[] = [];
  readonly #queued = new Set<string>();
  readonly #active = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  readonly #idleWaiters: (() => void)[] = [];
  #running = 0;
  #stopped = true;

  constructor(opts: WorkQueueOptions) {
    this.#worker = opts.worker;
    this.#concurrency = opts.concurrency ?? 8;
    this.#baseDelayMs = opts.baseDelayMs ?? 250;
    this.#maxDelayMs = opts.maxDelayMs ?? 60_000;
    this.#log = opts.log;
    this.#onProcessed = opts.onProcessed;
    this.#metrics = opts.metrics;
  }

  start(): void {
    this.#stopped = false;
    this.#pump();
  }

  stop(): void {
    this.#stopped = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }

  get length(): number {
    return this.#queue.length;
  }

  add(key: string): void {
    if (this.#active.has(key)) {
      if (!this.#dirty.has(key)) this.#metrics?.added();
      this.#dirty.add(key);
      return;
    }
    if (this.#queued.has(key)) return;
    this.#metrics?.added();
    this.#metrics?.depth.inc();
    this.#queued.add(key);
    this.#queuedAt.set(key, performance.now());
    this.#queue.push(key);
    this.#pump();
  }

  /** Adds the key after a delay; an earlier pending delay for the same key wins. */
  addAfter(key: string, delayMs: number): void {
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.#timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.#timers.set(key, { at, timer });
  }

  /** Backoff for the next retry of a key: base * 2^(failures-1), capped, less up to 10% jitter. */
  backoffMs(failures: number): number {
    return backoffDelayMs(failures, { baseMs: this.#baseDelayMs, maxMs: this.#maxDelayMs, jitter: 0.1 });
  }

  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** Resolves when nothing is queued or running (delayed keys not counted). */
  idle(): Promise<void> {
    if (this.#queue.length === 0 && this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #pump(): void {
    while (!this.#stopped && this.#running < this.#concurrency && this.#queue.length > 0) {
      const key = this.#queue.shift()!;
      this.#queued.delete(key);
      this.#metrics?.depth.dec();
      this.#metrics?.waited((performance.now() - (this.#queuedAt.get(key) ?? performance.now())) / 1000);
      this.#queuedAt.delete(key);
      this.#active.add(key);
      this.#running++;
      void this.#process(key);
    }
    if (this.#queue.length === 0 && this.#running === 0) {
      for (const w of this.#idleWaiters.splice(0)) w();
    }
  }

  async #process(key: string): Promise<void> {
    const started = performance.now();
    let ok = true;
    try {
      const result = await this.#worker(key);
      this.#failures.delete(key);
      if (result && result.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
    } catch (err) {
      ok = false;
      const n = (this.#failures.get(key) ?? 0) + 1;
      this.#failures.set(key, n);
      const delay = this.backoffMs(n);
      this.#log?.warn({ key, attempt: n, retryInMs: delay, ...errorFields(err) }, 'reconcile failed; retrying with backoff');
      this.#metrics?.retried();
      this.addAfter(key, delay);
    } finally {
      const ms = performance.now() - started;
      this.#metrics?.worked(ms / 1000);
      this.#onProcessed?.(key, ok, ms);
      this.#active.delete(key);
      this.#running--;
      if (this.#dirty.delete(key)) this.add(key);
      this.#pump();
    }
  }
}
