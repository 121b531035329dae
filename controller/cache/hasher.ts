// SHA-256 of a download, computed on a worker thread for large artifacts so
// hashing overlaps with receiving and writing instead of adding to them (one
// core hashes about as fast as a fast link delivers). Small artifacts hash
// inline: a worker costs more to start than they take to hash.
import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';

export type Hasher = { update: (chunk: Buffer) => Promise<void> | void; digest: () => Promise<string>; destroy: () => void };

const OFF_THREAD_MIN_BYTES = 8 * 1024 * 1024;
// at most this much copied data waits for the worker before update() applies backpressure
const MAX_IN_FLIGHT = 32 * 1024 * 1024;
// network reads arrive in 16 KiB pieces: posting each would cost more than hashing it
const BATCH_BYTES = 1024 * 1024;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const hash = require('node:crypto').createHash('sha256');
parentPort.on('message', (m) => {
  if (m === 'digest') parentPort.postMessage({ digest: hash.digest('hex') });
  else { hash.update(m); parentPort.postMessage({ ack: m.byteLength }); }
});
`;

export function createHasher(sizeBytes: number): Hasher {
  if (sizeBytes < OFF_THREAD_MIN_BYTES) {
    const h = createHash('sha256');
    return { update: (c) => void h.update(c), digest: async () => h.digest('hex'), destroy: () => {} };
  }
  const worker = new Worker(WORKER_SOURCE, { eval: true });
  let inFlight = 0;
  let failure: Error | undefined;
  let drained: (() => void) | undefined;
  let onDigest: ((d: string) => void) | undefined;
  let onFail: ((e: Error) => void) | undefined;
  let batch: Buffer[] = [];
  let batched = 0;
  const post = (): void => {
    if (batched === 0) return;
    // one private copy the worker can own (the pieces may be reused or written meanwhile)
    const copy = new Uint8Array(batched);
    let off = 0;
    for (const piece of batch) {
      copy.set(piece, off);
      off += piece.length;
    }
    batch = [];
    batched = 0;
    inFlight += copy.byteLength;
    worker.postMessage(copy, [copy.buffer]);
  };
  worker.on('message', (m: { ack?: number; digest?: string }) => {
    if (m.ack !== undefined) {
      inFlight -= m.ack;
      if (inFlight <= MAX_IN_FLIGHT / 2) drained?.();
    } else if (m.digest !== undefined) onDigest?.(m.digest);
  });
  worker.on('error', (err) => {
    failure = err;
    onFail?.(err);
    drained?.();
  });
  return {
    update: async (chunk) => {
      if (failure) throw failure;
      batch.push(chunk);
      batched += chunk.length;
      if (batched < BATCH_BYTES) return;
      post();
      if (inFlight > MAX_IN_FLIGHT) {
        await new Promise<void>((resolve) => (drained = resolve));
        drained = undefined;
        if (failure) throw failure;
      }
    },
    digest: () =>
      new Promise<string>((resolve, reject) => {
        if (failure) return reject(failure);
        onDigest = (d) => {
          void worker.terminate();
          resolve(d);
        };
        onFail = reject;
        post();
        worker.postMessage('digest');
      }),
    destroy: () => void worker.terminate(),
  };
}
