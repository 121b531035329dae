// SHA-256 of a download, and the order in which ranges fetched in parallel are
// fed to it.
//
// Where to hash: inline, on the receiving thread, costs the hash alone (SHA-NI:
// about 1 GB/s per core). On a worker thread it costs the hash plus a copy of
// every byte and a message per MiB, and wins only when a core is idle to run
// it: on a node with spare cores it takes the hash off the receiving thread's
// path, on a busy or 2-core node (where the receiving thread, the pool's
// writes and, on loopback, the server already share the cores) the copies are
// pure overhead. `offThread: 'auto'` picks the worker only from 4 cores up and
// for artifacts large enough to repay starting one.
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/** update() returns a promise only when the caller must wait (the worker is behind). */
export type Hasher = { update: (chunk: Buffer) => Promise<void> | undefined; digest: () => Promise<string>; destroy: () => void };
export type OffThread = boolean | 'auto';

const OFF_THREAD_MIN_BYTES = 8 * 1024 * 1024;
const OFF_THREAD_MIN_CORES = 4;
// at most this much copied data waits for the worker before update() applies backpressure
const MAX_IN_FLIGHT = 32 * 1024 * 1024;
// network reads arrive in 16-64 KiB pieces: posting each would cost more than hashing it
const BATCH_BYTES = 1024 * 1024;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const hash = require('node:crypto').createHash('sha256');
parentPort.on('message', (m) => {
  if (m === 'digest') parentPort.postMessage({ digest: hash.digest('hex') });
  else { hash.update(m); parentPort.postMessage({ ack: m.byteLength }); }
});
`;

export function hashesOffThread(sizeBytes: number, offThread: OffThread = 'auto'): boolean {
  if (offThread !== 'auto') return offThread;
  return sizeBytes >= OFF_THREAD_MIN_BYTES && availableParallelism() >= OFF_THREAD_MIN_CORES;
}

export function createHasher(sizeBytes: number, offThread: OffThread = 'auto'): Hasher {
  if (!hashesOffThread(sizeBytes, offThread)) {
    const h = createHash('sha256');
    return {
      update: (c) => void h.update(c),
      digest: async () => h.digest('hex'),
      destroy: () => {},
    };
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
    // one private copy the worker can own (the pieces are being written meanwhile)
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
  // every caller that must wait shares one promise, resolved when the worker catches up
  let waiting: Promise<void> | undefined;
  const wait = (): Promise<void> =>
    (waiting ??= new Promise<void>((resolve) => (drained = resolve)).then(() => {
      waiting = undefined;
      drained = undefined;
      if (failure) throw failure;
    }));
  return {
    update: (chunk) => {
      if (failure) throw failure;
      batch.push(chunk);
      batched += chunk.length;
      if (batched < BATCH_BYTES) return undefined;
      post();
      return inFlight > MAX_IN_FLIGHT ? wait() : undefined;
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

/**
 * Feeds ranges that arrive in parallel to one hash in file order: the range at
 * the cursor is hashed piece by piece as it arrives, later ranges are held in
 * memory until the cursor reaches them (so at most the ranges in flight are
 * held, never the file).
 */
export class InOrderHash {
  readonly #hash: Hasher;
  readonly #held = new Map<number, Buffer[]>();
  readonly #complete = new Set<number>();
  #cursor = 0;

  constructor(hash: Hasher) {
    this.#hash = hash;
  }

  /** Ranges before this one are all hashed. */
  get cursor(): number {
    return this.#cursor;
  }

  /** The next piece of range i, in order within the range. */
  add(i: number, piece: Buffer): Promise<void> | undefined {
    if (i === this.#cursor) return this.#hash.update(piece);
    let held = this.#held.get(i);
    if (!held) this.#held.set(i, (held = []));
    held.push(piece);
    return undefined;
  }

  /** Range i has delivered all its pieces; hashes the held ranges the cursor now reaches. */
  complete(i: number): Promise<void> | undefined {
    this.#complete.add(i);
    let wait: Promise<void> | undefined;
    while (this.#complete.has(this.#cursor)) {
      this.#complete.delete(this.#cursor);
      this.#cursor++;
      const held = this.#held.get(this.#cursor);
      this.#held.delete(this.#cursor);
      for (const piece of held ?? []) wait = this.#hash.update(piece) ?? wait;
    }
    return wait;
  }
}
