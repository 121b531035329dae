// The reconciler's API traffic for one evaluation, against an API fake: the
// create is the whole reconcile, each phase costs one status write, and a pod
// that vanishes before the status names it is lost, never created twice.
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { CoreV1Api, CustomObjectsApi, ObjectCache, V1Pod } from '@kubernetes/client-node';
import type { RLMeshCache, RLMeshEvaluation } from '../lib/crds/types.ts';
import { EvaluationReconciler } from './evaluation-reconciler.ts';
import type { EventRecorder } from './events.ts';
import { createMetrics } from './metrics.ts';
import type { FenceDecision } from './network-fence.ts';

const NS = 'rlmesh-runs';
const KEY = `${NS}/e1`;

function cache<T extends { metadata?: { name?: string } }>(): ObjectCache<T> & { items: Map<string, T> } {
  const items = new Map<string, T>();
  return { items, get: (name: string) => items.get(name), list: () => [...items.values()] } as unknown as ObjectCache<T> & { items: Map<string, T> };
}

function world(fence: () => FenceDecision = () => ({ start: true })) {
  const evaluations = cache<RLMeshEvaluation>();
  const pods = cache<V1Pod>();
  const caches = cache<RLMeshCache>();
  // what the API server holds, apart from the informers' view
  const server = new Map<string, V1Pod>();
  const calls: string[] = [];
  const events: string[] = [];
  let rv = 1;
  const core = {
    createNamespacedPod: async ({ body }: { body: V1Pod }) => {
      calls.push('create pod');
      if (server.has(body.metadata!.name!)) throw Object.assign(new Error('already exists'), { code: 409 });
      server.set(body.metadata!.name!, body);
      return body;
    },
    readNamespacedPod: async ({ name }: { name: string }) => {
      calls.push('get pod');
      const pod = server.get(name);
      if (!pod) throw Object.assign(new Error('not found'), { code: 404 });
      return pod;
    },
    deleteNamespacedPod: async ({ name }: { name: string }) => {
      calls.push('delete pod');
      server.delete(name);
    },
  } as unknown as CoreV1Api;
  const custom = {
    patchNamespacedCustomObjectStatus: async ({ name, body }: { name: string; body: { status: Record<string, unknown> } }) => {
      calls.push(`status ${String(body.status.phase)}/${String(body.status.reason)}`);
      const ev = evaluations.items.get(name)!;
      return { ...ev, metadata: { ...ev.metadata, resourceVersion: String(++rv) } };
    },
  } as unknown as CustomObjectsApi;
  const recorder = {
    record: async (_ev: RLMeshEvaluation, _type: string, reason: string) => {
      events.push(reason);
    },
  } as unknown as EventRecorder;
  const reconciler = new EvaluationReconciler({
    core,
    custom,
    evaluations,
    pods,
    caches,
    events: recorder,
    metrics: createMetrics(),
    log: pino({ level: 'silent' }),
    settings: { namespace: NS, pullSecret: 'pull', proxyUrl: 'http://10.0.0.1:3128', cacheName: 'c', pvcName: 'rlmesh-artifact-cache', accessModes: ['ReadWriteMany'], gcAfterMs: 60_000, waitingRetryMs: 1000, networkFence: fence },
  });
  evaluations.items.set('e1', {
    apiVersion: 'rlmesh.dev/v1alpha1',
    kind: 'RLMeshEvaluation',
    metadata: { name: 'e1', namespace: NS, uid: 'uid-1', generation: 1, resourceVersion: '1' },
    spec: { evaluationId: 'ev_1', image: 'img:1', deadlineSeconds: 600, cancelled: false },
  });
  /** The pod as the informer would show it next, with the API server's copy advanced alike. */
  const podIs = (status: V1Pod['status'], nodeName?: string): void => {
    const created = server.get('rle-e1')!;
    const pod = { ...created, spec: { ...created.spec!, ...(nodeName ? { nodeName } : {}) }, status };
    server.set('rle-e1', pod);
    pods.items.set('rle-e1', pod);
  };
  const running = { name: 'evaluation', image: 'img:1', imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: new Date('2026-01-01T00:00:05Z') } } };
  const done = { name: 'evaluation', image: 'img:1', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0, startedAt: new Date('2026-01-01T00:00:05Z'), finishedAt: new Date('2026-01-01T00:00:09Z') } } };
  return { reconciler, calls, events, evaluations, server, pods, podIs, running, done, status: () => evaluations.items.get('e1')!.status };
}

describe('EvaluationReconciler', () => {
  it('creates no pod while the fence is closed: Waiting with its reason, then the pod once it opens', async () => {
    let decision: FenceDecision = { start: false, message: 'NetworkPolicy enforcement has not been seen: no' };
    const w = world(() => decision);
    expect(await w.reconciler.reconcile(KEY)).toEqual({ requeueAfterMs: 1000 });
    expect(w.calls).toEqual(['status Waiting/NetworkPolicyNotEnforced']);
    expect(w.status()).toMatchObject({ phase: 'Waiting', reason: 'NetworkPolicyNotEnforced', message: decision.start ? '' : decision.message });
    expect(w.events).toEqual(['NetworkPolicyNotEnforced']);
    decision = { start: true, gate: { image: 'probe@sha256:1', forbidden: '10.96.0.1:443', allowed: '10.96.0.9:3128', graceSeconds: 60 } };
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['status Waiting/NetworkPolicyNotEnforced', 'create pod']);
    expect(w.server.get('rle-e1')?.spec?.initContainers?.map((c) => c.name)).toEqual(['network-ready']);
  });

  it('creates the pod and nothing else, then writes once per phase as the pod informer reports it', async () => {
    const w = world();
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod']);
    expect(w.events).toEqual(['PodCreated']);

    w.podIs({ phase: 'Pending' });
    await w.reconciler.reconcile(KEY);
    expect(w.status()).toMatchObject({ phase: 'Pending', reason: 'PodCreated', podName: 'rle-e1' });
    w.podIs({ phase: 'Pending' }, 'n1');
    await w.reconciler.reconcile(KEY);
    w.podIs({ phase: 'Running', startTime: new Date(), containerStatuses: [w.running] }, 'n1');
    await w.reconciler.reconcile(KEY);
    await w.reconciler.reconcile(KEY);
    w.podIs({ phase: 'Succeeded', containerStatuses: [w.done] }, 'n1');
    await w.reconciler.reconcile(KEY);
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'status Pending/PodCreated', 'status Running/Started', 'status Succeeded/Completed']);
    expect(w.events).toEqual(['PodCreated', 'Started', 'Completed']);
    expect(w.status()).toMatchObject({ phase: 'Succeeded', podName: 'rle-e1', nodeName: 'n1', exitCode: 0 });
  });

  it('writes the pod as it is by the time its reconcile comes: a pod already finished costs one write', async () => {
    const w = world();
    await w.reconciler.reconcile(KEY);
    w.podIs({ phase: 'Succeeded', startTime: new Date(), containerStatuses: [w.done] }, 'n1');
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'status Succeeded/Completed']);
    expect(w.status()).toMatchObject({ phase: 'Succeeded', podName: 'rle-e1', startTime: '2026-01-01T00:00:05.000Z' });
  });

  it('follows its pod from the API while the informer has not shown it, and creates it only once', async () => {
    const w = world();
    await w.reconciler.reconcile(KEY);
    // the evaluation changed (say, the agent wrote to it) before the pod informer's add arrived
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'get pod', 'status Pending/PodCreated']);
    expect(w.status()?.podName).toBe('rle-e1');
  });

  it('fails as PodLost, never creating it again, when the pod vanishes before the status names it', async () => {
    const w = world();
    await w.reconciler.reconcile(KEY);
    w.server.delete('rle-e1'); // deleted (a user, an eviction) before the informer showed it
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'get pod', 'status Failed/PodLost']);
    await w.reconciler.reconcile(KEY);
    expect(w.calls.filter((c) => c === 'create pod')).toHaveLength(1);
  });

  it('follows a pod it does not remember creating (409) and records its name', async () => {
    const w = world();
    w.server.set('rle-e1', { metadata: { name: 'rle-e1', namespace: NS, ownerReferences: [{ apiVersion: 'rlmesh.dev/v1alpha1', kind: 'RLMeshEvaluation', name: 'e1', uid: 'uid-1', controller: true }] }, spec: { containers: [] } });
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'status Pending/PodCreated']);
    expect(w.events).toEqual([]);
    expect(w.status()?.podName).toBe('rle-e1');
  });
});
