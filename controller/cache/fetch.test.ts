import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blob, startArtifactServer, type ArtifactServer } from '../../test/controller/artifact-server.ts';
import { ArtifactFetcher, FetchError, proxyAnswer } from './fetch.ts';
import { ArtifactStore } from './store.ts';
import { tempDir } from '../../test/support/temp.ts';

const log = pino({ level: 'silent' });
let server: ArtifactServer;
beforeAll(async () => {
  server = await startArtifactServer();
});
afterAll(async () => server.close());

async function setup(opts: ConstructorParameters<typeof ArtifactFetcher>[3] = {}) {
  const store = new ArtifactStore(tempDir('rlmesh-cache-'));
  await store.init();
  const fetcher = new ArtifactFetcher(store, log, undefined, { dispatcher: server.dispatcher, baseDelayMs: 10, ...opts });
  return { store, fetcher };
}

describe('ArtifactFetcher over HTTPS', () => {
  it('downloads once however many callers want the artifact, verifies it and publishes it read-only', async () => {
    const b = blob(300_000);
    server.put('/one', b.data);
    const { store, fetcher } = await setup();
    const ref = { name: 'one', sha256: b.sha256, sizeBytes: b.data.length };
    await Promise.all(Array.from({ length: 20 }, () => fetcher.fetch(ref, { kind: 'https', url: server.url('/one') })));
    expect(server.requests.get('/one')).toBe(1);
    expect(fetcher.downloads).toBe(1);
    const path = store.path(b.sha256);
    expect(readFileSync(path).equals(b.data)).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o444);
    expect(readdirSync(join(store.root, 'tmp'))).toEqual([]);
    // a later request is served from the store
    await fetcher.fetch(ref, { kind: 'https', url: server.url('/one') });
    expect(server.requests.get('/one')).toBe(1);
  });

  it('fetches large objects with parallel ranged GETs', async () => {
    const b = blob(5 * 1024 * 1024 + 17);
    server.put('/big', b.data);
    const { store, fetcher } = await setup({ chunkBytes: 1024 * 1024, rangedThresholdBytes: 2 * 1024 * 1024, parallelism: 4 });
    await fetcher.fetch({ name: 'big', sha256: b.sha256, sizeBytes: b.data.length }, { kind: 'https', url: server.url('/big') });
    expect(server.requests.get('/big')).toBe(6);
    expect(readFileSync(store.path(b.sha256)).equals(b.data)).toBe(true);
  });

  it('refuses content that does not match the digest, naming both digests, and leaves nothing visible', async () => {
    const b = blob(1000);
    const other = blob(1000);
    server.put('/wrong', other.data);
    const { store, fetcher } = await setup();
    const err = await fetcher.fetch({ name: 'wrong', sha256: b.sha256, sizeBytes: 1000 }, { kind: 'https', url: server.url('/wrong') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FetchError);
    expect((err as FetchError).reason).toBe('DigestMismatch');
    expect((err as FetchError).message).toContain(`expected sha256 ${b.sha256}, got ${other.sha256}`);
    expect((err as FetchError).message).not.toContain('secret-signature');
    expect(await store.has(b.sha256)).toBe(false);
    expect(readdirSync(join(store.root, 'tmp'))).toEqual([]);
    expect(readdirSync(join(store.root, 'sha256'))).toEqual([]);
  });

  it('refuses a wrong size', async () => {
    const b = blob(1000);
    server.put('/short', b.data);
    const { fetcher } = await setup();
    const err = (await fetcher.fetch({ name: 'short', sha256: b.sha256, sizeBytes: 2000 }, { kind: 'https', url: server.url('/short') }).catch((e: unknown) => e)) as FetchError;
    expect(err.reason).toBe('SizeMismatch');
  });

  it('retries a failing source with backoff and succeeds', async () => {
    const b = blob(2000);
    server.put('/flaky', b.data);
    server.failNext('/flaky', 2);
    const { store, fetcher } = await setup({ attempts: 4 });
    await fetcher.fetch({ name: 'flaky', sha256: b.sha256, sizeBytes: 2000 }, { kind: 'https', url: server.url('/flaky') });
    expect(server.requests.get('/flaky')).toBe(3);
    expect(await store.has(b.sha256)).toBe(true);
  });

  it('gives up on an unreachable source with its error', async () => {
    const { fetcher } = await setup({ attempts: 3 });
    const err = (await fetcher
      .fetch({ name: 'gone', sha256: 'b'.repeat(64), sizeBytes: 10 }, { kind: 'https', url: server.url('/missing') })
      .catch((e: unknown) => e)) as FetchError;
    expect(err.reason).toBe('SourceUnreachable');
    expect(err.message).toContain('after 3 attempts: HTTP 404: NoSuchKey');
    expect(server.requests.get('/missing')).toBe(3);
    const refused = (await fetcher
      .fetch({ name: 'closed', sha256: 'c'.repeat(64), sizeBytes: 10 }, { kind: 'https', url: 'https://127.0.0.1:1/x' })
      .catch((e: unknown) => e)) as FetchError;
    expect(refused.reason).toBe('SourceUnreachable');
    expect(refused.message).toMatch(/ECONNREFUSED/);
  });
});

describe('resuming an interrupted ranged download', () => {
  it('fetches only the ranges the journal does not list, and verifies the whole file', async () => {
    const chunk = 1024 * 1024;
    const b = blob(4 * chunk);
    server.put('/resume', b.data);
    const { store, fetcher } = await setup({ chunkBytes: chunk, rangedThresholdBytes: chunk, parallelism: 2 });
    // what a killed controller leaves behind: a full-size partial file with two ranges written
    const partial = Buffer.alloc(b.data.length);
    b.data.copy(partial, 0, 0, chunk);
    b.data.copy(partial, 2 * chunk, 2 * chunk, 3 * chunk);
    writeFileSync(store.tmpPath(b.sha256), partial);
    writeFileSync(store.journalPath(b.sha256), '0\n2\n');
    writeFileSync(join(store.root, 'tmp', `${b.sha256}.lock`), JSON.stringify({ host: 'gone', pid: 1 }));
    await fetcher.fetch({ name: 'resume', sha256: b.sha256, sizeBytes: b.data.length }, { kind: 'https', url: server.url('/resume') });
    expect(server.requests.get('/resume')).toBe(2);
    expect(readFileSync(store.path(b.sha256)).equals(b.data)).toBe(true);
    expect(readdirSync(join(store.root, 'tmp'))).toEqual([]);
  });

  it('starts over once when a resumed file turns out corrupt', async () => {
    const chunk = 1024 * 1024;
    const b = blob(2 * chunk);
    server.put('/corrupt', b.data);
    const { store, fetcher } = await setup({ chunkBytes: chunk, rangedThresholdBytes: chunk });
    writeFileSync(store.tmpPath(b.sha256), Buffer.alloc(b.data.length, 7));
    writeFileSync(store.journalPath(b.sha256), '0\n');
    await fetcher.fetch({ name: 'corrupt', sha256: b.sha256, sizeBytes: b.data.length }, { kind: 'https', url: server.url('/corrupt') });
    expect(server.requests.get('/corrupt')).toBe(3);
    expect(readFileSync(store.path(b.sha256)).equals(b.data)).toBe(true);
  });
});

describe('what the egress proxy answered', () => {
  it('names the refusal rule, or why the proxy could not connect', () => {
    expect(proxyAnswer(403, { 'x-rlmesh-egress-refused': 'private-use' })).toMatch(/^the egress proxy refused the connection \(HTTP 403, rule private-use\): .*egress\.allowRanges/);
    expect(proxyAnswer(502, { 'x-rlmesh-egress-error': 'connect-failed' })).toBe('the egress proxy could not connect to the source (HTTP 502, connect-failed)');
    expect(proxyAnswer(407, {})).toBe('the proxy answered the CONNECT with HTTP 407');
  });
});
