// Follows the operator's drain (ConfigMap rlmesh-operator-drain, lib/operator-drain.ts),
// watched by name so the agent needs no right on any other ConfigMap. Until the
// first list has answered, the drain is unknown and current() throws: an
// assignment waits (it is retried) rather than slipping past a drain the agent
// has not read yet.
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { OperatorDrainSchema, type AgentMessage } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { startInformer, type Informer } from '../lib/informer.ts';
import type { InformerMetricsFor } from '../lib/informer-metrics.ts';
import { OPERATOR_DRAIN_CONFIGMAP, parseOperatorDrain, UNDO_DRAIN, type OperatorDrain } from '../lib/operator-drain.ts';

export class DrainUnknownError extends Error {}

/** What the platform is told of the operator's drain (the user who drained stays in the cluster). */
export function operatorDrainMessage(d: OperatorDrain | null): AgentMessage['msg'] {
  return { case: 'operatorDrain', value: create(OperatorDrainSchema, { draining: d !== null, ...(d ? { since: timestampFromDate(new Date(d.since)) } : {}) }) };
}

export type OperatorDrainWatchOptions = {
  kc: k8s.KubeConfig;
  namespace: string;
  log: Logger;
  watchSilenceMs: number;
  informerMetrics?: InformerMetricsFor;
  /** the drain began (a value) or ended (null) */
  onChange: (d: OperatorDrain | null) => void;
};

export class OperatorDrainWatch {
  readonly #o: OperatorDrainWatchOptions;
  #informer: Informer<k8s.V1ConfigMap> | undefined;
  #synced = false;
  #drain: OperatorDrain | null = null;

  constructor(o: OperatorDrainWatchOptions) {
    this.#o = o;
  }

  /** The drain as last read: null when not drained; throws while not read yet. */
  current(): OperatorDrain | null {
    if (!this.#synced) {
      throw new DrainUnknownError(
        `the operator's drain (ConfigMap ${this.#o.namespace}/${OPERATOR_DRAIN_CONFIGMAP}) is not read yet, so the assignment waits; if this lasts, check the agent's Role allows get, list and watch on that ConfigMap (upgrade the chart)`,
      );
    }
    return this.#drain;
  }

  /** The drain as last read, or undefined while not read yet. */
  get known(): OperatorDrain | null | undefined {
    return this.#synced ? this.#drain : undefined;
  }

  async start(): Promise<void> {
    const { kc, namespace, log } = this.#o;
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const fieldSelector = `metadata.name=${OPERATOR_DRAIN_CONFIGMAP}`;
    this.#informer = startInformer<k8s.V1ConfigMap>({
      name: `configmap ${namespace}/${OPERATOR_DRAIN_CONFIGMAP}`,
      kc,
      log,
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      fieldSelector,
      list: (p) => core.listNamespacedConfigMap({ namespace, fieldSelector, ...p }),
      trim: (o) => {
        const c = o as k8s.V1ConfigMap;
        return { metadata: { name: c.metadata?.name, namespace: c.metadata?.namespace, creationTimestamp: c.metadata?.creationTimestamp }, data: c.data ?? {} };
      },
      watchSilenceMs: this.#o.watchSilenceMs,
      metrics: this.#o.informerMetrics,
    });
    this.#informer.on('add', (c) => this.#set(parseOperatorDrain(c)));
    this.#informer.on('update', (c) => this.#set(parseOperatorDrain(c)));
    this.#informer.on('delete', () => this.#set(null));
    await this.#informer.synced;
    this.#synced = true;
    const listed = this.#informer.cache.list(namespace).find((c) => c.metadata?.name === OPERATOR_DRAIN_CONFIGMAP);
    this.#set(listed ? parseOperatorDrain(listed) : null, true);
  }

  #set(next: OperatorDrain | null, first = false): void {
    const before = this.#drain;
    this.#drain = next;
    if (!this.#synced) return;
    if (!first && JSON.stringify(before) === JSON.stringify(next)) return;
    if (next) {
      this.#o.log.warn(
        { drainedSince: next.since, ...(next.by ? { drainedBy: next.by } : {}) },
        `the cluster's operator drained this cluster (rlmesh drain): new assignments are refused and reported to the platform as OperatorDrain, evaluations already here run to their end; ${UNDO_DRAIN} takes new ones again`,
      );
    } else if (before) {
      this.#o.log.info(`the cluster's operator ended the drain (${UNDO_DRAIN}): this cluster takes new evaluations again`);
    }
    if (first && !next) return;
    this.#o.onChange(next);
  }

  async stop(): Promise<void> {
    await this.#informer?.stop();
  }
}
