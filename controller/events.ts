// Kubernetes Events on an evaluation, so `kubectl describe rle <name>` shows
// every phase change and every refusal in order. As client-go's recorder does,
// an identical repeat (same object, type, reason and message) within
// REPEAT_WINDOW_MS makes no new Event: it raises the count and lastTimestamp
// of the one already written, by a PATCH.
import { randomBytes } from 'node:crypto';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_VERSION, EVALUATION, type RLMeshEvaluation } from '../lib/crds/types.ts';
import { errorFields } from '../lib/error-fields.ts';
import { MERGE_PATCH, isNotFound } from '../lib/kube-errors.ts';
import { withCommonLabels } from '../lib/common-labels.ts';

export type EventType = 'Normal' | 'Warning';
export type EventsApi = Pick<CoreV1Api, 'createNamespacedEvent' | 'patchNamespacedEvent'>;

/** One Event and its repeats. */
type Series = {
  ev: RLMeshEvaluation;
  type: EventType;
  reason: string;
  message: string;
  namespace: string;
  /** the Event's name once it exists in the API */
  name?: string;
  count: number;
  first: Date;
  last: Date;
  /** a write of this series is queued or in flight: the next one waits for it, so counts never go backwards */
  busy: boolean;
  waiting: (() => void)[];
};

export class EventRecorder {
  readonly #core: EventsApi;
  readonly #component: string;
  readonly #instance: string;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #labels: Record<string, string>;
  // the latest series per key, oldest first (a Map keeps insertion order): the least recently seen is dropped first
  readonly #series = new Map<string, Series>();
  // Events are written off the reconcile path, one at a time in order of occurrence, as client-go's
  // broadcaster does: in a burst they queue here instead of taking the API server from the pod creates
  readonly #backlog: (() => Promise<void>)[] = [];
  #inFlight = 0;
  static readonly MAX_IN_FLIGHT = 1;
  /** client-go's aggregation interval */
  static readonly REPEAT_WINDOW_MS = 10 * 60_000;
  /** client-go's cache size */
  static readonly MAX_SERIES = 4096;

  /** opts.commonLabels: the chart's (runtime config pods.commonLabels), on every Event */
  constructor(core: EventsApi, component: string, instance: string, log: Logger, opts: { now?: () => number; commonLabels?: Readonly<Record<string, string>> } = {}) {
    this.#core = core;
    this.#component = component;
    this.#instance = instance;
    this.#log = log;
    this.#now = opts.now ?? Date.now;
    this.#labels = withCommonLabels({}, opts.commonLabels);
  }

  /** Queues an Event (or a repeat of one); failing to record it is logged, never fatal. Resolves once the API holds it. */
  record(ev: RLMeshEvaluation, type: EventType, reason: string, rawMessage: string): Promise<void> {
    const message = rawMessage.slice(0, 1024);
    const namespace = ev.metadata.namespace ?? 'default';
    const key = JSON.stringify([namespace, ev.metadata.name, ev.metadata.uid ?? '', type, reason, message]);
    const now = new Date(this.#now());
    let s = this.#series.get(key);
    this.#series.delete(key);
    if (s && now.getTime() - s.last.getTime() < EventRecorder.REPEAT_WINDOW_MS) {
      s.count++;
      s.last = now;
      s.ev = ev;
    } else {
      s = { ev, type, reason, message, namespace, count: 1, first: now, last: now, busy: false, waiting: [] };
    }
    this.#series.set(key, s);
    if (this.#series.size > EventRecorder.MAX_SERIES) this.#series.delete(this.#series.keys().next().value!);
    const series = s;
    return new Promise((resolve) => {
      series.waiting.push(resolve);
      this.#kick(series);
    });
  }

  /** Queues one write of the series if it has occurrences the API does not hold and none is queued yet. */
  #kick(s: Series): void {
    if (s.busy || s.waiting.length === 0) return;
    s.busy = true;
    this.#backlog.push(async () => {
      // a repeat that arrives while this write waits in the backlog rides along with it
      const done = s.waiting.splice(0);
      try {
        await this.#write(s);
      } finally {
        s.busy = false;
        for (const resolve of done) resolve();
        this.#kick(s);
      }
    });
    this.#drain();
  }

  #drain(): void {
    while (this.#inFlight < EventRecorder.MAX_IN_FLIGHT && this.#backlog.length > 0) {
      const job = this.#backlog.shift()!;
      this.#inFlight++;
      void job().finally(() => {
        this.#inFlight--;
        this.#drain();
      });
    }
  }

  async #write(s: Series): Promise<void> {
    const { count, last } = s;
    try {
      if (s.name) {
        try {
          await this.#core.patchNamespacedEvent({ name: s.name, namespace: s.namespace, body: { count, lastTimestamp: last } }, MERGE_PATCH);
          return;
        } catch (err) {
          // expired (the API server keeps Events an hour by default) or deleted: write it anew, with its count
          if (!isNotFound(err)) throw err;
          s.name = undefined;
        }
      }
      const name = `${s.ev.metadata.name}.${last.getTime().toString(16)}${randomBytes(3).toString('hex')}`;
      const { ev, namespace } = s;
      await this.#core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name, namespace, ...(Object.keys(this.#labels).length > 0 ? { labels: this.#labels } : {}) },
          involvedObject: { apiVersion: API_VERSION, kind: EVALUATION.kind, name: ev.metadata.name, namespace, uid: ev.metadata.uid },
          type: s.type,
          reason: s.reason,
          message: s.message,
          firstTimestamp: s.first,
          lastTimestamp: last,
          count,
          source: { component: this.#component },
          reportingComponent: this.#component,
          reportingInstance: this.#instance,
        },
      });
      s.name = name;
    } catch (err) {
      this.#log.warn({ evaluation: s.ev.metadata.name, reason: s.reason, count, ...errorFields(err) }, 'could not record an Event (the evaluation\'s status still says the same); a repeat of it tries again');
    }
  }
}
