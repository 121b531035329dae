// Kubernetes Events on an evaluation, so `kubectl describe rle <name>` shows
// every phase change and every refusal in order.
import { randomBytes } from 'node:crypto';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_VERSION, EVALUATION, type RLMeshEvaluation } from '../lib/crds/types.ts';
import { errorFields } from '../lib/error-fields.ts';

export type EventType = 'Normal' | 'Warning';

export class EventRecorder {
  readonly #core: CoreV1Api;
  readonly #component: string;
  readonly #instance: string;
  readonly #log: Logger;
  // Events are written off the reconcile path, a few at a time, in order of occurrence
  readonly #backlog: (() => Promise<void>)[] = [];
  #inFlight = 0;
  static readonly MAX_IN_FLIGHT = 8;

  constructor(core: CoreV1Api, component: string, instance: string, log: Logger) {
    this.#core = core;
    this.#component = component;
    this.#instance = instance;
    this.#log = log;
  }

  /** Queues an Event; failing to record one is logged, never fatal. Resolves once written. */
  record(ev: RLMeshEvaluation, type: EventType, reason: string, message: string): Promise<void> {
    return new Promise((resolve) => {
      this.#backlog.push(() => this.#write(ev, type, reason, message).finally(resolve));
      this.#drain();
    });
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

  async #write(ev: RLMeshEvaluation, type: EventType, reason: string, message: string): Promise<void> {
    const namespace = ev.metadata.namespace ?? 'default';
    const now = new Date();
    try {
      await this.#core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name: `${ev.metadata.name}.${now.getTime().toString(16)}${randomBytes(3).toString('hex')}`, namespace },
          involvedObject: { apiVersion: API_VERSION, kind: EVALUATION.kind, name: ev.metadata.name, namespace, uid: ev.metadata.uid },
          type,
          reason,
          message: message.slice(0, 1024),
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
          source: { component: this.#component },
          reportingComponent: this.#component,
          reportingInstance: this.#instance,
        },
      });
    } catch (err) {
      this.#log.warn({ evaluation: ev.metadata.name, reason, ...errorFields(err) }, 'could not record an Event');
    }
  }
}
