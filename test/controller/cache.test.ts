// The shared artifact cache on the real local cluster: the cache filler runs
// as its own ServiceAccount, fills a local directory standing in for the PVC
// from a real HTTPS server and a real S3-compatible server (versitygw) on
// loopback, and the reconciler runs the evaluations once their artifacts are in.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, VERSION } from '../../lib/crds/types.ts';
import { MERGE_PATCH } from '../../lib/kube-errors.ts';
import { blob, startArtifactServer, type ArtifactServer } from './artifact-server.ts';
import { metric, createEvaluation, writeSources, evaluation, eventsFor, getCache, setupEnv, startController, waitForPhase, type ControllerProcess, type Env } from './harness.ts';
import { until } from '../support/until.ts';
import { startS3Server, type S3Server } from './s3-server.ts';

let env: Env;
let server: ArtifactServer;
let s3: S3Server;
let reconciler: ControllerProcess;
let filler: ControllerProcess;
let cacheDir: string;

const fillerArgs = () => [
  `--cache-dir=${cacheDir}`,
  '--node-name=kwok-cpu-0',
  '--identity=filler-1',
  '--fetch-attempts=3',
  '--fetch-retry-ms=100',
  '--secret-grace-seconds=5',
  `--chunk-bytes=${1024 * 1024}`,
  `--ranged-threshold-bytes=${2 * 1024 * 1024}`,
];
// the filler trusts both test servers' CAs (the HTTPS artifact server's and the S3 server's)
const startFiller = () => startController(env, 'cache-filler', fillerArgs(), { NODE_EXTRA_CA_CERTS: caBundle });
let caBundle = '';
const https = (name: string, b: { data: Buffer; sha256: string }, path: string) => ({
  name,
  sha256: b.sha256,
  sizeBytes: b.data.length,
  source: { httpsUrl: server.url(path) },
});

beforeAll(async () => {
  env = await setupEnv();
  cacheDir = join(env.dir, 'cache');
  server = await startArtifactServer();
  s3 = await startS3Server({ tls: { hosts: ['localhost'] } });
  caBundle = join(env.dir, 'ca-bundle.pem');
  writeFileSync(caBundle, `${readFileSync(server.caFile, 'utf8').trim()}\n${s3.ca!.trim()}\n`);
  reconciler = await startController(env, 'reconciler');
  filler = await startFiller();
  await until('the cache status', async () => (await getCache(env))?.status?.phase === 'Ready');
}, 300_000);

afterAll(async () => {
  await reconciler?.stop();
  await filler?.stop();
  await server?.close();
  await s3?.close();
  await env?.cleanup();
});

describe('cache fill', () => {
  it('downloads an artifact once for 50 evaluations that want it at the same time', async () => {
    const b = blob(2 * 1024 * 1024 - 1);
    server.put('/shared.bin', b.data);
    server.throttle('/shared.bin', 5); // slow enough that all 50 ask while it downloads
    await Promise.all(Array.from({ length: 50 }, (_, i) => createEvaluation(env, evaluation(`shared-${i}`, { artifacts: [https('shared.bin', b, '/shared.bin')] }, { duration: '200ms' }))));
    for (let i = 0; i < 50; i++) await waitForPhase(env, `shared-${i}`, ['Succeeded'], 120_000);
    expect(server.requests.get('/shared.bin')).toBe(1);
    expect(await metric(filler, 'rlmesh_controller_cache_fetches_total{source="https",outcome="ok"}')).toBe(1);
    expect(readFileSync(join(cacheDir, 'sha256', b.sha256)).equals(b.data)).toBe(true);
    const cache = await until('cache status to count the requests', async () => {
      const c = await getCache(env);
      return (c?.status?.hits ?? 0) + (c?.status?.misses ?? 0) >= 50 ? c : false;
    });
    expect(cache.status!.entries).toBeGreaterThanOrEqual(1);
    expect(cache.status!.usedBytes).toBeGreaterThanOrEqual(b.data.length);
    expect(cache.status!.hitRatio).toMatch(/^\d\.\d\d$/);
  });

  it('fills from S3 with the temporary credentials of its entry in the sources directory, which may come after the evaluation, never logging them', async () => {
    const b = blob(3 * 1024 * 1024 + 5); // above the ranged threshold: parallel ranged GETs
    await s3.put('rl-artifacts', 'models/policy.pt', b.data);
    const source = { s3: { endpoint: s3.endpoint, region: 'us-east-1', bucket: 'rl-artifacts', key: 'models/policy.pt', credentialsSecretRef: { name: 's3eval-sources' } } };
    // the kubelet projects the agent's entry some time after the evaluation exists: the filler waits for it
    await createEvaluation(env, evaluation('s3eval', { artifacts: [{ name: 'policy.pt', sha256: b.sha256, sizeBytes: b.data.length, source }] }, { duration: '200ms' }));
    await until('the filler to find the credentials missing', () => readFileSync(filler.logFile, 'utf8').includes('the credentials s3eval-sources for artifact policy.pt are not in'));
    writeSources(env, 's3eval-sources', { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey });
    const done = await waitForPhase(env, 's3eval', ['Succeeded', 'Failed']);
    expect(done.status!.phase).toBe('Succeeded');
    expect(readFileSync(join(cacheDir, 'sha256', b.sha256)).equals(b.data)).toBe(true);
    expect(await metric(filler, 'rlmesh_controller_cache_fetches_total{source="s3",outcome="ok"}')).toBe(1);
    expect(readFileSync(filler.logFile, 'utf8')).not.toContain(s3.secretAccessKey);

    // wrong credentials: retried, then failed with S3's own error
    writeSources(env, 's3bad-sources', { accessKeyId: s3.accessKeyId, secretAccessKey: 'wrong-secret' });
    const other = blob(1000);
    await s3.put('rl-artifacts', 'other.bin', other.data);
    const bad = { s3: { ...source.s3, key: 'other.bin', credentialsSecretRef: { name: 's3bad-sources' } } };
    await createEvaluation(env, evaluation('s3bad', { artifacts: [{ name: 'other.bin', sha256: other.sha256, sizeBytes: 1000, source: bad }] }));
    const failed = await waitForPhase(env, 's3bad', ['Failed', 'Succeeded']);
    expect(failed.status).toMatchObject({ phase: 'Failed', reason: 'SourceUnreachable' });
    expect(failed.status!.message).toMatch(/s3:\/\/rl-artifacts\/other\.bin .*after 3 attempts: SignatureDoesNotMatch \(HTTP 403\)/);
    expect(readFileSync(filler.logFile, 'utf8')).not.toContain('wrong-secret');

    // no entry at all, and a name that would leave the directory: neither is read
    for (const [name, ref] of [['s3nosecret', 'never-written'], ['s3escape', '../config.json']] as const) {
      const missing = { s3: { ...source.s3, credentialsSecretRef: { name: ref } } };
      await createEvaluation(env, evaluation(name, { artifacts: [{ name: 'x.bin', sha256: 'e'.repeat(64), sizeBytes: 10, source: missing }] }));
      const nosecret = await waitForPhase(env, name, ['Failed']);
      expect(nosecret.status!.reason).toBe('CredentialsMissing');
      expect(nosecret.status!.message).toContain(`the credentials entry ${ref} (artifact-sources Secrets in ${env.runs})`);
    }
  });

  it('fails an evaluation whose artifact does not match its digest, naming both, and publishes nothing', async () => {
    const expected = blob(5000);
    const served = blob(5000);
    server.put('/tampered.bin', served.data);
    await createEvaluation(env, evaluation('mismatch', { artifacts: [https('tampered.bin', expected, '/tampered.bin')] }));
    const failed = await waitForPhase(env, 'mismatch', ['Failed', 'Succeeded']);
    expect(failed.status).toMatchObject({ phase: 'Failed', reason: 'DigestMismatch' });
    expect(failed.status!.message).toContain(`expected sha256 ${expected.sha256}, got ${served.sha256}`);
    expect(failed.status!.message).not.toContain('secret-signature');
    expect(failed.status!.podName).toBeUndefined();
    expect(existsSync(join(cacheDir, 'sha256', expected.sha256))).toBe(false);
    expect(existsSync(join(cacheDir, 'sha256', served.sha256))).toBe(false);
    expect(readdirSync(join(cacheDir, 'tmp'))).toEqual([]);
    expect((await eventsFor(env, 'mismatch')).some((e) => e.type === 'Warning' && e.reason === 'DigestMismatch')).toBe(true);
  });

  it('fails with the source\'s error after retrying an unreachable source', async () => {
    const b = blob(100);
    await createEvaluation(env, evaluation('unreachable', { artifacts: [{ name: 'x', sha256: b.sha256, sizeBytes: 100, source: { httpsUrl: 'https://127.0.0.1:1/gone.bin' } }] }));
    const failed = await waitForPhase(env, 'unreachable', ['Failed']);
    expect(failed.status!.reason).toBe('SourceUnreachable');
    expect(failed.status!.message).toMatch(/https:\/\/127\.0\.0\.1:1\/gone\.bin after 3 attempts: .*ECONNREFUSED/);
  });

  it('a kill -9 mid-fetch leaves no partial artifact visible, and the restarted filler resumes', async () => {
    const b = blob(8 * 1024 * 1024);
    server.put('/big.bin', b.data);
    server.throttle('/big.bin', 50);
    await createEvaluation(env, evaluation('resume', { artifacts: [https('big.bin', b, '/big.bin')] }, { duration: '200ms' }));
    const journal = join(cacheDir, 'tmp', `${b.sha256}.chunks`);
    await until('some ranges to be written', async () => existsSync(journal) && readFileSync(journal, 'utf8').trim().split('\n').length >= 2, { timeoutMs: 60_000, intervalMs: 50 });
    await filler.kill9();
    const written = readFileSync(journal, 'utf8').trim().split('\n').length;
    const before = server.requests.get('/big.bin') ?? 0;
    expect(existsSync(join(cacheDir, 'sha256', b.sha256))).toBe(false);
    expect(existsSync(join(cacheDir, 'tmp', `${b.sha256}.partial`))).toBe(true);
    await sleep(500);
    // still not visible, and the evaluation has not run
    expect(existsSync(join(cacheDir, 'sha256', b.sha256))).toBe(false);
    server.throttle('/big.bin', 0);
    filler = await startFiller();
    const done = await waitForPhase(env, 'resume', ['Succeeded', 'Failed'], 120_000);
    expect(done.status!.phase).toBe('Succeeded');
    expect(readFileSync(join(cacheDir, 'sha256', b.sha256)).equals(b.data)).toBe(true);
    // only the ranges the journal did not list were fetched again
    expect((server.requests.get('/big.bin') ?? 0) - before).toBe(8 - written);
    expect(readdirSync(join(cacheDir, 'tmp'))).toEqual([]);
  });
});

describe('eviction', () => {
  it('evicts least recently used artifacts above the high-water mark, never one an unfinished evaluation uses', async () => {
    // start from an empty cache with small bounds: 1,000,000 bytes, evict above 90% down to 50%
    for (const f of readdirSync(join(cacheDir, 'sha256'))) await import('node:fs/promises').then((fs) => fs.rm(join(cacheDir, 'sha256', f), { force: true }));
    await env.custom.patchClusterCustomObject(
      { group: GROUP, version: VERSION, plural: 'rlmeshcaches', name: env.cacheName, body: { spec: { capacityBytes: 1_000_000, highWaterMarkPercent: 90, lowWaterMarkPercent: 50 } } },
      MERGE_PATCH,
    );
    await until('the filler to take the new capacity', async () => (await getCache(env))?.status?.capacityBytes === 1_000_000);
    const [a, b, c, d] = [blob(400_000), blob(300_000), blob(300_000), blob(300_000)];
    for (const [p, x] of [['/a', a], ['/b', b], ['/c', c], ['/d', d]] as const) server.put(p, x.data);
    const has = (x: { sha256: string }) => existsSync(join(cacheDir, 'sha256', x.sha256));

    await createEvaluation(env, evaluation('uses-a', { artifacts: [https('a', a, '/a')] }, { duration: '300s' }));
    await waitForPhase(env, 'uses-a', ['Running']);
    await createEvaluation(env, evaluation('uses-b', { artifacts: [https('b', b, '/b')] }, { duration: '100ms' }));
    await waitForPhase(env, 'uses-b', ['Succeeded']);
    await createEvaluation(env, evaluation('uses-c', { artifacts: [https('c', c, '/c')] }, { duration: '100ms' }));
    await waitForPhase(env, 'uses-c', ['Succeeded']);
    await createEvaluation(env, evaluation('uses-d', { artifacts: [https('d', d, '/d')] }, { duration: '100ms' }));
    await waitForPhase(env, 'uses-d', ['Succeeded']);

    await until('eviction to settle', async () => !has(b) && !has(c));
    expect(has(a)).toBe(true); // in use by the running evaluation throughout
    expect(has(d)).toBe(true);
    const cache = await until('the cache status to show the eviction', async () => {
      const c0 = await getCache(env);
      return c0?.status?.lastEviction && c0.status.usedBytes === 700_000 ? c0 : false;
    });
    expect(cache.status).toMatchObject({ capacityBytes: 1_000_000, entries: 2, phase: 'Ready' });
    expect(await metric(filler, 'rlmesh_controller_cache_evictions_total')).toBeGreaterThanOrEqual(2);

    // once uses-a finishes, a is evictable like any other
    await env.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: env.runs, plural: 'rlmeshevaluations', name: 'uses-a', body: { spec: { cancelled: true } } },
      MERGE_PATCH,
    );
    await waitForPhase(env, 'uses-a', ['Cancelled']);
    const e = blob(300_000);
    server.put('/e', e.data);
    await createEvaluation(env, evaluation('uses-e', { artifacts: [https('e', e, '/e')] }, { duration: '100ms' }));
    await waitForPhase(env, 'uses-e', ['Succeeded']);
    await until('a to be evicted once no unfinished evaluation uses it', async () => !has(a));
    expect(has(e)).toBe(true);
  });
});
