// The reconciler's API traffic for one evaluation, against an API fake: the
// create is the whole reconcile, each phase costs one status write, and a pod
// that vanishes before the status names it is lost, never created twice.
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { CoreV1Api, CustomObjectsApi, ObjectCache, V1Node, V1Pod } from '@kubernetes/client-node';
import type { RLMeshCache, RLMeshEvaluation } from '../lib/crds/types.ts';
import { EvaluationReconciler } from './evaluation-reconciler.ts';
import type { CacheNodeReader } from './cache-node-reader.ts';
import type { EventRecorder } from './events.ts';
import { createMetrics } from './metrics.ts';
import type { FenceDecision } from './network-fence.ts';
import type { HostUsersDecision } from '../lib/user-namespaces.ts';

const NS = 'rlmesh-runs';
const KEY = `${NS}/e1`;

function cache<T extends { metadata?: { name?: string } }>(): ObjectCache<T> & { items: Map<string, T> } {
  const items = new Map<string, T>();
  return { items, get: (name: string) => items.get(name), list: () => [...items.values()] } as unknown as ObjectCache<T> & { items: Map<string, T> };
}

type WorldOptions = {
  fence?: () => FenceDecision;
  startDeadlineSeconds?: number;
  waitingRetryMs?: number;
  /** what the API server answers a pod create with instead of creating it */
  refuseCreate?: () => Error | undefined;
  /** the operator's pull Secrets with their repository prefixes */
  pulls?: { secrets: { name: string; registries: string[] }[] };
  /** the evaluation's image (default img:1) */
  image?: string;
  /** evaluations.hostUsers as decided against the nodes (lib/user-namespaces.ts) */
  hostUsers?: () => HostUsersDecision;
  /** a ReadWriteOnce cache held by node real-0, which reads as this (undefined: gone or not readable) */
  rwoCacheNode?: { node: V1Node | undefined };
  /** runtime config pods.commonLabels */
  commonLabels?: Record<string, string>;
};

function world({ fence = () => ({ start: true }), startDeadlineSeconds = 1800, waitingRetryMs = 1000, refuseCreate = () => undefined, pulls, rwoCacheNode, commonLabels, hostUsers, image = 'img:1' }: WorldOptions = {}) {
  const evaluations = cache<RLMeshEvaluation>();
  const pods = cache<V1Pod>();
  const caches = cache<RLMeshCache>();
  const nodes = cache<V1Node>();
  // what the API server holds, apart from the informers' view
  const server = new Map<string, V1Pod>();
  const calls: string[] = [];
  const events: string[] = [];
  let rv = 1;
  const core = {
    createNamespacedPod: async ({ body }: { body: V1Pod }) => {
      calls.push('create pod');
      const refusal = refuseCreate();
      if (refusal) throw refusal;
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
    nodes,
    events: recorder,
    metrics: createMetrics(),
    log: pino({ level: 'silent' }),
    ...(rwoCacheNode ? { cacheNodes: { get: async (name: string) => (calls.push(`get node ${name}`), rwoCacheNode.node) } as unknown as CacheNodeReader } : {}),
    settings: { namespace: NS, pullSecret: 'pull', proxyUrl: 'http://10.0.0.1:3128', cacheName: 'c', pvcName: 'rlmesh-artifact-cache', accessModes: ['ReadWriteMany'], gcAfterMs: 60_000, waitingRetryMs, startDeadlineSeconds, networkFence: fence,
      ...(pulls ? { extraPullSecrets: pulls.secrets } : {}), ...(commonLabels ? { commonLabels } : {}), ...(hostUsers ? { hostUsers } : {}) },
  });
  if (rwoCacheNode) {
    caches.items.set('c', { apiVersion: 'rlmesh.dev/v1alpha1', kind: 'RLMeshCache', metadata: { name: 'c' }, spec: { pvcName: 'rlmesh-artifact-cache', namespace: NS, accessModes: ['ReadWriteOnce'] }, status: { nodeName: 'real-0' } } as RLMeshCache);
  }
  evaluations.items.set('e1', {
    apiVersion: 'rlmesh.dev/v1alpha1',
    kind: 'RLMeshEvaluation',
    metadata: { name: 'e1', namespace: NS, uid: 'uid-1', generation: 1, resourceVersion: '1', creationTimestamp: new Date().toISOString() },
    spec: { evaluationId: 'ev_1', image, deadlineSeconds: 600, cancelled: false },
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
  /** Moves the evaluation's creation into the past, as if it had waited that long. */
  const createdAgo = (ms: number): void => {
    evaluations.items.get('e1')!.metadata.creationTimestamp = new Date(Date.now() - ms).toISOString();
  };
  return { reconciler, calls, events, evaluations, server, pods, nodes, podIs, createdAgo, running, done, status: () => evaluations.items.get('e1')!.status };
}

describe('EvaluationReconciler', () => {
  describe('a ReadWriteOnce cache on a node that can never run the evaluation', () => {
    const artifacts = [{ name: 'policy.pt', sha256: 'a'.repeat(64), sizeBytes: 1, source: { httpsUrlSecretRef: { name: 'e1-sources', key: 'url.policy.pt' } } }];
    const cpuNode: V1Node = { metadata: { name: 'real-0', labels: { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' } }, status: { allocatable: { cpu: '2', memory: '8Gi' } } };
    const wants = (w: ReturnType<typeof world>, spec: Partial<RLMeshEvaluation['spec']>): void => {
      Object.assign(w.evaluations.items.get('e1')!.spec, spec);
    };

    it('fails it at once, before its artifacts arrive, as CacheNodeCannotRun naming the node, what it lacks and the fix; no pod', async () => {
      const w = world({ rwoCacheNode: { node: cpuNode } });
      wants(w, { artifacts, resources: { gpu: { count: 1, vendor: 'nvidia' } } });
      expect(await w.reconciler.reconcile(KEY)).toBeUndefined();
      expect(w.calls).toEqual(['get node real-0', 'status Failed/CacheNodeCannotRun']);
      expect(w.status()).toMatchObject({ phase: 'Failed', reason: 'CacheNodeCannotRun' });
      expect(w.status()!.message).toMatch(/node real-0, .* no nvidia\.com\/gpu \(1 asked\)\. To run evaluations with artifacts on every node, set storage\.className to a ReadWriteMany StorageClass and artifactCache\.storage\.sharedPvc\.accessModes=\[ReadWriteMany\]$/);
      expect(w.status()!.conditions!.find((c) => c.type === 'Completed')).toMatchObject({ status: 'True', reason: 'CacheNodeCannotRun' });
      expect(w.events).toEqual(['CacheNodeCannotRun']);
    });

    it('waits for the artifacts as usual when the node could run it, or is not known', async () => {
      for (const node of [cpuNode, undefined]) {
        const w = world({ rwoCacheNode: { node } });
        wants(w, { artifacts, resources: { cpu: '2', memory: '8Gi' } });
        await w.reconciler.reconcile(KEY);
        expect(w.calls).toEqual(['get node real-0', 'status Fetching/Fetching']);
      }
    });

    it('does not read the node for an evaluation without artifacts: it is not pinned', async () => {
      const w = world({ rwoCacheNode: { node: cpuNode } });
      wants(w, { resources: { gpu: { count: 1, vendor: 'nvidia' } } });
      await w.reconciler.reconcile(KEY);
      expect(w.calls).toEqual(['create pod']);
    });
  });

  it('creates no pod while the fence is closed: Waiting with its reason, then the pod once it opens', async () => {
    let decision: FenceDecision = { start: false, message: 'NetworkPolicy enforcement has not been seen: no' };
    const w = world({ fence: () => decision });
    expect(await w.reconciler.reconcile(KEY)).toEqual({ requeueAfterMs: 1000 });
    expect(w.calls).toEqual(['status Waiting/NetworkPolicyNotEnforced']);
    expect(w.status()).toMatchObject({ phase: 'Waiting', reason: 'NetworkPolicyNotEnforced', message: decision.start ? '' : decision.message });
    expect(w.events).toEqual(['NetworkPolicyNotEnforced']);
    decision = { start: true, gate: { image: 'probe@sha256:1', forbidden: '10.96.0.1:443', allowed: '10.96.0.9:3128', graceSeconds: 60 } };
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['status Waiting/NetworkPolicyNotEnforced', 'create pod']);
    expect(w.server.get('rle-e1')?.spec?.initContainers?.map((c) => c.name)).toEqual(['network-ready']);
  });

  it('evaluations.hostUsers: no pod while user namespaces are required and a node lacks them (Waiting as UserNamespacesUnsupported), then one with hostUsers: false', async () => {
    let decision: HostUsersDecision = { wait: 'evaluations.hostUsers=false asks for user namespaces, but node web lacks them' };
    const w = world({ hostUsers: () => decision });
    expect(await w.reconciler.reconcile(KEY)).toEqual({ requeueAfterMs: 1000 });
    expect(w.calls).toEqual(['status Waiting/UserNamespacesUnsupported']);
    expect(w.status()).toMatchObject({ phase: 'Waiting', reason: 'UserNamespacesUnsupported', message: 'evaluations.hostUsers=false asks for user namespaces, but node web lacks them' });
    expect(w.events).toEqual(['UserNamespacesUnsupported']);
    decision = { hostUsers: false, found: 'all nodes support them' };
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['status Waiting/UserNamespacesUnsupported', 'create pod']);
    expect(w.server.get('rle-e1')?.spec?.hostUsers).toBe(false);
    // auto where they are not supported: the field is left to the node's users
    const plain = world({ hostUsers: () => ({ hostUsers: undefined, found: 'node web lacks them' }) });
    await plain.reconciler.reconcile(KEY);
    expect(plain.calls).toEqual(['create pod']);
    expect(plain.server.get('rle-e1')?.spec?.hostUsers).toBeUndefined();
  });

  it("gives a pod the operator's pull Secrets mapped to its image, after the platform's, and none other", async () => {
    const secrets = [{ name: 'corp-pull', registries: ['registry.corp.example/evals/'] }, { name: 'other-pull', registries: ['registry.corp.example/other/'] }];
    const w = world({ pulls: { secrets }, image: 'registry.corp.example/evals/gym:1' });
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod']);
    expect(w.server.get('rle-e1')?.spec?.imagePullSecrets).toEqual([{ name: 'pull' }, { name: 'corp-pull' }]);
    for (const image of ['registry.rlmesh.dev/envs/gym:1', 'registry.corp.example/evals-evil/gym:1', 'registry.corp.example:5000/evals/gym:1', 'registry.corp.example/evals:1']) {
      const other = world({ pulls: { secrets }, image });
      await other.reconciler.reconcile(KEY);
      expect(other.calls, image).toEqual(['create pod']);
      expect(other.server.get('rle-e1')?.spec?.imagePullSecrets, image).toEqual([{ name: 'pull' }]);
    }
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

  it("creates the pod with the chart's commonLabels", async () => {
    const w = world({ commonLabels: { 'example.com/cost-center': 'c1' } });
    await w.reconciler.reconcile(KEY);
    expect(w.server.get('rle-e1')?.metadata?.labels).toMatchObject({ 'example.com/cost-center': 'c1', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-controller' });
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

  it('fails a running evaluation as NodeLost once its node stops reporting, and stops its pod', async () => {
    const w = world();
    await w.reconciler.reconcile(KEY);
    w.podIs({ phase: 'Running', startTime: new Date(), containerStatuses: [w.running] }, 'n1');
    await w.reconciler.reconcile(KEY);
    w.nodes.items.set('n1', { metadata: { name: 'n1' }, status: { conditions: [{ type: 'Ready', status: 'Unknown', message: 'Kubelet stopped posting node status.' }] } });
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'status Running/Started', 'status Failed/NodeLost', 'delete pod']);
    expect(w.status()).toMatchObject({ phase: 'Failed', reason: 'NodeLost', nodeName: 'n1', startTime: '2026-01-01T00:00:05.000Z', message: expect.stringContaining('node n1 stopped reporting') });
    expect(w.events).toEqual(['PodCreated', 'Started', 'NodeLost']);
  });

  it('reports an evicted pod as Evicted, not as the exit code the kubelet stopped it with', async () => {
    const w = world();
    await w.reconciler.reconcile(KEY);
    w.podIs({ phase: 'Running', startTime: new Date(), containerStatuses: [w.running] }, 'n1');
    await w.reconciler.reconcile(KEY);
    const killed = { ...w.done, state: { terminated: { exitCode: 143, startedAt: new Date('2026-01-01T00:00:05Z'), finishedAt: new Date() } } };
    w.podIs({ phase: 'Failed', containerStatuses: [killed], conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI', message: 'Eviction API: evicting' }] }, 'n1');
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'status Running/Started', 'status Failed/Evicted']);
    expect(w.status()).toMatchObject({ phase: 'Failed', reason: 'Evicted', message: expect.stringContaining('kubectl drain') });
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

describe('the start deadline (evaluations.startDeadlineSeconds)', () => {
  const quotaRefusal = () =>
    Object.assign(new Error('pods "rle-e1" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=1'), { code: 403 });
  const waitingOn = (reason: string, message: string) => ({ name: 'evaluation', image: 'img:1', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason, message } } });

  it('fails an evaluation the quota held past its deadline with StartDeadlineExceeded, quoting the quota, and tries no more', async () => {
    const w = world({ startDeadlineSeconds: 900, refuseCreate: quotaRefusal });
    w.createdAgo(60_000);
    expect(await w.reconciler.reconcile(KEY)).toEqual({ requeueAfterMs: 1000 });
    expect(w.status()).toMatchObject({ phase: 'Waiting', reason: 'QuotaExceeded' });
    w.createdAgo(901_000);
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'status Waiting/QuotaExceeded', 'status Failed/StartDeadlineExceeded']);
    expect(w.events).toEqual(['QuotaExceeded', 'StartDeadlineExceeded']);
    const { message } = w.status()!;
    expect(message).toMatch(/^the evaluation did not start within 900s of when it was created \(evaluations\.startDeadlineSeconds\): /);
    expect(message).toContain("the API server's ResourceQuota admission last said QuotaExceeded: pods \"rle-e1\" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=2");
    expect(message).toMatch(/Raise the quota \(evaluations\.resourceQuota\.hard\) or run fewer evaluations at once\. Where starting legitimately takes longer .*, raise evaluations\.startDeadlineSeconds$/);
    expect(w.status()!.conditions!.find((c) => c.type === 'Completed')).toMatchObject({ status: 'True', reason: 'StartDeadlineExceeded' });
    await w.reconciler.reconcile(KEY);
    expect(w.calls.filter((c) => c === 'create pod')).toHaveLength(1);
  });

  it('comes back when the start deadline passes if that is sooner than the next retry', async () => {
    const w = world({ startDeadlineSeconds: 60, waitingRetryMs: 60_000, refuseCreate: quotaRefusal });
    w.createdAgo(55_000);
    const { requeueAfterMs } = (await w.reconciler.reconcile(KEY)) as { requeueAfterMs: number };
    expect(requeueAfterMs).toBeGreaterThan(4_000);
    expect(requeueAfterMs).toBeLessThanOrEqual(5_050);
  });

  it('stops a pod whose image does not pull by the deadline, quoting the kubelet, and requeues for it until then', async () => {
    const w = world({ startDeadlineSeconds: 600 });
    await w.reconciler.reconcile(KEY);
    w.createdAgo(500_000);
    w.podIs({ phase: 'Pending', startTime: new Date(), containerStatuses: [waitingOn('ImagePullBackOff', 'Back-off pulling image "img:1"')] }, 'n1');
    const { requeueAfterMs } = (await w.reconciler.reconcile(KEY)) as { requeueAfterMs: number };
    expect(w.status()).toMatchObject({ phase: 'Pending', reason: 'ImagePullBackOff' });
    // nothing else would wake it: the pod may back off for ever without another event
    expect(requeueAfterMs).toBeGreaterThan(99_000);
    expect(requeueAfterMs).toBeLessThanOrEqual(100_050);

    w.createdAgo(601_000);
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'status Pending/ImagePullBackOff', 'status Failed/StartDeadlineExceeded', 'delete pod']);
    expect(w.server.has('rle-e1')).toBe(false);
    const { message } = w.status()!;
    expect(message).toContain('did not start within 600s of when it was created (evaluations.startDeadlineSeconds), so its pod rle-e1 was stopped');
    expect(message).toContain('the kubelet last said ImagePullBackOff (container evaluation): Back-off pulling image "img:1"');
    expect(message).toContain("Check that img:1 exists and that its registry accepts the cluster's pull Secret");
  });

  it('stops an unschedulable pod at the deadline, quoting the scheduler', async () => {
    const w = world({ startDeadlineSeconds: 600 });
    await w.reconciler.reconcile(KEY);
    w.createdAgo(601_000);
    w.podIs({ phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/3 nodes are available: 3 Insufficient nvidia.com/gpu.' }] });
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod', 'status Failed/StartDeadlineExceeded', 'delete pod']);
    expect(w.status()!.message).toContain('the scheduler last said Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu. Add or free nodes that fit');
  });

  it('leaves alone a pod that started before the deadline, however old the evaluation', async () => {
    const w = world({ startDeadlineSeconds: 60 });
    await w.reconciler.reconcile(KEY);
    w.createdAgo(7_200_000);
    w.podIs({ phase: 'Running', startTime: new Date(), containerStatuses: [w.running] }, 'n1');
    const { requeueAfterMs } = (await w.reconciler.reconcile(KEY)) as { requeueAfterMs: number };
    expect(w.calls).toEqual(['create pod', 'status Running/Started']);
    // the run's own deadline (600 s), not the start deadline
    expect(requeueAfterMs).toBeGreaterThan(590_000);
  });

  it('gives an evaluation the controller never acted on (it was down) its attempt, however old', async () => {
    const w = world({ startDeadlineSeconds: 60 });
    w.createdAgo(7_200_000);
    await w.reconciler.reconcile(KEY);
    expect(w.calls).toEqual(['create pod']);
  });
});
