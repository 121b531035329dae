// Assignments become RLMeshEvaluations (S3 credentials in the evaluation's entry of the
// artifact-sources Secrets, removed once it has finished, not in the object, and never in the
// control plane's database files); their status streams back with rising sequences; a
// cancellation sets spec.cancelled.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { api } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { newCluster, runtimeConfig, RUNS, secret } from './harness.ts';
import { sourcesSecretFor, type SourcesEntry } from '../../agent/artifact-sources.ts';
import { agentSuite } from './suite.ts';

type Ev = { id: string; phase: string; result: { exitCode?: number } | null; updates: { phase: string; sequence: number }[] };

describe('agent evaluations', () => {
  const suite = agentSuite({ joinToken: true });

  it('turns an assignment into an RLMeshEvaluation, streams its status back and applies a cancellation', async () => {
    const { clusterId, joinToken } = await newCluster(suite.cp, 'evaluations');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp), token: joinToken });
    await agent.waitFor('connected', /session connected/);

    const submitted = await api<{ id: string }>(suite.cp, 'POST', `/v1/clusters/${clusterId}/evaluations`, {
      image: 'registry.rlmesh.dev/evals/math:1',
      command: ['python', 'eval.py'],
      env: { SEED: '7' },
      cpu: '2',
      memory: '4Gi',
      gpuCount: 1,
      gpuVendor: 'nvidia',
      deadlineSeconds: 600,
      artifacts: [
        { name: 'weights.bin', sha256: 'a'.repeat(64), sizeBytes: 1024, source: { s3: { bucket: 'models', key: 'w.bin', region: 'eu-west-1', accessKeyId: 'AKIATEST', secretAccessKey: 'sekrit-value', sessionToken: 'sekrit-session-token' } } },
        { name: 'tokenizer.json', sha256: 'b'.repeat(64), sizeBytes: 64, source: { httpsUrl: 'https://inputs.example/tok.json?X-Amz-Signature=sekrit-url-signature' } },
      ],
    });
    expect(submitted.status).toBe(201);
    const id = submitted.body.id;

    const obj = await until('RLMeshEvaluation created', () => {
      const r = kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', id, '-o', 'json'], { allowFail: true });
      return r.status === 0 ? (JSON.parse(r.stdout) as { metadata: { uid: string }; spec: Record<string, unknown> }) : undefined;
    }, { timeoutMs: 20_000 });
    expect(obj.spec).toMatchObject({
      evaluationId: id,
      image: 'registry.rlmesh.dev/evals/math:1',
      command: ['python', 'eval.py'],
      env: [{ name: 'SEED', value: '7' }],
      resources: { cpu: '2', memory: '4Gi', gpu: { count: 1, vendor: 'nvidia' } },
      deadlineSeconds: 600,
      cancelled: false,
      artifacts: [
        { name: 'weights.bin', source: { s3: { bucket: 'models', key: 'w.bin', credentialsSecretRef: { name: `${id}-sources` } } } },
        { name: 'tokenizer.json', source: { httpsUrlSecretRef: { name: `${id}-sources`, key: 'url.tokenizer.json' } } },
      ],
    });
    // the credentials (S3 keys, the presigned URL) are in the evaluation's entry of an artifact-sources Secret, not in the evaluation
    expect(JSON.stringify(obj)).not.toContain('sekrit');
    const shard = sourcesSecretFor(`${id}-sources`);
    const entry = () => {
      const value = secret(RUNS, shard)?.data?.[`${id}-sources`];
      return value === undefined ? undefined : (JSON.parse(Buffer.from(value, 'base64').toString('utf8')) as SourcesEntry);
    };
    expect(entry()?.data).toEqual({
      accessKeyId: 'AKIATEST',
      secretAccessKey: 'sekrit-value',
      sessionToken: 'sekrit-session-token',
      'url.tokenizer.json': 'https://inputs.example/tok.json?X-Amz-Signature=sekrit-url-signature',
    });
    expect(secret(RUNS, shard)?.type).toBe('Opaque');
    // ... while the control plane's database files never held either (sealed apart, key in its own file)
    const dbFiles = readdirSync(suite.cp.dataDir).filter((f) => f.startsWith('controlplane.db'));
    expect(dbFiles).toContain('controlplane.db');
    for (const f of dbFiles) {
      const bytes = readFileSync(join(suite.cp.dataDir, f)).toString('latin1');
      expect(bytes, f).not.toContain('sekrit-value');
      expect(bytes, f).not.toContain('sekrit-session-token');
      expect(bytes, f).not.toContain('sekrit-url-signature');
    }

    // the agent reports the accepted evaluation, then each phase the controller writes
    const ev = async () => (await api<Ev>(suite.cp, 'GET', `/v1/evaluations/${id}`)).body;
    await until('Pending reported', async () => ((await ev()).phase === 'Pending' ? true : undefined), { timeoutMs: 15_000 });
    kubectl(['-n', RUNS, 'patch', 'rlmeshevaluation', id, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status: { phase: 'Running', podName: `${id}-pod`, nodeName: 'kwok-gpu-0' } })]);
    await until('Running reported', async () => ((await ev()).phase === 'Running' ? true : undefined), { timeoutMs: 15_000 });
    kubectl(['-n', RUNS, 'patch', 'rlmeshevaluation', id, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status: { phase: 'Succeeded', exitCode: 0, reason: 'Completed' } })]);
    const done = await until('Succeeded reported', async () => {
      const e = await ev();
      return e.phase === 'Succeeded' ? e : undefined;
    }, { timeoutMs: 15_000 });
    expect(done.result?.exitCode).toBe(0);
    // finished, it needs its credentials no more: the agent removes its entry
    await until('the finished evaluation\'s credentials removed', () => (entry() === undefined ? true : undefined), { timeoutMs: 20_000 });
    expect(done.updates.map((u) => u.phase)).toEqual(['Pending', 'Running', 'Succeeded']);
    const seqs = done.updates.map((u) => Number(u.sequence));
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    expect(new Set(seqs).size).toBe(3);

    // a cancellation: spec.cancelled is set for the controller to stop the pod
    const second = await api<{ id: string }>(suite.cp, 'POST', `/v1/clusters/${clusterId}/evaluations`, { image: 'registry.rlmesh.dev/evals/math:1', deadlineSeconds: 60 });
    await until('second created', () => (kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', second.body.id], { allowFail: true }).status === 0 ? true : undefined), { timeoutMs: 20_000 });
    expect((await api(suite.cp, 'POST', `/v1/evaluations/${second.body.id}/cancel`, { reason: 'user asked' })).status).toBe(200);
    await until('spec.cancelled set', () => (kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', second.body.id, '-o', 'jsonpath={.spec.cancelled}']).stdout === 'true' ? true : undefined), { timeoutMs: 20_000 });

    // once the control plane holds the finished evaluation, the agent marks it reported (the controller then
    // garbage-collects it); needs `patch` on rlmeshevaluations/status in the chart's agent Role
    await until('status.reportedAt set', () => (kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', id, '-o', 'jsonpath={.status.reportedAt}']).stdout ? true : undefined), { timeoutMs: 20_000 });

    // an image from a registry this cluster does not run: refused before any object exists, and reported with the fix
    const foreign = await api<{ id: string }>(suite.cp, 'POST', `/v1/clusters/${clusterId}/evaluations`, { image: 'busybox', deadlineSeconds: 60 });
    const refused = await until('the refusal reported', async () => {
      const e = (await api<Ev & { message?: string; reason?: string }>(suite.cp, 'GET', `/v1/evaluations/${foreign.body.id}`)).body;
      return e.phase === 'Failed' ? e : undefined;
    }, { timeoutMs: 20_000 });
    expect(JSON.stringify(refused)).toContain('ImageNotAllowed');
    expect(JSON.stringify(refused)).toContain('image busybox is the repository docker.io/library/busybox, and this cluster runs evaluation images only from under registry.rlmesh.dev/');
    expect(kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', foreign.body.id], { allowFail: true }).status).not.toBe(0);
    await agent.stop();
  });
});
