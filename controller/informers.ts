// The controller's informers: evaluations in the runs namespace, the cluster's
// RLMeshCache objects, the pods the controller manages and the nodes (Ready, labels, taints, runtime handlers); each change goes to
// one callback with its verb, and each informer has the watch watchdog.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { CACHE, EVALUATION, GROUP, VERSION, type RLMeshCache, type RLMeshEvaluation } from '../lib/crds/types.ts';
import { startInformer, type Informer } from '../lib/informer.ts';
import type { InformerMetricsFor } from '../lib/informer-metrics.ts';
import type { Page } from '../lib/list-pages.ts';
import { LABEL_MANAGED_BY, MANAGED_BY } from './pod-spec.ts';

export type Verb = 'add' | 'update' | 'delete';
export type EvaluationObject = RLMeshEvaluation & k8s.KubernetesObject;
export type CacheObject = RLMeshCache & k8s.KubernetesObject;
export type PodObject = k8s.V1Pod & k8s.KubernetesObject;
export type NodeObject = k8s.V1Node & k8s.KubernetesObject;

/**
 * What the controller needs of a node (a large cluster's nodes carry much more): its name and Ready condition;
 * its labels, taints and runtime handlers, to know whether every node evaluations may use supports user namespaces.
 */
function trimNode(o: unknown): NodeObject {
  const n = o as k8s.V1Node;
  return {
    metadata: { name: n.metadata?.name, labels: n.metadata?.labels ?? {} },
    spec: { taints: n.spec?.taints ?? [] },
    status: { conditions: (n.status?.conditions ?? []).filter((c) => c.type === 'Ready'), runtimeHandlers: n.status?.runtimeHandlers ?? [] },
  } as NodeObject;
}

export const keyOf = (o: { metadata?: { namespace?: string; name?: string } }): string => `${o.metadata?.namespace}/${o.metadata?.name}`;

type InformersOptions = { kc: k8s.KubeConfig; log: Logger; runs: string; watchSilenceMs: number; metrics?: InformerMetricsFor };

export class ControllerInformers {
  readonly #o: InformersOptions;
  readonly #custom: k8s.CustomObjectsApi;
  readonly #core: k8s.CoreV1Api;

  constructor(o: InformersOptions) {
    this.#o = o;
    this.#custom = o.kc.makeApiClient(k8s.CustomObjectsApi);
    this.#core = o.kc.makeApiClient(k8s.CoreV1Api);
  }

  #start<T extends k8s.KubernetesObject>(
    opts: Pick<Parameters<typeof startInformer<T>>[0], 'name' | 'path' | 'list' | 'labelSelector' | 'trim'>,
    onChange: (obj: T, verb: Verb) => void,
  ): Informer<T> {
    const i = startInformer<T>({ kc: this.#o.kc, log: this.#o.log, watchSilenceMs: this.#o.watchSilenceMs, ...(this.#o.metrics ? { metrics: this.#o.metrics } : {}), ...opts });
    for (const verb of ['add', 'update', 'delete'] as const) i.on(verb, (obj) => onChange(obj, verb));
    return i;
  }

  evaluations(onChange: (ev: EvaluationObject, verb: Verb) => void): Informer<EvaluationObject> {
    const namespace = this.#o.runs;
    return this.#start<EvaluationObject>({
      name: EVALUATION.plural,
      path: `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${EVALUATION.plural}`,
      list: (page) => this.#custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: EVALUATION.plural, ...page }) as Promise<Page<EvaluationObject>>,
    }, onChange);
  }

  caches(onChange: (c: CacheObject) => void): Informer<CacheObject> {
    return this.#start<CacheObject>({
      name: CACHE.plural,
      path: `/apis/${GROUP}/${VERSION}/${CACHE.plural}`,
      list: (page) => this.#custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: CACHE.plural, ...page }) as Promise<Page<CacheObject>>,
    }, onChange);
  }

  /** the cluster's nodes, trimmed to their Ready condition: pods on a node that stopped reporting are lost */
  nodes(onChange: (node: NodeObject, verb: Verb) => void): Informer<NodeObject> {
    return this.#start<NodeObject>({
      name: 'nodes',
      path: '/api/v1/nodes',
      list: (page) => this.#core.listNode(page),
      trim: trimNode,
    }, onChange);
  }

  /** the evaluation pods this controller made (label app.kubernetes.io/managed-by) */
  managedPods(onChange: (pod: PodObject, verb: Verb) => void): Informer<PodObject> {
    const namespace = this.#o.runs;
    const labelSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
    return this.#start<PodObject>({
      name: 'pods',
      path: `/api/v1/namespaces/${namespace}/pods`,
      labelSelector,
      list: (page) => this.#core.listNamespacedPod({ namespace, labelSelector, ...page }),
    }, onChange);
  }
}
