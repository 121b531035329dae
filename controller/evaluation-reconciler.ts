// Reconciles one RLMeshEvaluation: waits for its artifacts, creates its pod,
// mirrors the pod's phase into the status (through the status subresource),
// enforces the start deadline, the deadline and cancellation, records an Event
// for every phase change and refusal, and garbage-collects it once the agent
// has reported it.
//
// A reconcile that creates a pod does nothing else on the API: the pod
// informer's add queues the key again, and that reconcile writes the status
// from the pod as it then is, so steps that happen meanwhile (scheduled,
// started, even finished) cost one write, not one each.
import type { CoreV1Api, CustomObjectsApi, ObjectCache, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  EVALUATION,
  GROUP,
  VERSION,
  evaluationSpecSchema,
  isFinished,
  type RLMeshCache,
  type RLMeshEvaluation,
} from '../lib/crds/types.ts';
import {
  deadlineExceeded,
  msUntilDeadline,
  msUntilStartDeadline,
  nextStatus,
  observePod,
  ownedFields,
  podHoldup,
  startDeadlineExceeded,
  statusHoldup,
  worthWriting,
  type Observation,
} from './evaluation-phase.ts';
import type { EventRecorder } from './events.ts';
import { MERGE_PATCH, isConflict, isNotFound, isRbacDenial } from '../lib/kube-errors.ts';
import type { Metrics } from './metrics.ts';
import { buildEvaluationPod, cacheNodeOf, needsCacheNode, podNameFor, type PodSettings } from './pod-spec.ts';
import { NOT_ENFORCED_REASON } from '../lib/evaluation-reasons.ts';
import type { FenceDecision } from './network-fence.ts';
import { podDisruption } from './pod-disruption.ts';
import { pullSecretsFor, type MappedPullSecret } from './pull-secrets.ts';
import type { WorkResult } from './work-queue.ts';
import { errorMessage, statusCode } from '../lib/error-fields.ts';
import { NO_PLACEMENT, placementConflict, type ClusterPlacement } from '../lib/evaluation-placement.ts';
import { CACHE_NODE_CANNOT_RUN, cacheNodeCannotRunMessage, cacheNodeShortfalls } from './cache-node-fit.ts';
import type { CacheNodeReader } from './cache-node-reader.ts';
import { USER_NAMESPACES_REASON, type HostUsersDecision } from '../lib/user-namespaces.ts';

export type ReconcilerSettings = {
  namespace: string;
  pullSecret: string;
  /** the operator's pull Secrets (evaluations.imagePullSecrets) with their repository prefixes: a pod gets those its image lies under, after the platform's */
  extraPullSecrets?: readonly MappedPullSecret[];
  proxyUrl: string;
  /** whether a new pod may start (the probe has seen NetworkPolicy enforced), and its network-ready init container */
  networkFence: () => FenceDecision;
  noProxy?: string;
  cacheName: string;
  pvcName: string;
  accessModes: readonly string[];
  gcAfterMs: number;
  waitingRetryMs: number;
  /** evaluations.startDeadlineSeconds: how long an evaluation may take from creation (fetching aside) until its container starts */
  startDeadlineSeconds: number;
  maxConcurrent?: number;
  /** the operator's policy for evaluation pods (runtime config evaluations.placement) */
  placement?: ClusterPlacement;
  /** runtime config pods.arbitraryUid (podSecurity.arbitraryUid) */
  arbitraryUid?: boolean;
  /** evaluations.hostUsers decided against the nodes now (lib/user-namespaces.ts); absent: the field is left unset */
  hostUsers?: () => HostUsersDecision;
  /** runtime config pods.commonLabels (the chart's commonLabels) */
  commonLabels?: Readonly<Record<string, string>>;
  /** runtime config pods.imagePullSecrets (the chart's imagePullSecrets, a mirror's login) */
  runtimePullSecrets?: readonly string[];
};

export type ReconcilerDeps = {
  core: CoreV1Api;
  custom: CustomObjectsApi;
  evaluations: ObjectCache<RLMeshEvaluation>;
  pods: ObjectCache<V1Pod>;
  caches: ObjectCache<RLMeshCache>;
  /** the cluster's nodes, for pods whose node was lost; without it, only the pods' own conditions say so */
  nodes?: ObjectCache<V1Node>;
  events: EventRecorder;
  metrics: Metrics;
  log: Logger;
  settings: ReconcilerSettings;
  /** reads the node of a ReadWriteOnce cache; absent: no fit check, the start deadline bounds the wait */
  cacheNodes?: CacheNodeReader;
};

const WARNING_PHASES = new Set(['Waiting', 'Failed']);
const podFinished = (pod: V1Pod): boolean => pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
/** Requeue after the soonest of these delays, if any. */
const soonest = (...ms: (number | undefined)[]): WorkResult => {
  const due = ms.filter((m): m is number => m !== undefined);
  return due.length > 0 ? { requeueAfterMs: Math.max(0, Math.min(...due)) } : undefined;
};

export class EvaluationReconciler {
  readonly #d: ReconcilerDeps;
  /**
   * Pods this process created whose names the status does not hold yet, by key:
   * what status.podName says once written. One missing from the informer is
   * read from the API, and one gone from it too was lost, never created again.
   */
  readonly #created = new Map<string, { uid: string; podName: string }>();

  constructor(deps: ReconcilerDeps) {
    this.#d = deps;
  }

  reconcile = async (key: string): Promise<WorkResult> => {
    const [namespace, name] = key.split('/') as [string, string];
    const ev = this.#d.evaluations.get(name, namespace);
    const pod = this.#ownPod(namespace, name, ev);
    if (!ev || ev.metadata.deletionTimestamp) {
      this.#created.delete(key);
      // owner references make the garbage collector delete the pod too; deleting it
      // here stops the evaluation without waiting for that
      if (pod && !pod.metadata?.deletionTimestamp) await this.#deletePod(pod, 'its evaluation was deleted');
      return;
    }
    if (isFinished(ev.status?.phase)) return this.#finished(ev, pod);

    const parsed = evaluationSpecSchema.safeParse(ev.spec);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return this.#write(ev, {
        phase: 'Failed',
        reason: 'InvalidSpec',
        message: `spec.${issue.path.join('.')}: ${issue.message}; the agent must recreate the evaluation with a valid spec`,
        conditions: [{ type: 'Completed', status: 'True', reason: 'InvalidSpec', message: issue.message }],
      });
    }

    if (ev.spec.cancelled) {
      if (pod && !podFinished(pod)) await this.#deletePod(pod, 'the evaluation was cancelled');
      return this.#write(ev, {
        phase: 'Cancelled',
        reason: 'Cancelled',
        message: pod ? `cancelled; pod ${pod.metadata?.name} stopped` : 'cancelled before it started',
        conditions: [{ type: 'Completed', status: 'True', reason: 'Cancelled', message: 'spec.cancelled is true' }],
      });
    }

    if (pod) return this.#followPod(ev, pod);
    return this.#startPod(key, ev);
  };

  #ownPod(namespace: string, name: string, ev: RLMeshEvaluation | undefined): V1Pod | undefined {
    const pod = this.#d.pods.get(podNameFor(name), namespace);
    if (!pod) return undefined;
    const owner = pod.metadata?.ownerReferences?.find((o) => o.controller);
    // a pod left by an earlier evaluation of the same name is not this one's
    if (ev?.metadata.uid && owner?.uid !== ev.metadata.uid) return undefined;
    return pod;
  }

  async #followPod(ev: RLMeshEvaluation, pod: V1Pod): Promise<WorkResult> {
    const nodeName = pod.spec?.nodeName;
    const disruption = podDisruption(pod, nodeName ? this.#d.nodes?.get(nodeName) : undefined);
    if (disruption) {
      const { reason, message } = disruption;
      const { podName, nodeName: node, startTime } = observePod(pod, ev);
      const conflict = await this.#write(ev, {
        podName,
        nodeName: node,
        startTime,
        phase: 'Failed',
        reason,
        message,
        finishTime: new Date().toISOString(),
        conditions: [{ type: 'Completed', status: 'True', reason, message }],
      });
      if (conflict) return conflict;
      // on a lost node the pod stays Terminating until the node returns or is deleted; its quota is freed after its grace period
      if (!podFinished(pod) && !pod.metadata?.deletionTimestamp) await this.#deletePod(pod, reason);
      return;
    }
    let obs = observePod(pod, ev);
    if ((ev.spec.artifacts?.length ?? 0) > 0 && ev.status?.artifacts?.state === 'Ready') {
      obs.conditions = [...(obs.conditions ?? []), { type: 'ArtifactsReady', status: 'True', reason: 'Cached', message: `${ev.spec.artifacts!.length} artifact(s) in the cache` }];
    }
    const base = { podName: obs.podName, nodeName: obs.nodeName, startTime: obs.startTime };
    const started = obs.startTime !== undefined || pod.status?.phase === 'Running' || podFinished(pod);
    const startLeft = started ? undefined : msUntilStartDeadline(ev, this.#d.settings.startDeadlineSeconds);
    if (startLeft !== undefined && startLeft <= 0) {
      const conflict = await this.#write(ev, startDeadlineExceeded(ev, podHoldup(pod) ?? statusHoldup(ev.status), this.#d.settings.startDeadlineSeconds, base));
      // the write lost to another (the watch brings the fresh object): the pod stays until it is recorded as Failed
      if (conflict) return conflict;
      await this.#deletePod(pod, 'it did not start before its start deadline');
      return;
    }
    const left = msUntilDeadline(pod, ev);
    const overdue = !podFinished(pod) && left !== undefined && left <= 0;
    if (overdue) obs = deadlineExceeded(ev, base, new Date().toISOString(), started ? undefined : podHoldup(pod));
    await this.#write(ev, obs);
    if (overdue) {
      await this.#deletePod(pod, 'its deadline passed');
      return;
    }
    if (obs.phase === 'Running' && left !== undefined) return { requeueAfterMs: left + 50 };
    // nothing else wakes an evaluation whose pod never starts: come back when its start deadline passes
    return soonest(obs.phase === 'Waiting' ? this.#d.settings.waitingRetryMs : undefined, startLeft === undefined ? undefined : startLeft + 50);
  }

  async #startPod(key: string, ev: RLMeshEvaluation): Promise<WorkResult> {
    const s = this.#d.settings;
    const artifacts = ev.spec.artifacts ?? [];
    // the agent refuses a conflicting placement before it writes the evaluation; one written by hand is refused
    // here, before its artifacts are fetched or a pod made (a pod made before a policy change is followed)
    const conflict = !ev.status?.podName && !this.#created.has(key) ? placementConflict(s.placement ?? NO_PLACEMENT, ev.spec.placement?.nodeSelector) : undefined;
    if (conflict) {
      return this.#write(ev, { phase: 'Failed', reason: conflict.reason, message: conflict.message, conditions: [{ type: 'Completed', status: 'True', reason: conflict.reason, message: conflict.message }] });
    }
    // before the artifacts arrive: a pod that could only go to a node that can never run it is not worth waiting for
    const cannotRun = !ev.status?.podName && !this.#created.has(key) ? await this.#cacheNodeCannotRun(ev) : undefined;
    if (cannotRun) {
      return this.#write(ev, { phase: 'Failed', reason: CACHE_NODE_CANNOT_RUN, message: cannotRun, conditions: [{ type: 'Completed', status: 'True', reason: CACHE_NODE_CANNOT_RUN, message: cannotRun }] });
    }
    if (artifacts.length > 0) {
      const a = ev.status?.artifacts;
      if (a?.state === 'Failed') {
        const reason = a.reason ?? 'ArtifactFetchFailed';
        const message = a.message ?? 'an artifact could not be fetched into the cache';
        return this.#write(ev, {
          phase: 'Failed',
          reason,
          message,
          conditions: [
            { type: 'ArtifactsReady', status: 'False', reason, message },
            { type: 'Completed', status: 'True', reason, message },
          ],
        });
      }
      if (a?.state !== 'Ready') {
        const message = a?.message ?? `waiting for the artifact cache to fetch ${artifacts.length} artifact(s)`;
        return this.#write(ev, {
          phase: 'Fetching',
          reason: 'Fetching',
          message,
          conditions: [{ type: 'ArtifactsReady', status: 'False', reason: a?.reason ?? 'Fetching', message }],
        });
      }
    }

    const mine = this.#created.get(key);
    const unrecorded = mine && mine.uid === ev.metadata.uid ? mine.podName : undefined;
    const known = ev.status?.podName ?? unrecorded;
    if (known) {
      // created before: the pod informer may lag behind our own create, so ask the API
      const live = await this.#d.core.readNamespacedPod({ name: known, namespace: s.namespace }).catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      });
      if (live && live.metadata?.ownerReferences?.some((o) => o.uid === ev.metadata.uid)) return this.#followPod(ev, live);
      // a Waiting pod (unschedulable) that went away is made again; one that may have run is not
      if (unrecorded !== undefined || ev.status?.phase !== 'Waiting') {
        const message = `pod ${known} was deleted before the evaluation finished (by a user, an eviction or a lost node)`;
        return this.#write(ev, { phase: 'Failed', reason: 'PodLost', message, conditions: [{ type: 'Completed', status: 'True', reason: 'PodLost', message }] });
      }
    }

    // held back past its start deadline (the status says by what); one the controller has not acted on
    // yet, because it was down, still gets its attempt
    const startLeft = msUntilStartDeadline(ev, s.startDeadlineSeconds);
    const holdup = statusHoldup(ev.status);
    if (startLeft !== undefined && startLeft <= 0 && holdup) return this.#write(ev, startDeadlineExceeded(ev, holdup, s.startDeadlineSeconds));
    const retry = (ms: number): WorkResult => soonest(ms, startLeft === undefined ? undefined : startLeft + 50);

    const fence = s.networkFence();
    if (!fence.start) {
      await this.#write(ev, { phase: 'Waiting', reason: NOT_ENFORCED_REASON, message: fence.message, conditions: [{ type: 'Scheduled', status: 'False', reason: NOT_ENFORCED_REASON, message: fence.message }] }, { refusal: true });
      return retry(s.waitingRetryMs);
    }
    const users = s.hostUsers?.();
    if (users && 'wait' in users) {
      await this.#write(ev, { phase: 'Waiting', reason: USER_NAMESPACES_REASON, message: users.wait, conditions: [{ type: 'Scheduled', status: 'False', reason: USER_NAMESPACES_REASON, message: users.wait }] }, { refusal: true });
      return retry(s.waitingRetryMs);
    }
    const extraPullSecrets = pullSecretsFor(ev.spec.image, s.extraPullSecrets ?? []);
    const cache = this.#d.caches.get(s.cacheName);
    const podSettings: PodSettings = {
      namespace: s.namespace,
      ...(fence.gate ? { networkGate: fence.gate } : {}),
      pullSecret: s.pullSecret,
      ...(extraPullSecrets.length ? { extraPullSecrets } : {}),
      ...(s.runtimePullSecrets?.length ? { runtimePullSecrets: s.runtimePullSecrets } : {}),
      proxyUrl: s.proxyUrl,
      ...(s.noProxy ? { noProxy: s.noProxy } : {}),
      ...(s.placement ? { placement: s.placement } : {}),
      ...(s.arbitraryUid ? { arbitraryUid: true } : {}),
      ...(users?.hostUsers === false ? { hostUsers: false as const } : {}),
      commonLabels: s.commonLabels,
      cache: {
        pvcName: cache?.spec.pvcName ?? s.pvcName,
        accessModes: cache?.spec.accessModes ?? s.accessModes,
        ...(cache?.status?.nodeName ? { nodeName: cache.status.nodeName } : {}),
      },
    };
    if (needsCacheNode(ev, podSettings)) {
      const message = `the artifact cache ${podSettings.cache.pvcName} is ReadWriteOnce and its filler has not reported which node holds the volume yet; the pod is created as soon as it does`;
      await this.#write(ev, { phase: 'Waiting', reason: 'CacheNodeUnknown', message, conditions: [{ type: 'Scheduled', status: 'False', reason: 'CacheNodeUnknown', message }] });
      return retry(s.waitingRetryMs);
    }
    if (s.maxConcurrent !== undefined) {
      // with the pods created but not in the informer yet
      const unseen = [...this.#created.values()].filter((c) => !this.#d.pods.get(c.podName, s.namespace)).length;
      const active = this.#d.pods.list(s.namespace).filter((p) => !podFinished(p) && !p.metadata?.deletionTimestamp).length + unseen;
      if (active >= s.maxConcurrent) {
        const message = `${active} evaluation pods are already running or pending, the limit of this cluster (--max-concurrent=${s.maxConcurrent}); it starts when one finishes`;
        await this.#write(ev, { phase: 'Waiting', reason: 'ConcurrencyLimit', message, conditions: [{ type: 'Scheduled', status: 'False', reason: 'ConcurrencyLimit', message }] });
        return retry(s.waitingRetryMs);
      }
    }

    const body = buildEvaluationPod(ev, podSettings);
    const podName = body.metadata!.name!;
    try {
      await this.#d.core.createNamespacedPod({ namespace: s.namespace, body });
      this.#d.metrics.podsCreated.inc();
      this.#created.set(key, { uid: ev.metadata.uid!, podName });
      // recorded here: the status write that follows says PodCreated quietly, or may already say more
      void this.#d.events.record(ev, 'Normal', 'PodCreated', `created pod ${podName}${cacheNodeOf(ev, podSettings) ? ` pinned to node ${podSettings.cache.nodeName}, which holds the ReadWriteOnce artifact cache` : ''}`);
      // the pod informer's add queues this key again, and that reconcile writes the status
      return;
    } catch (err) {
      const code = statusCode(err);
      const message = errorMessage(err);
      if (code === 409) {
        // already there (our own earlier create, which this process does not remember): record it, then follow it
        return this.#write(ev, {
          phase: 'Pending',
          reason: 'PodCreated',
          message: `created pod ${podName}`,
          podName,
          conditions: artifacts.length > 0 ? [{ type: 'ArtifactsReady', status: 'True', reason: 'Cached', message: `${artifacts.length} artifact(s) in the cache` }] : [],
        });
      } else if (code === 403 && /quota/i.test(message)) {
        // the cluster's own words, e.g. 'pods "rle-x" is forbidden: exceeded quota: runs, requested: requests.cpu=4, used: ..., limited: ...'
        await this.#write(ev, { phase: 'Waiting', reason: 'QuotaExceeded', message, conditions: [{ type: 'Scheduled', status: 'False', reason: 'QuotaExceeded', message }] }, { refusal: true });
        return retry(s.waitingRetryMs);
      } else if (isRbacDenial(err)) {
        // RBAC, not the pod: the authorizer is briefly empty after an apiserver restart, or the
        // chart's Role is missing. Retry; the evaluation is not at fault.
        const why = `the controller may not create pods in ${s.namespace} right now: ${message}; it retries, and if this persists check the chart's Role for ServiceAccount rlmesh-cluster-controller`;
        await this.#write(ev, { phase: 'Waiting', reason: 'ControllerForbidden', message: why, conditions: [{ type: 'Scheduled', status: 'False', reason: 'ControllerForbidden', message: why }] }, { refusal: true });
        return retry(Math.min(s.waitingRetryMs, 2000));
      } else if (code === 400 || code === 422 || code === 403) {
        const why = `the API server refused the evaluation pod: ${message}`;
        return this.#write(ev, { phase: 'Failed', reason: 'PodRejected', message: why, conditions: [{ type: 'Completed', status: 'True', reason: 'PodRejected', message: why }] });
      } else {
        throw err;
      }
    }
  }

  /** Why the node of a ReadWriteOnce cache can never run this evaluation, or undefined when it can (or is not known). */
  async #cacheNodeCannotRun(ev: RLMeshEvaluation): Promise<string | undefined> {
    const s = this.#d.settings;
    const cache = this.#d.caches.get(s.cacheName);
    const pvcName = cache?.spec.pvcName ?? s.pvcName;
    const nodeName = cacheNodeOf(ev, { cache: { pvcName, accessModes: cache?.spec.accessModes ?? s.accessModes, ...(cache?.status?.nodeName ? { nodeName: cache.status.nodeName } : {}) } });
    if (!nodeName || !this.#d.cacheNodes) return undefined;
    const node = await this.#d.cacheNodes.get(nodeName);
    if (!node) return undefined;
    const lacks = cacheNodeShortfalls(node, ev, s.placement ?? NO_PLACEMENT);
    return lacks.length > 0 ? cacheNodeCannotRunMessage(pvcName, nodeName, lacks) : undefined;
  }

  async #finished(ev: RLMeshEvaluation, pod: V1Pod | undefined): Promise<WorkResult> {
    if (pod && !podFinished(pod) && !pod.metadata?.deletionTimestamp) await this.#deletePod(pod, `the evaluation is ${ev.status?.phase}`);
    const reportedAt = ev.status?.reportedAt;
    if (!reportedAt) return;
    const due = new Date(reportedAt).getTime() + this.#d.settings.gcAfterMs - Date.now();
    if (due > 0) return { requeueAfterMs: due + 50 };
    try {
      await this.#d.custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ev.metadata.namespace!,
        plural: EVALUATION.plural,
        name: ev.metadata.name,
        propagationPolicy: 'Background',
      });
      this.#d.metrics.evaluationsCollected.inc();
      this.#d.log.info({ evaluation: ev.metadata.name, phase: ev.status?.phase, reportedAt }, 'garbage-collected a finished, reported evaluation');
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    return;
  }

  async #deletePod(pod: V1Pod, why: string): Promise<void> {
    try {
      await this.#d.core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, propagationPolicy: 'Background' });
      this.#d.log.info({ pod: pod.metadata?.name, why }, 'stopped evaluation pod');
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /**
   * Writes the status if it changed in a way worth a write, and records an Event when the
   * phase or its reason did (or the message, for a refusal). PodCreated is recorded by the create.
   */
  async #write(ev: RLMeshEvaluation, obs: Observation, opts: { refusal?: boolean } = {}): Promise<WorkResult> {
    const next = nextStatus(ev.status, obs, ev.metadata.generation);
    const changedPhase = ev.status?.phase !== next.phase || ev.status?.reason !== next.reason;
    const changedMessage = ev.status?.message !== next.message;
    if (!worthWriting(ev.status, next)) return;
    let updated: RLMeshEvaluation;
    try {
      updated = await this.#d.custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace: ev.metadata.namespace!,
          plural: EVALUATION.plural,
          name: ev.metadata.name,
          // resourceVersion makes this conditional: a stale view is refused (409) and retried
          body: { metadata: { resourceVersion: ev.metadata.resourceVersion }, status: ownedFields(next) },
        },
        MERGE_PATCH,
      );
    } catch (err) {
      // someone else (the filler, the agent) wrote meanwhile: the watch delivers the fresh
      // object, which queues this key again; the requeue is only a safety net
      if (isConflict(err)) return { requeueAfterMs: 1000 };
      if (isNotFound(err)) return;
      throw err;
    }
    // keep the cached copy current (status and resourceVersion) so the next reconcile of
    // this key neither redoes the write nor conflicts with it before the watch delivers it
    ev.status = { ...ev.status, ...next };
    if (updated?.metadata?.resourceVersion) ev.metadata.resourceVersion = updated.metadata.resourceVersion;
    const key = `${ev.metadata.namespace}/${ev.metadata.name}`;
    if (this.#created.get(key)?.podName === next.podName || isFinished(next.phase)) this.#created.delete(key);
    if (next.reason !== 'PodCreated' && (changedPhase || (opts.refusal && changedMessage))) {
      this.#d.metrics.phaseTransitions.inc({ phase: next.phase ?? '', reason: next.reason ?? '' });
      this.#d.log.info({ evaluation: ev.metadata.name, phase: next.phase, reason: next.reason }, next.message ?? '');
      void this.#d.events.record(ev, WARNING_PHASES.has(next.phase ?? '') ? 'Warning' : 'Normal', next.reason ?? next.phase ?? 'Updated', next.message ?? '');
    }
    return;
  }
}
