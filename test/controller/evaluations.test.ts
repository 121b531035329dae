// Evaluations become pods on the real local cluster: the reconciler and the
// cache filler run as child processes under their own ServiceAccounts; kwok
// plays each pod's outcome from the environment its evaluation gives the
// container (test/support/kwok-outcome.ts), which the controller passes
// through like any evaluation's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { GROUP, VERSION } from '../../lib/crds/types.ts';
import { MERGE_PATCH } from '../../lib/kube-errors.ts';
import { kubectl } from '../support/cluster.ts';
import { blob, startArtifactServer, type ArtifactServer } from './artifact-server.ts';
import { apply, createEvaluation, evaluation, eventsFor, getCache, getEvaluation, getPod, metric, setupEnv, startController, waitForPhase, type ControllerProcess, type Env } from './harness.ts';
import { until } from '../support/until.ts';
import { applyKwokNode, deleteNodes } from '../support/kwok-node.ts';

let env: Env;
let server: ArtifactServer;
let reconciler: ControllerProcess;
let filler: ControllerProcess;
const artifact = blob(64 * 1024);

const patchEvaluation = (name: string, body: object, status = false) =>
  (status ? env.custom.patchNamespacedCustomObjectStatus.bind(env.custom) : env.custom.patchNamespacedCustomObject.bind(env.custom))(
    { group: GROUP, version: VERSION, namespace: env.runs, plural: 'rlmeshevaluations', name, body },
    MERGE_PATCH,
  );

beforeAll(async () => {
  env = await setupEnv();
  server = await startArtifactServer();
  server.put('/policy.pt', artifact.data);
  reconciler = await startController(env, 'reconciler', ['--gc-after-seconds=2']);
  filler = await startController(env, 'cache-filler', [`--cache-dir=${env.dir}/cache`, '--node-name=kwok-cpu-0'], { NODE_EXTRA_CA_CERTS: server.caFile });
  await until('the filler to publish the cache status with its node', async () => (await getCache(env))?.status?.nodeName === 'kwok-cpu-0');
});

afterAll(async () => {
  await reconciler?.stop();
  await filler?.stop();
  await server?.close();
  await env?.cleanup();
});

describe('evaluation -> pod', () => {
  it('runs a pod with every required property, pinned to the ReadWriteOnce cache node, and reports the outcome with Events', async () => {
    const happy = evaluation(
      'happy',
      {
        command: ['python', 'run.py'],
        args: ['--episodes', '2'],
        env: [{ name: 'SEED', value: '42' }],
        resources: { cpu: '500m', memory: '256Mi' },
        artifacts: [{ name: 'policy.pt', sha256: artifact.sha256, sizeBytes: artifact.data.length, source: { httpsUrl: server.url('/policy.pt') } }],
        deadlineSeconds: 120,
      },
      { duration: '2s', exitCode: 0 },
    );
    // the controller honours no annotation of the evaluation: this one neither reaches the pod nor changes its outcome
    await createEvaluation(env, { ...happy, metadata: { name: 'happy', annotations: { 'rlmesh.dev/test-exit-code': '3' } } });
    const done = await waitForPhase(env, 'happy', ['Succeeded', 'Failed']);
    expect(done.status).toMatchObject({ phase: 'Succeeded', reason: 'Completed', exitCode: 0, podName: 'rle-happy', nodeName: 'kwok-cpu-0' });
    expect(done.status!.startTime).toBeDefined();
    expect(done.status!.finishTime).toBeDefined();
    expect(done.status!.observedGeneration).toBe(1);
    expect(done.status!.artifacts).toMatchObject({ state: 'Ready', reason: 'Cached' });
    expect(done.status!.conditions!.map((c) => `${c.type}=${c.status}`).sort()).toEqual(['ArtifactsReady=True', 'Completed=True', 'Scheduled=True']);

    const pod = (await getPod(env, 'rle-happy'))!;
    const spec = pod.spec!;
    const c = spec.containers[0]!;
    expect(pod.metadata!.labels).toMatchObject({ 'rlmesh.dev/evaluation': 'happy', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-controller' });
    expect(pod.metadata!.annotations).toEqual({ 'rlmesh.dev/evaluation-id': 'ev_happy' });
    expect(pod.metadata!.ownerReferences![0]).toMatchObject({ kind: 'RLMeshEvaluation', name: 'happy', uid: done.metadata.uid, controller: true });
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.imagePullSecrets).toEqual([{ name: 'rlmesh-registry-pull' }]);
    expect(spec.activeDeadlineSeconds).toBe(120);
    expect(spec.securityContext!.runAsNonRoot).toBe(true);
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } });
    const envs = Object.fromEntries(c.env!.map((e) => [e.name, e.value]));
    // the proxy by its Service's ClusterIP: evaluation pods have no DNS
    const proxyIp = (await env.core.readNamespacedService({ name: 'rlmesh-egress-proxy', namespace: env.sys })).spec!.clusterIP;
    expect(envs).toMatchObject({
      HTTPS_PROXY: `http://${proxyIp}:3128`,
      HTTP_PROXY: `http://${proxyIp}:3128`,
      NO_PROXY: 'localhost,127.0.0.1,::1',
      SEED: '42',
      TEST_DURATION: '2s',
      TEST_EXIT_CODE: '0',
    });
    expect(c.volumeMounts).toEqual([{ name: 'artifact-cache', mountPath: '/artifacts/policy.pt', subPath: `sha256/${artifact.sha256}`, readOnly: true }]);
    expect(spec.volumes).toEqual([{ name: 'artifact-cache', persistentVolumeClaim: { claimName: 'rlmesh-artifact-cache', readOnly: true } }]);
    expect(spec.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms[0]!.matchFields).toEqual([
      { key: 'metadata.name', operator: 'In', values: ['kwok-cpu-0'] },
    ]);
    expect(spec.nodeName).toBe('kwok-cpu-0');
    // the namespace enforces restricted Pod Security, so the pod's existence proves it passed

    const events = await eventsFor(env, 'happy');
    const reasons = events.map((e) => e.reason);
    expect(reasons).toContain('PodCreated');
    expect(reasons).toContain('Completed');
    expect(events.find((e) => e.reason === 'Completed')!.type).toBe('Normal');
  });

  it('requests GPUs, and reports a failing exit code', async () => {
    await createEvaluation(
      env,
      evaluation('gpu-fail', { resources: { gpu: { count: 2, vendor: 'nvidia' } } }, { duration: '1s', exitCode: 3 }),
    );
    const done = await waitForPhase(env, 'gpu-fail', ['Succeeded', 'Failed']);
    expect(done.status).toMatchObject({ phase: 'Failed', reason: 'NonZeroExit', exitCode: 3, nodeName: 'kwok-gpu-0' });
    expect(done.status!.message).toContain('exited with code 3');
    const pod = (await getPod(env, 'rle-gpu-fail'))!;
    expect(pod.spec!.containers[0]!.resources!.limits).toMatchObject({ 'nvidia.com/gpu': '2' });
    const failed = (await eventsFor(env, 'gpu-fail')).find((e) => e.reason === 'NonZeroExit');
    expect(failed?.type).toBe('Warning');
  });

  it('stops an evaluation that outlives its deadline', async () => {
    await createEvaluation(env, evaluation('late', { deadlineSeconds: 2 }, { duration: '120s' }));
    await waitForPhase(env, 'late', ['Running']);
    const done = await waitForPhase(env, 'late', ['Failed', 'Succeeded'], 30_000);
    expect(done.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(done.status!.message).toContain('deadline of 2s');
    await until('the overdue pod to be stopped', async () => {
      const pod = await getPod(env, 'rle-late');
      return !pod || !!pod.metadata?.deletionTimestamp;
    });
    expect((await eventsFor(env, 'late')).some((e) => e.reason === 'DeadlineExceeded' && e.type === 'Warning')).toBe(true);
  });

  it('cancels: spec.cancelled stops the pod, and deleting an evaluation deletes its pod', async () => {
    await createEvaluation(env, evaluation('cancel-me', {}, { duration: '120s' }));
    await waitForPhase(env, 'cancel-me', ['Running']);
    await patchEvaluation('cancel-me', { spec: { cancelled: true } });
    const done = await waitForPhase(env, 'cancel-me', ['Cancelled']);
    expect(done.status!.reason).toBe('Cancelled');
    await until('the cancelled pod to go', async () => {
      const pod = await getPod(env, 'rle-cancel-me');
      return !pod || !!pod.metadata?.deletionTimestamp;
    });

    await createEvaluation(env, evaluation('delete-me', {}, { duration: '120s' }));
    await waitForPhase(env, 'delete-me', ['Running']);
    kubectl(['-n', env.runs, 'delete', 'rlmeshevaluation', 'delete-me', '--wait=true', '--timeout=30s']);
    await until('the deleted evaluation\'s pod to go', async () => {
      const pod = await getPod(env, 'rle-delete-me');
      return !pod || !!pod.metadata?.deletionTimestamp;
    });
  });

  it('garbage-collects a finished evaluation once the agent reported it, and only then', async () => {
    await createEvaluation(env, evaluation('collect', {}, { duration: '500ms' }));
    await waitForPhase(env, 'collect', ['Succeeded']);
    await sleep(3000); // longer than --gc-after-seconds=2: not reported, so kept
    expect(await getEvaluation(env, 'collect')).toBeDefined();
    await patchEvaluation('collect', { status: { reportedAt: new Date().toISOString() } }, true);
    await until('the reported evaluation to be collected', async () => (await getEvaluation(env, 'collect')) === undefined, { timeoutMs: 20_000 });
    await until('its pod to go with it', async () => {
      const pod = await getPod(env, 'rle-collect');
      return !pod || !!pod.metadata?.deletionTimestamp;
    });
  });
});

describe('Waiting, in the cluster\'s own words', () => {
  it('waits when no node has the GPUs, with the scheduler\'s message', async () => {
    await createEvaluation(env, evaluation('too-many-gpus', { resources: { gpu: { count: 16, vendor: 'nvidia' } } }));
    await createEvaluation(env, evaluation('amd-gpu', { resources: { gpu: { count: 1, vendor: 'amd' } } }));
    const nv = await waitForPhase(env, 'too-many-gpus', ['Waiting']);
    expect(nv.status!.reason).toBe('Unschedulable');
    expect(nv.status!.message).toMatch(/0\/\d+ nodes are available:.*Insufficient nvidia\.com\/gpu/);
    expect(nv.status!.conditions!.find((c) => c.type === 'Scheduled')).toMatchObject({ status: 'False', reason: 'Unschedulable' });
    const amd = await waitForPhase(env, 'amd-gpu', ['Waiting']);
    expect(amd.status!.message).toMatch(/Insufficient amd\.com\/gpu/);
    expect((await eventsFor(env, 'too-many-gpus')).some((e) => e.type === 'Warning' && e.reason === 'Unschedulable')).toBe(true);
    await patchEvaluation('too-many-gpus', { spec: { cancelled: true } });
    await patchEvaluation('amd-gpu', { spec: { cancelled: true } });
  });

  it('waits when a ResourceQuota refuses the pod, quoting the refusal, and starts once the quota allows it', async () => {
    apply([{ apiVersion: 'v1', kind: 'ResourceQuota', metadata: { name: 'gpus', namespace: env.runs }, spec: { hard: { 'requests.nvidia.com/gpu': '1' } } }]);
    await until('the quota controller to fill in status.used', () => {
      const used = kubectl(['-n', env.runs, 'get', 'resourcequota', 'gpus', '-o', 'jsonpath={.status.used}']).stdout;
      return used.includes('requests.nvidia.com/gpu') || undefined;
    });
    try {
      await createEvaluation(env, evaluation('over-quota', { resources: { gpu: { count: 2, vendor: 'nvidia' } } }, { duration: '500ms' }));
      const waiting = await waitForPhase(env, 'over-quota', ['Waiting']);
      expect(waiting.status!.reason).toBe('QuotaExceeded');
      expect(waiting.status!.message).toMatch(/forbidden: exceeded quota: gpus, requested: requests\.nvidia\.com\/gpu=2, used: requests\.nvidia\.com\/gpu=0, limited: requests\.nvidia\.com\/gpu=1/);
      expect(waiting.status!.conditions!.find((c) => c.type === 'Scheduled')).toMatchObject({ status: 'False', reason: 'QuotaExceeded' });
      const refusal = (await eventsFor(env, 'over-quota')).find((e) => e.reason === 'QuotaExceeded');
      expect(refusal?.type).toBe('Warning');
      expect(refusal?.message).toContain('exceeded quota');
      apply([{ apiVersion: 'v1', kind: 'ResourceQuota', metadata: { name: 'gpus', namespace: env.runs }, spec: { hard: { 'requests.nvidia.com/gpu': '4' } } }]);
      await waitForPhase(env, 'over-quota', ['Succeeded'], 60_000);
    } finally {
      kubectl(['-n', env.runs, 'delete', 'resourcequota', 'gpus', '--ignore-not-found']);
    }
  });
});

describe('node architecture', () => {
  const ARM = 'rlmesh-ctl-it-arm64-0';
  afterAll(() => deleteNodes(ARM));

  it('an evaluation steered to an arm64 node is never scheduled there: the pod requires linux/amd64', async () => {
    applyKwokNode(ARM, { arch: 'arm64' });
    // the assignment's nodeSelector names the arm64 node; the pod's platform affinity, ANDed with it, matches no node
    await createEvaluation(env, evaluation('on-arm64', { placement: { nodeSelector: { 'kubernetes.io/hostname': ARM } } }, { duration: '500ms' }));
    const stuck = await waitForPhase(env, 'on-arm64', ['Waiting']);
    expect(stuck.status!.reason).toBe('Unschedulable');
    expect(stuck.status!.message).toMatch(/didn't match Pod's node affinity\/selector/);
    const pod = (await getPod(env, 'rle-on-arm64'))!;
    expect(pod.spec!.nodeName).toBeUndefined();
    expect(pod.spec!.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms[0]!.matchExpressions).toEqual([
      { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
      { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
    ]);
    await patchEvaluation('on-arm64', { spec: { cancelled: true } });
  });
});

describe('RWO vs RWX placement', () => {
  const artifacts = () => [{ name: 'policy.pt', sha256: artifact.sha256, sizeBytes: artifact.data.length, source: { httpsUrl: server.url('/policy.pt') } }];
  const FIX = 'set storage.className to a ReadWriteMany StorageClass and artifactCache.storage.sharedPvc.accessModes=[ReadWriteMany]';

  it('fails at once, as CacheNodeCannotRun, what the ReadWriteOnce cache node (kwok-cpu-0: 16 cpu, no GPU) can never run; no pod is made', async () => {
    const cases = [
      { name: 'rwo-gpu', spec: { resources: { gpu: { count: 1, vendor: 'nvidia' as const } } }, lacks: 'no nvidia.com/gpu (1 asked)' },
      { name: 'rwo-cpu', spec: { resources: { cpu: '64' } }, lacks: 'cpu 64 asked, 16 allocatable' },
      { name: 'rwo-elsewhere', spec: { placement: { nodeSelector: { 'kubernetes.io/hostname': 'kwok-cpu-1' } } }, lacks: "label kubernetes.io/hostname is not kwok-cpu-1 (the platform's node selector)" },
    ];
    for (const c of cases) await createEvaluation(env, evaluation(c.name, { ...c.spec, artifacts: artifacts() }, { duration: '500ms' }));
    for (const c of cases) {
      const failed = await waitForPhase(env, c.name, ['Failed', 'Succeeded', 'Running']);
      expect(failed.status).toMatchObject({ phase: 'Failed', reason: 'CacheNodeCannotRun' });
      expect(failed.status!.message).toContain('runs only on node kwok-cpu-0, which holds the volume, and kwok-cpu-0 can never run this one: ');
      expect(failed.status!.message).toContain(c.lacks);
      expect(failed.status!.message).toContain(FIX);
      expect(failed.status!.conditions!.find((x) => x.type === 'Completed')).toMatchObject({ status: 'True', reason: 'CacheNodeCannotRun' });
      expect(await getPod(env, `rle-${c.name}`)).toBeUndefined();
      const event = (await eventsFor(env, c.name)).find((e) => e.reason === 'CacheNodeCannotRun');
      expect(event?.type).toBe('Warning');
    }
    // busy is not impossible: what fits kwok-cpu-0's allocatable runs there, and a GPU evaluation without artifacts is not pinned (gpu-fail above)
    await createEvaluation(env, evaluation('rwo-fits', { resources: { cpu: '2' }, artifacts: artifacts() }, { duration: '500ms' }));
    expect((await waitForPhase(env, 'rwo-fits', ['Succeeded', 'Failed'])).status).toMatchObject({ phase: 'Succeeded', nodeName: 'kwok-cpu-0' });
  });

  it('lets pods that mount a ReadWriteMany cache run anywhere', async () => {
    // an evaluation that waits: the reconciler's cache informer re-runs Waiting evaluations on a cache change,
    // so once it was reconciled again after the patch, the reconciler has seen ReadWriteMany
    await createEvaluation(env, evaluation('rwx-witness', { resources: { gpu: { count: 16, vendor: 'nvidia' } } }));
    await waitForPhase(env, 'rwx-witness', ['Waiting']);
    const reconciles = () => metric(reconciler, 'rlmesh_controller_reconciles_total{queue="evaluations"');
    const before = await reconciles();
    await env.custom.patchClusterCustomObject(
      { group: GROUP, version: VERSION, plural: 'rlmeshcaches', name: env.cacheName, body: { spec: { accessModes: ['ReadWriteMany'] } } },
      MERGE_PATCH,
    );
    await until('the reconciler to re-run the Waiting evaluation on the cache change', async () => (await reconciles()) > before);
    await patchEvaluation('rwx-witness', { spec: { cancelled: true } });
    const elsewhere = { artifacts: artifacts(), placement: { nodeSelector: { 'kubernetes.io/hostname': 'kwok-cpu-1' } } };
    await createEvaluation(env, evaluation('rwx-elsewhere', elsewhere, { duration: '500ms' }));
    const done = await waitForPhase(env, 'rwx-elsewhere', ['Succeeded', 'Failed']);
    expect(done.status).toMatchObject({ phase: 'Succeeded', nodeName: 'kwok-cpu-1' });
    // ReadWriteMany: no node pinned, only the runtime's platform required
    expect((await getPod(env, 'rle-rwx-elsewhere'))!.spec!.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms).toEqual([
      { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }, { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] }] },
    ]);
  });
});

describe('bad input', () => {
  it('is refused by the CRD schema with the field named', async () => {
    const refuse = async (name: string, spec: object): Promise<string> => {
      const err = await createEvaluation(env, evaluation(name, spec as never)).catch((e: unknown) => e);
      expect((err as { code?: number }).code, name).toBe(422);
      const body = (err as { body?: unknown }).body;
      return (typeof body === 'string' ? (JSON.parse(body) as { message: string }) : (body as { message: string })).message;
    };
    expect(await refuse('bad-vendor', { resources: { gpu: { count: 1, vendor: 'intel' } } })).toContain('spec.resources.gpu.vendor: Unsupported value: "intel"');
    expect(await refuse('bad-deadline', { deadlineSeconds: -5 })).toContain('spec.deadlineSeconds: Invalid value: -5');
    expect(await refuse('no-digest', { artifacts: [{ name: 'a', sizeBytes: 1, source: { httpsUrl: 'https://x/y' } }] })).toContain('spec.artifacts[0].sha256: Required value');
    expect(await refuse('bad-digest', { artifacts: [{ name: 'a', sha256: 'XYZ', sizeBytes: 1, source: { httpsUrl: 'https://x/y' } }] })).toContain('spec.artifacts[0].sha256');
    expect(await refuse('two-sources', { artifacts: [{ name: 'a', sha256: 'a'.repeat(64), sizeBytes: 1, source: { httpsUrl: 'https://x/y', s3: { bucket: 'b', key: 'k' } } }] })).toContain(
      'set exactly one of httpsUrlSecretRef and s3',
    );
  });

  it('fails an evaluation whose artifact is larger than the whole cache', async () => {
    await env.custom.patchClusterCustomObject(
      { group: GROUP, version: VERSION, plural: 'rlmeshcaches', name: env.cacheName, body: { spec: { capacityBytes: 10 * 1024 * 1024 } } },
      MERGE_PATCH,
    );
    await until('the filler to take the new capacity', async () => (await getCache(env))?.status?.capacityBytes === 10 * 1024 * 1024);
    await createEvaluation(
      env,
      evaluation('huge', { artifacts: [{ name: 'huge.bin', sha256: 'd'.repeat(64), sizeBytes: 50 * 1024 * 1024, source: { httpsUrl: server.url('/huge') } }] }),
    );
    const failed = await waitForPhase(env, 'huge', ['Failed']);
    expect(failed.status!.reason).toBe('TooLarge');
    expect(failed.status!.message).toContain('larger than the whole artifact cache');
    expect(server.requests.get('/huge')).toBeUndefined();
  });
});
