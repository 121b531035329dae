// Status changes of RLMeshEvaluation objects become EvaluationUpdates: each
// with a unique id and a per-evaluation sequence, spooled (fsync'd) before it
// is sent. A status the spool already recorded for an evaluation is not
// reported again, so a restart or a relist re-reports nothing.
import { create, toJson, fromJson, type JsonValue } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { EVALUATION, GROUP, VERSION, type RLMeshEvaluation } from '../lib/crds/types.ts';
import { EvaluationUpdateSchema, type EvaluationUpdate } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { evaluationName } from './assignments.ts';
import { startInformer, type Informer } from '../lib/informer.ts';
import type { InformerMetricsFor } from '../lib/informer-metrics.ts';
import { SpoolFullError, type Json, type Spool, type SpooledUpdate } from './spool.ts';
import { errorFields } from '../lib/error-fields.ts';

const FINISHED = new Set(['Succeeded', 'Failed', 'Cancelled']);

export type Observed = { phase: string; reason: string; message: string; exitCode?: number; pod: string; node: string; startedAt?: string };

type EvalLite = { metadata: { name: string; namespace: string }; spec: { evaluationId: string }; status: Observed | undefined };

export function trimEvaluation(o: unknown): EvalLite {
  const e = o as RLMeshEvaluation;
  const st = e.status;
  return {
    metadata: { name: e.metadata?.name ?? '', namespace: e.metadata?.namespace ?? '' },
    spec: { evaluationId: e.spec?.evaluationId ?? e.metadata?.name ?? '' },
    status: {
      // an evaluation the controller has not touched yet is Pending: reporting it tells the control plane the assignment landed
      phase: st?.phase ?? 'Pending',
      reason: st?.reason ?? (st?.phase ? '' : 'Accepted'),
      message: st?.message ?? '',
      ...(st?.exitCode !== undefined ? { exitCode: st.exitCode } : {}),
      pod: st?.podName ?? '',
      node: st?.nodeName ?? '',
      ...(st?.startTime ? { startedAt: st.startTime } : {}),
    },
  };
}

export const fingerprint = (o: Observed): string => JSON.stringify([o.phase, o.reason, o.message, o.exitCode ?? null, o.pod, o.node]);

export const toUpdate = (r: SpooledUpdate): EvaluationUpdate => fromJson(EvaluationUpdateSchema, r.message as JsonValue);

export type EvaluationStatusOptions = {
  informerMetrics?: InformerMetricsFor;
  kc: k8s.KubeConfig;
  namespace: string;
  spool: Spool;
  log: Logger;
  watchSilenceMs: number;
  /** a durable update, ready to send */
  send: (u: EvaluationUpdate) => void;
  /** an evaluation has finished or is gone (by object name): what it held for its start may go */
  onFinished?: (name: string) => void;
};

export class EvaluationStatus {
  private readonly o: EvaluationStatusOptions;
  private informer: Informer<EvalLite> | undefined;
  /** evaluations whose latest status could not be spooled yet (spool full) */
  private readonly deferred = new Map<string, Observed>();
  private fullLogged = false;

  constructor(o: EvaluationStatusOptions) {
    this.o = o;
    o.spool.onSpace(() => this.retryDeferred());
  }

  async start(): Promise<void> {
    const { kc, namespace, log } = this.o;
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    this.informer = startInformer<EvalLite>({
      name: 'rlmeshevaluations',
      kc,
      log,
      path: `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${EVALUATION.plural}`,
      list: (p) => custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: EVALUATION.plural, ...p }) as Promise<{ items: unknown[] }>,
      trim: trimEvaluation,
      watchSilenceMs: this.o.watchSilenceMs,
      metrics: this.o.informerMetrics,
    });
    const onEval = (e: EvalLite) => {
      this.observe(e.spec.evaluationId, e.status!);
      if (FINISHED.has(e.status!.phase)) this.o.onFinished?.(e.metadata.name);
    };
    this.informer.on('add', onEval);
    this.informer.on('update', onEval);
    this.informer.on('delete', (e) => {
      this.deferred.delete(e.spec.evaluationId);
      void this.o.spool.forget(e.spec.evaluationId);
      this.o.onFinished?.(e.metadata.name);
    });
    await this.informer.synced;
  }

  /** An evaluation's state as the informer last saw it, by object name (undefined before the first list). */
  stateOf(name: string): 'running' | 'finished' | 'absent' | undefined {
    if (!this.informer) return undefined;
    const e = this.informer.cache.get(name, this.o.namespace);
    return e === undefined ? 'absent' : FINISHED.has(e.status?.phase ?? '') ? 'finished' : 'running';
  }

  /**
   * Records the status if it changed since the last report; sends it once
   * durable. A finished evaluation whose Running phase this agent never saw
   * (its watch was down, or the agent was) gets that Running reported first,
   * dated from status.startTime, so the control plane holds every phase.
   */
  observe(evaluationId: string, o: Observed): void {
    const fp = fingerprint(o);
    const last = this.o.spool.state(evaluationId)?.fingerprint;
    if (last === fp) return;
    if (FINISHED.has(o.phase) && o.startedAt) {
      const lastPhase = last === undefined ? undefined : (JSON.parse(last) as string[])[0];
      if (lastPhase !== 'Running' && !FINISHED.has(lastPhase ?? '')) {
        const running: Observed = { phase: 'Running', reason: 'Started', message: `running on node ${o.node}`, pod: o.pod, node: o.node };
        if (!this.record(evaluationId, running, new Date(o.startedAt))) {
          this.deferred.set(evaluationId, o);
          return;
        }
      }
    }
    if (!this.record(evaluationId, o, new Date())) this.deferred.set(evaluationId, o);
  }

  /** false when the spool is full (the status is deferred) */
  private record(evaluationId: string, o: Observed, observedAt: Date): boolean {
    const fp = fingerprint(o);
    let pending: Promise<SpooledUpdate>;
    try {
      pending = this.o.spool.append(evaluationId, fp, (id, sequence) =>
        toJson(
          EvaluationUpdateSchema,
          create(EvaluationUpdateSchema, {
            id,
            evaluationId,
            phase: o.phase,
            reason: o.reason,
            message: o.message,
            exitCode: o.exitCode ?? 0,
            hasExitCode: o.exitCode !== undefined,
            pod: o.pod,
            node: o.node,
            observedAt: timestampFromDate(observedAt),
            sequence: BigInt(sequence),
          }),
        ) as Json,
      );
    } catch (err) {
      if (!(err instanceof SpoolFullError)) throw err;
      if (!this.fullLogged) {
        this.o.log.error({ deferred: this.deferred.size + 1 }, `${err.message}; the latest status of each evaluation is kept and spooled as soon as there is room`);
        this.fullLogged = true;
      }
      return false;
    }
    pending.then(
      (r) => this.o.send(toUpdate(r)),
      (err: unknown) => this.o.log.error({ ...errorFields(err), evaluationId }, 'could not spool an evaluation update'),
    );
    return true;
  }

  /** The names of the evaluations here that have not finished (what a drain waits for); empty until the informer has listed. */
  unfinished(): string[] {
    return (this.informer?.cache.list(this.o.namespace) ?? []).filter((e) => !FINISHED.has(e.status?.phase ?? 'Pending')).map((e) => e.metadata.name);
  }

  /**
   * The control plane holds these updates: a finished evaluation gets
   * status.reportedAt, after which the controller garbage-collects it.
   */
  async reported(acked: SpooledUpdate[]): Promise<void> {
    const { kc, namespace, log } = this.o;
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    for (const r of acked) {
      const phase = (r.message as { phase?: string }).phase;
      if (!phase || !FINISHED.has(phase)) continue;
      const name = evaluationName(r.evaluationId);
      try {
        await custom.patchNamespacedCustomObjectStatus(
          { group: GROUP, version: VERSION, namespace, plural: EVALUATION.plural, name, body: { status: { reportedAt: new Date().toISOString() } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );
      } catch (err) {
        const code = (err as { code?: number }).code;
        if (code === 403) {
          log.warn({ evaluationId: r.evaluationId }, `cannot set status.reportedAt: the agent's Role in ${namespace} lacks "patch" on rlmeshevaluations/status (upgrade the chart); the controller keeps finished evaluations until it is set`);
        } else if (code !== 404) {
          log.warn({ evaluationId: r.evaluationId, ...errorFields(err) }, 'could not mark a finished evaluation as reported; the controller keeps it until this succeeds');
        }
      }
    }
  }

  private retryDeferred() {
    if (this.deferred.size === 0) return;
    const items = [...this.deferred];
    this.deferred.clear();
    this.fullLogged = false;
    for (const [id, o] of items) this.observe(id, o);
  }

  async stop(): Promise<void> {
    await this.informer?.stop();
  }
}
