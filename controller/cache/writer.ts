// Writes received pieces (16-64 KiB each, as the network delivers them) to a
// file at their own positions without copying them: pieces are gathered into
// one writev of a few MiB on libuv's pool while the next batch fills, so the
// receiving thread neither copies nor waits for the disk, and pauses only when
// the disk falls a whole batch behind. Every `syncEveryBytes` a datasync runs
// beside the writes, so the fsync before publishing has little left to flush.
import type { FileHandle } from 'node:fs/promises';

// the kernel's limit of buffers per writev (IOV_MAX)
const MAX_PIECES = 1024;

export type WriterOptions = { batchBytes?: number; sync?: BackgroundSync };

export class PositionalWriter {
  readonly #fh: FileHandle;
  readonly #batchBytes: number;
  readonly #sync: BackgroundSync | undefined;
  #position: number;
  #batch: Buffer[] = [];
  #batched = 0;
  #writing: Promise<void> | undefined;
  #failure: unknown;
  /** Bytes accepted so far (written or queued). */
  bytes = 0;

  constructor(fh: FileHandle, position: number, opts: WriterOptions = {}) {
    this.#fh = fh;
    this.#position = position;
    this.#batchBytes = opts.batchBytes ?? 4 * 1024 * 1024;
    this.#sync = opts.sync;
  }

  /**
   * Queues a piece (which must not be modified afterwards). Returns a promise
   * only when the caller has to wait: the previous batch is still being written.
   */
  push(piece: Buffer): Promise<void> | undefined {
    if (this.#failure !== undefined) throw this.#failure;
    this.#batch.push(piece);
    this.#batched += piece.length;
    this.bytes += piece.length;
    if (this.#batched < this.#batchBytes && this.#batch.length < MAX_PIECES) return undefined;
    if (this.#writing) return this.#writing.then(() => this.#start());
    this.#start();
    return undefined;
  }

  /** Writes what is left and waits for it. */
  async end(): Promise<void> {
    if (this.#writing) await this.#writing;
    this.#start();
    await this.#writing;
    if (this.#failure !== undefined) throw this.#failure;
  }

  /** Waits for the write in flight without writing the rest (after a failure, before the file is closed). */
  async settle(): Promise<void> {
    await this.#writing;
  }

  #start(): void {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#batched === 0) return;
    const pieces = this.#batch;
    const at = this.#position;
    const len = this.#batched;
    this.#batch = [];
    this.#batched = 0;
    this.#position += len;
    this.#writing = writeFully(this.#fh, pieces, at, len).then(
      () => {
        this.#writing = undefined;
        this.#sync?.wrote(len);
      },
      (err: unknown) => {
        this.#writing = undefined;
        this.#failure ??= err;
      },
    );
  }
}

/** Datasyncs a file in the background every `everyBytes` written, one at a time. */
export class BackgroundSync {
  readonly #fh: FileHandle;
  readonly #every: number;
  #unsynced = 0;
  #syncing: Promise<void> | undefined;
  #failure: unknown;

  constructor(fh: FileHandle, everyBytes: number) {
    this.#fh = fh;
    this.#every = everyBytes;
  }

  wrote(len: number): void {
    this.#unsynced += len;
    if (this.#every <= 0 || this.#unsynced < this.#every || this.#syncing) return;
    this.#unsynced = 0;
    this.#syncing = this.#fh.datasync().then(
      () => void (this.#syncing = undefined),
      (err: unknown) => {
        this.#syncing = undefined;
        this.#failure ??= err;
      },
    );
  }

  /** Waits for a datasync in flight; rethrows one that failed. */
  async settle(): Promise<void> {
    await this.#syncing;
    if (this.#failure !== undefined) throw this.#failure;
  }
}

async function writeFully(fh: FileHandle, pieces: Buffer[], position: number, len: number): Promise<void> {
  // a regular file takes a whole writev unless the disk is full or a signal interrupts it
  for (let done = 0; done < len; ) {
    const { bytesWritten } = await fh.writev(done === 0 ? pieces : after(pieces, done), position + done);
    if (bytesWritten === 0) throw new Error(`cannot write to the cache: wrote ${done} of ${len} bytes at offset ${position}`);
    done += bytesWritten;
  }
}

function after(pieces: Buffer[], skip: number): Buffer[] {
  const rest: Buffer[] = [];
  for (const p of pieces) {
    if (skip >= p.length) skip -= p.length;
    else {
      rest.push(skip > 0 ? p.subarray(skip) : p);
      skip = 0;
    }
  }
  return rest;
}
