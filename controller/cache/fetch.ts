// Fetches artifacts into the store exactly once: concurrent requests for one
// digest share a single download (in-process), an on-disk lock covers a crash
// mid-download, and the bytes go to a temp file that is published only after
// its size and SHA-256 match. Large objects are fetched with parallel ranged
// GETs and a journal of finished ranges, so a restarted controller resumes
// instead of starting over. HTTPS goes through undici, S3 through
// @aws-sdk/client-s3 with the assignment's temporary credentials; both through
// the proxy that HTTPS_PROXY / NO_PROXY name (in the chart: the egress proxy,
// so artifacts meet the same allow-list and address rules as evaluations).
import { appendFile, open, readFile, stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { getProxyForUrl } from 'proxy-from-env';
import type { Logger } from 'pino';
import { EnvHttpProxyAgent, request, type Dispatcher } from 'undici';
import { backoffDelayMs } from '../../lib/backoff.ts';
import { ERROR_HEADER, REFUSED_HEADER } from '../../lib/egress-headers.ts';
import type { Metrics } from '../metrics.ts';
import { createHasher, InOrderHash, type OffThread } from './hasher.ts';
import type { ArtifactStore } from './store.ts';
import { BackgroundSync, PositionalWriter } from './writer.ts';
import { errorMessage } from '../../lib/error-fields.ts';

export type FetchFailure = 'DigestMismatch' | 'SizeMismatch' | 'SourceUnreachable' | 'TooLarge' | 'CredentialsMissing';

/** A failure that retrying cannot fix; its message is what the evaluation's status shows. */
export class FetchError extends Error {
  readonly reason: FetchFailure;
  constructor(reason: FetchFailure, message: string) {
    super(message);
    this.reason = reason;
  }
}

class RangesUnsupported extends Error {}
/** The cache's disk refused a write: retrying the source cannot help, and the file no longer matches what was hashed. */
class WriteFailed extends Error {}

export type S3Credentials = { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
export type ResolvedSource =
  | { kind: 'https'; url: string }
  | { kind: 's3'; endpoint?: string; region: string; bucket: string; key: string; credentials?: S3Credentials };
export type ArtifactRef = { name: string; sha256: string; sizeBytes: number };

type Range = { start: number; end: number }; // inclusive, as in the Range header
type Source = { kind: 'https' | 's3'; describe: string; get: (range?: Range) => Promise<Readable> };

export type FetcherOptions = {
  chunkBytes?: number;
  parallelism?: number;
  rangedThresholdBytes?: number;
  attempts?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Bytes gathered into one positional write. */
  writeBatchBytes?: number;
  /** A datasync runs beside the download every this many bytes written (0: only the fsync before publishing). */
  syncEveryBytes?: number;
  /** Hash on a worker thread: 'auto' does from 4 cores up (see hasher.ts). */
  hashOffThread?: OffThread;
  dispatcher?: Dispatcher;
};

export class ArtifactFetcher {
  readonly #store: ArtifactStore;
  readonly #log: Logger;
  readonly #metrics: Metrics | undefined;
  readonly #o: Required<Omit<FetcherOptions, 'dispatcher'>>;
  readonly #dispatcher: Dispatcher;
  readonly #inflight = new Map<string, Promise<void>>();
  /** Downloads actually started (after the lock and the cache check). */
  downloads = 0;

  constructor(store: ArtifactStore, log: Logger, metrics?: Metrics, opts: FetcherOptions = {}) {
    this.#store = store;
    this.#log = log;
    this.#metrics = metrics;
    this.#o = {
      chunkBytes: opts.chunkBytes ?? 32 * 1024 * 1024,
      parallelism: opts.parallelism ?? 4,
      // ranged GETs pay off where one connection is slower than the disk (a WAN, a
      // throttled bucket), not on a fast link, where they only add work: large objects only
      rangedThresholdBytes: opts.rangedThresholdBytes ?? 256 * 1024 * 1024,
      attempts: opts.attempts ?? 5,
      baseDelayMs: opts.baseDelayMs ?? 500,
      maxDelayMs: opts.maxDelayMs ?? 10_000,
      writeBatchBytes: opts.writeBatchBytes ?? 4 * 1024 * 1024,
      syncEveryBytes: opts.syncEveryBytes ?? 32 * 1024 * 1024,
      hashOffThread: opts.hashOffThread ?? 'auto',
    };
    // honours HTTPS_PROXY/NO_PROXY when the filler itself must go through a proxy
    this.#dispatcher = opts.dispatcher ?? new EnvHttpProxyAgent({ connections: this.#o.parallelism * 2 });
  }

  /** Resolves once the artifact is in the store, verified; rejects with FetchError when it cannot be. */
  fetch(a: ArtifactRef, source: ResolvedSource): Promise<void> {
    let p = this.#inflight.get(a.sha256);
    if (!p) {
      p = this.#fetchLocked(a, source).finally(() => this.#inflight.delete(a.sha256));
      this.#inflight.set(a.sha256, p);
    }
    return p;
  }

  async #fetchLocked(a: ArtifactRef, source: ResolvedSource): Promise<void> {
    if (await this.#store.has(a.sha256)) return;
    let lock = await this.#store.lock(a.sha256);
    while (lock === 'busy') {
      await sleep(250);
      if (await this.#store.has(a.sha256)) return;
      lock = await this.#store.lock(a.sha256);
    }
    try {
      if (await this.#store.has(a.sha256)) return;
      this.downloads++;
      const src = makeSource(source, this.#dispatcher);
      const started = performance.now();
      try {
        await this.#download(src, a);
      } catch (err) {
        this.#metrics?.cacheFetches.inc({ source: src.kind, outcome: err instanceof FetchError ? err.reason : 'error' });
        throw err;
      }
      this.#metrics?.cacheFetches.inc({ source: src.kind, outcome: 'ok' });
      this.#metrics?.cacheFetchBytes.inc(a.sizeBytes);
      this.#metrics?.cacheFetchSeconds.observe({ source: src.kind }, (performance.now() - started) / 1000);
      this.#log.info({ artifact: a.name, sha256: a.sha256, bytes: a.sizeBytes, source: src.describe, ms: Math.round(performance.now() - started) }, 'artifact cached');
    } finally {
      await lock.release();
    }
  }

  async #download(src: Source, a: ArtifactRef): Promise<void> {
    if (a.sizeBytes >= this.#o.rangedThresholdBytes) {
      try {
        return await this.#ranged(src, a, true);
      } catch (err) {
        if (!(err instanceof RangesUnsupported)) throw err;
        this.#log.info({ artifact: a.name, source: src.describe }, 'source ignores Range requests; downloading in one stream');
        await this.#store.discardPartial(a.sha256);
      }
    }
    await this.#retrying(src, a, () => this.#single(src, a));
  }

  /** Runs fn, retrying source errors with exponential backoff; FetchErrors are final. */
  async #retrying<T>(src: Source, a: ArtifactRef, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    let last: unknown;
    for (let attempt = 1; attempt <= this.#o.attempts; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (err instanceof FetchError || err instanceof RangesUnsupported || err instanceof WriteFailed || signal?.aborted) throw err;
        last = err;
        if (attempt === this.#o.attempts) break;
        const delay = backoffDelayMs(attempt, { baseMs: this.#o.baseDelayMs, maxMs: this.#o.maxDelayMs, jitter: 0 });
        this.#log.warn({ artifact: a.name, source: src.describe, attempt, retryInMs: delay, err: sourceFailure(err) }, 'artifact source failed; retrying');
        await sleep(delay, undefined, { signal });
      }
    }
    throw new FetchError(
      'SourceUnreachable',
      `cannot fetch artifact ${a.name} from ${src.describe} after ${this.#o.attempts} attempts: ${sourceFailure(last)}; check that the source is reachable from the cluster and that its URL or credentials have not expired`,
    );
  }

  async #single(src: Source, a: ArtifactRef): Promise<void> {
    await this.#store.discardPartial(a.sha256);
    const fh = await open(this.#store.tmpPath(a.sha256), 'w');
    const sync = new BackgroundSync(fh, this.#o.syncEveryBytes);
    const out = new PositionalWriter(fh, 0, { batchBytes: this.#o.writeBatchBytes, sync });
    const hash = createHasher(a.sizeBytes, this.#o.hashOffThread);
    let actual: string;
    try {
      // each piece is hashed where it arrives and written without a copy; the loop
      // waits only when the disk or the hashing worker falls behind
      for await (const piece of (await src.get()) as AsyncIterable<Buffer>) {
        if (out.bytes + piece.length > a.sizeBytes) throw new FetchError('SizeMismatch', sizeMessage(a, `more than ${a.sizeBytes}`, src));
        const hashing = hash.update(piece);
        const writing = out.push(piece);
        if (hashing) await hashing;
        if (writing) await writing;
      }
      if (out.bytes !== a.sizeBytes) throw new FetchError('SizeMismatch', sizeMessage(a, String(out.bytes), src));
      await out.end();
      await sync.settle();
      actual = await hash.digest();
    } catch (err) {
      hash.destroy();
      await out.settle();
      await sync.settle().catch(() => {});
      await fh.close().catch(() => {});
      await this.#store.discardPartial(a.sha256);
      throw err;
    }
    await fh.close();
    if (actual !== a.sha256) {
      await this.#store.discardPartial(a.sha256);
      throw new FetchError('DigestMismatch', digestMessage(a, actual, src));
    }
    await this.#store.commit(a.sha256);
  }

  async #ranged(src: Source, a: ArtifactRef, mayRestart: boolean): Promise<void> {
    const tmp = this.#store.tmpPath(a.sha256);
    const journal = this.#store.journalPath(a.sha256);
    const chunk = this.#o.chunkBytes;
    const n = Math.ceil(a.sizeBytes / chunk);
    const partial = await stat(tmp).catch(() => undefined);
    const done = new Set<number>();
    if (partial?.size === a.sizeBytes) {
      for (const line of (await readFile(journal, 'utf8').catch(() => '')).split('\n')) if (/^\d+$/.test(line) && Number(line) < n) done.add(Number(line));
    } else {
      await this.#store.discardPartial(a.sha256);
    }
    const resumed = done.size;
    if (resumed > 0) this.#log.info({ artifact: a.name, chunks: n, alreadyWritten: resumed }, 'resuming an interrupted download');
    const fh = await open(tmp, partial?.size === a.sizeBytes ? 'r+' : 'w+');
    // full size from the start: a restart recognises a partial file it can resume by its size
    await fh.truncate(a.sizeBytes).catch(async (err: unknown) => {
      await fh.close();
      throw err;
    });
    const sync = new BackgroundSync(fh, this.#o.syncEveryBytes);
    const hash = createHasher(a.sizeBytes, this.#o.hashOffThread);
    const ordered = new InOrderHash(hash);
    const abort = new AbortController();
    const running = new Set<Promise<void>>();
    // one range: written where it belongs as it arrives (no copy), hashed in file
    // order; a retry continues the range from the last byte received
    const load = async (i: number): Promise<void> => {
      const start = i * chunk;
      const len = Math.min(chunk, a.sizeBytes - start);
      if (done.has(i)) {
        const buf = Buffer.allocUnsafe(len);
        for (let got = 0; got < len; ) {
          const { bytesRead } = await fh.read(buf, got, len - got, start + got);
          if (bytesRead === 0) throw new Error(`the partial file ended at ${start + got} of ${a.sizeBytes} bytes`);
          got += bytesRead;
        }
        await ordered.add(i, buf);
        await ordered.complete(i);
        return;
      }
      let got = 0;
      await this.#retrying(
        src,
        a,
        async () => {
          const out = new PositionalWriter(fh, start + got, { batchBytes: this.#o.writeBatchBytes, sync });
          try {
            for await (const piece of (await src.get({ start: start + got, end: start + len - 1 })) as AsyncIterable<Buffer>) {
              if (abort.signal.aborted) break;
              if (got + piece.length > len) throw new RangesUnsupported(`range ${start}-${start + len - 1} returned more than ${len} bytes`);
              got += piece.length;
              const hashing = ordered.add(i, piece);
              const writing = out.push(piece);
              if (hashing) await hashing;
              if (writing) await writing;
            }
          } finally {
            // what was received (and hashed) is on disk before a retry continues after it
            await out.end().catch((err: unknown) => {
              throw new WriteFailed(`cannot write ${tmp}: ${errorMessage(err)}`);
            });
          }
          if (!abort.signal.aborted && got !== len) throw new Error(`range ${start}-${start + len - 1} returned ${got} of ${len} bytes`);
        },
        abort.signal,
      );
      if (abort.signal.aborted) return;
      await appendFile(journal, `${i}\n`);
      await ordered.complete(i);
    };
    try {
      // up to `parallelism` ranges at once, none further ahead of the hash than that
      // (so memory holds at most the ranges in flight)
      await new Promise<void>((resolve, reject) => {
        let next = 0;
        const launch = (): void => {
          if (abort.signal.aborted) return;
          if (ordered.cursor >= n) return resolve();
          while (next < n && next < ordered.cursor + this.#o.parallelism) {
            const p = load(next++).then(launch, (err: unknown) => {
              abort.abort();
              reject(err as Error);
            });
            running.add(p);
            void p.finally(() => running.delete(p));
          }
        };
        launch();
      });
      await sync.settle();
      const actual = await hash.digest();
      if (actual !== a.sha256) {
        await fh.close().catch(() => {});
        await this.#store.discardPartial(a.sha256);
        // a resumed file may hold a range corrupted by the crash: start over once
        if (resumed > 0 && mayRestart) return this.#ranged(src, a, false);
        throw new FetchError('DigestMismatch', digestMessage(a, actual, src));
      }
    } catch (err) {
      abort.abort();
      hash.destroy();
      // the other ranges stop at their next piece; their writes must land before the file closes
      await Promise.allSettled([...running]);
      await sync.settle().catch(() => {});
      await fh.close().catch(() => {});
      if (err instanceof FetchError || err instanceof RangesUnsupported) await this.#store.discardPartial(a.sha256);
      throw err;
    }
    await fh.close();
    await this.#store.commit(a.sha256);
  }
}

function makeSource(s: ResolvedSource, dispatcher: Dispatcher): Source {
  if (s.kind === 'https') {
    const u = new URL(s.url);
    // a presigned URL's query is a credential: never log or report it
    const describe = `${u.origin}${u.pathname}`;
    return {
      kind: 'https',
      describe,
      get: async (range) => {
        const res = await request(s.url, {
          method: 'GET',
          dispatcher,
          headers: range ? { range: `bytes=${range.start}-${range.end}` } : {},
          headersTimeout: 30_000,
          bodyTimeout: 60_000,
        });
        if (range && res.statusCode === 200) {
          await res.body.dump();
          throw new RangesUnsupported('source answered a Range request with the whole object');
        }
        if (res.statusCode !== (range ? 206 : 200)) {
          const text = (await res.body.text().catch(() => '')).slice(0, 200).replace(/\s+/g, ' ').trim();
          throw new Error(`HTTP ${res.statusCode}${text ? `: ${text}` : ''}`);
        }
        return res.body;
      },
    };
  }
  // the S3 client does not read HTTPS_PROXY itself
  const proxy = getProxyForUrl(s.endpoint ?? `https://s3.${s.region}.amazonaws.com`);
  const agent = proxy ? new HttpsProxyAgent(proxy) : undefined;
  // a refused CONNECT reaches the SDK only as an unparsable response; keep what the proxy said
  let refusal: string | undefined;
  agent?.on('proxyConnect', (res: { statusCode: number; headers: Record<string, string | string[] | undefined> }) => {
    refusal = res.statusCode === 200 ? undefined : proxyAnswer(res.statusCode, res.headers);
  });
  const client = new S3Client({
    region: s.region,
    ...(agent ? { requestHandler: new NodeHttpHandler({ httpsAgent: agent }) } : {}),
    ...(s.endpoint ? { endpoint: s.endpoint, forcePathStyle: true } : {}),
    ...(s.credentials ? { credentials: s.credentials } : {}),
    maxAttempts: 1, // the fetcher retries with its own backoff
  });
  return {
    kind: 's3',
    describe: `s3://${s.bucket}/${s.key}${s.endpoint ? ` at ${s.endpoint}` : ''}`,
    get: async (range) => {
      const out = await client
        .send(new GetObjectCommand({ Bucket: s.bucket, Key: s.key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }))
        .catch((err: unknown) => {
          throw refusal ? new Error(refusal) : err;
        });
      if (range && !out.ContentRange) {
        (out.Body as Readable | undefined)?.destroy();
        throw new RangesUnsupported('S3 endpoint ignored the Range header');
      }
      if (!out.Body) throw new Error('S3 returned no body');
      return out.Body as Readable;
    },
  };
}

const proxyRefused = (what: string) =>
  `the egress proxy refused the connection (${what}): the destination is not allowed from this cluster (egress.extraDomains, egress.allowedPorts, egress.allowRanges)`;

/** What the egress proxy answered to a CONNECT it did not open (its refusal rule, or why it could not connect). */
export function proxyAnswer(status: number, headers: Record<string, string | string[] | undefined>): string {
  const refused = headers[REFUSED_HEADER.toLowerCase()];
  const error = headers[ERROR_HEADER.toLowerCase()];
  if (refused) return proxyRefused(`HTTP ${status}, rule ${String(refused)}`);
  if (error) return `the egress proxy could not connect to the source (HTTP ${status}, ${String(error)})`;
  return `the proxy answered the CONNECT with HTTP ${status}`;
}

/** Why a source failed; undici keeps only the status of a CONNECT the egress proxy refused. */
function sourceFailure(err: unknown): string {
  const message = errorMessage(err);
  const tunnel = /^Proxy response \((\d+)\) !== 200 when HTTP Tunneling/.exec(message);
  return tunnel ? proxyRefused(`HTTP ${tunnel[1]}`) : message;
}

function digestMessage(a: ArtifactRef, actual: string, src: Source): string {
  return `artifact ${a.name} from ${src.describe} does not match its digest: expected sha256 ${a.sha256}, got ${actual}; the source serves different content than the assignment names, so it was discarded`;
}

function sizeMessage(a: ArtifactRef, got: string, src: Source): string {
  return `artifact ${a.name} from ${src.describe} has the wrong size: expected ${a.sizeBytes} bytes, got ${got}; the source serves different content than the assignment names, so it was discarded`;
}

