import { create } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { evaluationSpecSchema } from '../lib/crds/types.ts';
import { AssignmentSchema } from '../lib/gen/rlmesh/v1/session_pb.ts';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { clusterPlacementSchema } from '../lib/evaluation-placement.ts';
import { ArtifactSources } from './artifact-sources.ts';
import { Assignments, evaluationFromAssignment, evaluationName, secretEnvProblem } from './assignments.ts';
import { fingerprint, trimEvaluation } from './evaluation-updates.ts';

describe('assignment → RLMeshEvaluation', () => {
  it('uses a valid id as the name and hashes anything else into a stable valid name', () => {
    expect(evaluationName('ev-abc123')).toBe('ev-abc123');
    const odd = evaluationName('Eval_42/Weird');
    expect(odd).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(odd).toBe(evaluationName('Eval_42/Weird'));
    expect(odd).not.toBe(evaluationName('Eval_42/Weirder'));
    expect(evaluationName('x'.repeat(300)).length).toBeLessThanOrEqual(63);
  });

  it('mirrors the assignment into a spec the CRD schema accepts, keeping S3 secrets out of it', () => {
    const a = create(AssignmentSchema, {
      evaluationId: 'ev-1',
      image: 'img:1',
      command: ['run'],
      env: { A: '1' },
      cpu: '500m',
      memory: '1Gi',
      gpuCount: 2,
      gpuVendor: 'amd',
      deadlineSeconds: 30n,
      nodeSelector: { pool: 'gpu' },
      artifacts: [
        { name: 'a.bin', sha256: 'b'.repeat(64), sizeBytes: 5n, source: { source: { case: 's3', value: { bucket: 'bk', key: 'k', accessKeyId: 'AK', secretAccessKey: 'SK' } } } },
        { name: 'b.bin', sha256: 'c'.repeat(64), sizeBytes: 6n, source: { source: { case: 'httpsUrl', value: 'https://x/y' } } },
      ],
    });
    const { evaluation, sources } = evaluationFromAssignment(a, 'docker.io/library/img:1', 'rlmesh-runs');
    expect(evaluation.metadata).toMatchObject({ name: 'ev-1', namespace: 'rlmesh-runs' });
    expect(evaluationSpecSchema.parse(evaluation.spec)).toMatchObject({
      evaluationId: 'ev-1',
      image: 'docker.io/library/img:1',
      resources: { cpu: '500m', memory: '1Gi', gpu: { count: 2, vendor: 'amd' } },
      deadlineSeconds: 30,
      placement: { nodeSelector: { pool: 'gpu' } },
      env: [{ name: 'A', value: '1' }],
    });
    expect(evaluation.spec.artifacts?.[0]?.source.s3?.credentialsSecretRef).toEqual({ name: 'ev-1-sources' });
    expect(evaluation.spec.artifacts?.[1]?.source.httpsUrlSecretRef).toEqual({ name: 'ev-1-sources', key: 'url.b.bin' });
    // a presigned URL is a credential: neither it nor the S3 secret key is in the evaluation
    expect(JSON.stringify(evaluation)).not.toContain('SK');
    expect(JSON.stringify(evaluation)).not.toContain('https://x/y');
    expect(sources).toEqual({ accessKeyId: 'AK', secretAccessKey: 'SK', 'url.b.bin': 'https://x/y' });
  });

  it('keeps secret environment values out of the spec: only their names and the evaluation\'s own Secret are in it', () => {
    const a = create(AssignmentSchema, { evaluationId: 'ev-3', image: 'img:1', env: { SEED: '7' }, secretEnv: { API_KEY: 'sekrit-api-key', 'hf.token': 'sekrit-hf' } });
    const { evaluation, secretEnv, sources } = evaluationFromAssignment(a, 'docker.io/library/img:1', 'rlmesh-runs');
    expect(evaluationSpecSchema.parse(evaluation.spec)).toMatchObject({
      env: [{ name: 'SEED', value: '7' }],
      secretEnv: { secretName: 'ev-3-env', names: ['API_KEY', 'hf.token'] },
    });
    expect(JSON.stringify(evaluation)).not.toContain('sekrit');
    expect(secretEnv).toEqual({ API_KEY: 'sekrit-api-key', 'hf.token': 'sekrit-hf' });
    expect(sources).toEqual({});
    expect(evaluationFromAssignment(create(AssignmentSchema, { evaluationId: 'ev-4', image: 'i' }), 'docker.io/library/i', 'r').evaluation.spec).not.toHaveProperty('secretEnv');
  });

  it('names what is wrong with a secret environment the cluster cannot set', () => {
    expect(secretEnvProblem({ env: {}, secretEnv: { API_KEY: 'x' } })).toBeUndefined();
    expect(secretEnvProblem({ env: {}, secretEnv: { '1BAD': 'x' } })).toMatch(/"1BAD" is not a name the cluster can hold as a Secret key/);
    expect(secretEnvProblem({ env: {}, secretEnv: { 'A B': 'x' } })).toMatch(/not a name the cluster can hold/);
    expect(secretEnvProblem({ env: { TOKEN: 'y' }, secretEnv: { TOKEN: 'x' } })).toMatch(/TOKEN is both in env and in secretEnv/);
    for (const name of ['HTTPS_PROXY', 'no_proxy', 'RLMESH_EVALUATION_ID']) expect(secretEnvProblem({ env: {}, secretEnv: { [name]: 'x' } })).toMatch(/is set by the cluster/);
  });

  it('gives a deadline to an assignment without one', () => {
    const { evaluation } = evaluationFromAssignment(create(AssignmentSchema, { evaluationId: 'ev-2', image: 'i' }), 'docker.io/library/i', 'r');
    expect(evaluation.spec.deadlineSeconds).toBe(86_400);
  });
});

describe("the chart's commonLabels on what an assignment creates", () => {
  const common = { team: 'ml', 'app.kubernetes.io/managed-by': 'spoofed' };
  const own = { team: 'ml', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent' };

  it('the RLMeshEvaluation and the artifact-sources Secret it first writes carry them beneath their own labels', async () => {
    const created: { kind: string; labels: Record<string, string> | undefined }[] = [];
    const custom = {
      createNamespacedCustomObject: async ({ body }: { body: { metadata: { labels?: Record<string, string> } } }) => {
        created.push({ kind: 'RLMeshEvaluation', labels: body.metadata.labels });
        return { ...body, metadata: { ...body.metadata, uid: 'uid-1' } };
      },
    };
    const core = {
      patchNamespacedSecret: async () => {
        throw Object.assign(new Error('HTTP 404'), { code: 404 });
      },
      createNamespacedSecret: async ({ body }: { body: k8s.V1Secret }) => void created.push({ kind: 'Secret', labels: body.metadata?.labels }),
    };
    const kc = { makeApiClient: (api: unknown) => (api === k8s.CoreV1Api ? core : custom) } as unknown as k8s.KubeConfig;
    const log = pino({ level: 'silent' });
    const sources = new ArtifactSources({ core: core as unknown as k8s.CoreV1Api, namespace: 'rlmesh-runs', commonLabels: common, log });
    const a = new Assignments({ kc, namespace: 'rlmesh-runs', imageRegistries: ['registry.rlmesh.dev'], commonLabels: common, log, onOutcome: () => undefined, sources });
    await a.assign(create(AssignmentSchema, { evaluationId: 'ev-1', image: 'registry.rlmesh.dev/env/x:1', artifacts: [{ name: 'a.bin', sha256: 'b'.repeat(64), sizeBytes: 1n, source: { source: { case: 'httpsUrl', value: 'https://x/y' } } }] }));
    expect(created).toEqual([{ kind: 'Secret', labels: { ...own, 'app.kubernetes.io/component': 'rlmesh-artifact-sources' } }, { kind: 'RLMeshEvaluation', labels: own }]);
  });

  it('without them, only its own', () => {
    const { evaluation } = evaluationFromAssignment(create(AssignmentSchema, { evaluationId: 'ev-2', image: 'i' }), 'docker.io/library/i', 'r');
    expect(evaluation.metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent' });
  });
});

describe('evaluation status → update', () => {
  it('reports an untouched evaluation as Pending/Accepted and changes the fingerprint only when the status changes', () => {
    const fresh = trimEvaluation({ metadata: { name: 'ev-1', namespace: 'r' }, spec: { evaluationId: 'ev-1' } });
    expect(fresh.status).toMatchObject({ phase: 'Pending', reason: 'Accepted' });
    const running = trimEvaluation({ metadata: { name: 'ev-1', namespace: 'r' }, spec: { evaluationId: 'ev-1' }, status: { phase: 'Running', podName: 'p', nodeName: 'n', conditions: [] } });
    expect(fingerprint(running.status!)).not.toBe(fingerprint(fresh.status!));
    const sameAgain = trimEvaluation({ metadata: { name: 'ev-1', namespace: 'r' }, spec: { evaluationId: 'ev-1' }, status: { phase: 'Running', podName: 'p', nodeName: 'n', observedGeneration: 3 } });
    expect(fingerprint(sameAgain.status!)).toBe(fingerprint(running.status!));
    const done = trimEvaluation({ metadata: { name: 'ev-1', namespace: 'r' }, spec: { evaluationId: 'ev-1' }, status: { phase: 'Failed', exitCode: 3, podName: 'p', nodeName: 'n' } });
    expect(done.status).toMatchObject({ phase: 'Failed', exitCode: 3 });
  });
});

describe('an assignment against the operator\'s policy for evaluation pods', () => {
  // an API server nobody answers at: a refused assignment never reaches it
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({ clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
  const assignments = (outcomes: unknown[][]) =>
    new Assignments({
      kc,
      namespace: 'rlmesh-runs',
      imageRegistries: ['registry.rlmesh.dev'],
      placement: clusterPlacementSchema.parse({ nodeSelector: { pool: 'evals' } }),
      log: pino({ level: 'silent' }),
      onOutcome: (...o) => outcomes.push(o),
      sources: new ArtifactSources({ core: kc.makeApiClient(k8s.CoreV1Api), namespace: 'rlmesh-runs', log: pino({ level: 'silent' }) }),
    });

  it('is refused as PlacementConflict, naming the key, both values and the chart value, before anything is created', async () => {
    const outcomes: unknown[][] = [];
    await assignments(outcomes).assign(create(AssignmentSchema, { evaluationId: 'ev-9', image: 'registry.rlmesh.dev/env/x:1', nodeSelector: { pool: 'train' } }));
    expect(outcomes).toEqual([['ev-9', 'Failed', 'PlacementConflict', expect.stringMatching(/pool=train.*pool=evals.*evaluations\.nodeSelector\.pool/)]]);
  });

  it('a secret environment the cluster cannot set is refused as InvalidSecretEnv before anything is created, naming no value', async () => {
    const outcomes: unknown[][] = [];
    await assignments(outcomes).assign(create(AssignmentSchema, { evaluationId: 'ev-11', image: 'registry.rlmesh.dev/env/x:1', nodeSelector: { pool: 'evals' }, env: { K: 'a' }, secretEnv: { K: 'sekrit' } }));
    expect(outcomes).toEqual([['ev-11', 'Failed', 'InvalidSecretEnv', expect.stringMatching(/K is both in env and in secretEnv/)]]);
    expect(JSON.stringify(outcomes)).not.toContain('sekrit');
  });

  it('an image refusal comes first, as before', async () => {
    const outcomes: unknown[][] = [];
    await assignments(outcomes).assign(create(AssignmentSchema, { evaluationId: 'ev-10', image: 'docker.io/library/busybox', nodeSelector: { pool: 'train' } }));
    expect(outcomes[0]?.[2]).toBe('ImageNotAllowed');
  });
});

describe('an assignment while the cluster drains', () => {
  const drainedBy = { reason: 'OperatorDrain' as const, message: 'refused: drained' };
  function cluster(existing: string[]) {
    const created: string[] = [];
    const custom = {
      getNamespacedCustomObject: async ({ name }: { name: string }) => {
        if (!existing.includes(name)) throw new k8s.ApiException(404, 'not found', {}, {});
        return { metadata: { name, uid: 'uid-1' } };
      },
      createNamespacedCustomObject: async ({ body }: { body: { metadata: { name: string } } }) => {
        if (existing.includes(body.metadata.name)) throw new k8s.ApiException(409, 'exists', {}, {});
        created.push(body.metadata.name);
        return { ...body, metadata: { ...body.metadata, uid: 'uid-2' } };
      },
    };
    const kc = { makeApiClient: () => custom } as unknown as k8s.KubeConfig;
    const outcomes: unknown[][] = [];
    const log = pino({ level: 'silent' });
    // the assignments here carry no artifacts: nothing is written to the artifact-sources Secrets
    const sources = new ArtifactSources({ core: {} as k8s.CoreV1Api, namespace: 'rlmesh-runs', log });
    const assignments = new Assignments({ kc, namespace: 'rlmesh-runs', imageRegistries: ['registry.rlmesh.dev'], log, onOutcome: (...o) => outcomes.push(o), sources });
    return { assignments, created, outcomes };
  }

  it('a new one is refused and reported with the drain\'s reason, before anything is created', async () => {
    const { assignments, created, outcomes } = cluster([]);
    await assignments.assign(create(AssignmentSchema, { evaluationId: 'ev-new', image: 'registry.rlmesh.dev/env/x:1' }), () => drainedBy);
    expect(outcomes).toEqual([['ev-new', 'Failed', 'OperatorDrain', 'refused: drained']]);
    expect(created).toEqual([]);
  });

  it('a redelivery of one accepted before the drain goes on (it runs to its end), and nothing is reported against it', async () => {
    const { assignments, created, outcomes } = cluster(['ev-held']);
    await assignments.assign(create(AssignmentSchema, { evaluationId: 'ev-held', image: 'registry.rlmesh.dev/env/x:1' }), () => drainedBy);
    expect(outcomes).toEqual([]);
    expect(created).toEqual([]);
  });

  it('not drained: created as before', async () => {
    const { assignments, created, outcomes } = cluster([]);
    await assignments.assign(create(AssignmentSchema, { evaluationId: 'ev-ok', image: 'registry.rlmesh.dev/env/x:1' }), () => undefined);
    expect(outcomes).toEqual([]);
    expect(created).toEqual(['ev-ok']);
  });
});
