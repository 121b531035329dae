// Relays a tunnel's destination → client direction (downloads, the bulk of
// egress traffic) with less CPU than stream piping: the destination socket
// reads into pooled buffers (Node's `onread`), each read is written straight
// to the client, and a buffer returns to the pool as soon as the kernel has
// taken its bytes. Reading pauses while more than MAX_QUEUED_BYTES wait for
// the client, or while anything waits and the client is at its share of the
// proxy's buffer budget (buffer-budget.ts).
//
// The read size follows the backlog: a tunnel starts with a small buffer, a
// read that fills its buffer (the destination is ahead of us) gets the next
// larger size, and a read that uses under a quarter of it the next smaller.
// A bulk download so reads up to 1 MiB per system call, which costs less CPU
// per byte than fixed 256 KiB reads (measured with test/bench/egress.ts: about
// 17-20% less relay CPU per GiB; fewer reads, writes and wake-ups, and the
// destination is acknowledged less often), while an idle or chatty tunnel
// holds a 16 KiB read buffer. A size grows only while the client's share has
// room for it, and a client at its share reads 16 KiB at a time. A tunnel
// whose client reads slowly holds at most about 3 MiB (one queued write, one
// more read and the next read's buffer); every buffer it holds, the next
// read's included, counts against its client's share.
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import { MIN_READ_BYTES, type Holding } from './buffer-budget.ts';

const SIZES = [MIN_READ_BYTES, 64 * 1024, 256 * 1024, 1024 * 1024];
const MAX_QUEUED_BYTES = 1024 * 1024;
// what one read from a socket can add (libuv's read size)
const STREAM_READ_BYTES = 64 * 1024;

/** Free read buffers kept for reuse, up to `bytesPerSize` of each size; the rest are left to the garbage collector. */
export class BufferPool {
  private readonly bytesPerSize: number;
  private readonly pools: Buffer[][] = SIZES.map(() => []);

  constructor(bytesPerSize: number) {
    this.bytesPerSize = bytesPerSize;
  }

  take(sizeClass: number): Buffer {
    return this.pools[sizeClass]!.pop() ?? Buffer.allocUnsafe(SIZES[sizeClass]!);
  }

  release(buffer: Buffer): void {
    const pool = this.pools[SIZES.indexOf(buffer.length)];
    if (pool && (pool.length + 1) * buffer.length <= this.bytesPerSize) pool.push(buffer);
  }
}

export class DownstreamRelay {
  private readonly pool: BufferPool;
  private readonly holding: Holding;
  private upstream?: net.Socket;
  private client?: Duplex;
  private early: Buffer[] = [];
  private paused = false;
  private sizeClass = 0;
  // the buffer handed out for the next read; a read that ends in EOF or EAGAIN
  // never reaches the callback, so it is handed out again or returned on close
  private lent?: Buffer;

  constructor(pool: BufferPool, holding: Holding) {
    this.pool = pool;
    this.holding = holding;
  }

  /** Pass as `onread` to net.connect for the destination socket. */
  readonly onread = {
    buffer: (): Buffer => {
      if (!this.lent) {
        this.lent = this.pool.take(this.sizeClass);
        this.holding.hold(this.lent.length);
      }
      return this.lent;
    },
    callback: (bytes: number, buffer: Buffer): boolean => {
      this.lent = undefined;
      this.resize(bytes, buffer.length);
      return this.relay(bytes, buffer);
    },
  };

  /** The next read's size: one up after a full read, one down after a read under a quarter full, and no larger than the client's share has room for. */
  private resize(bytes: number, size: number): void {
    let next = bytes === size ? this.sizeClass + 1 : bytes < size / 4 ? this.sizeClass - 1 : this.sizeClass;
    next = Math.min(Math.max(next, 0), SIZES.length - 1);
    const room = this.holding.room();
    while (next > 0 && SIZES[next]! > room) next--;
    this.sizeClass = next;
  }

  /** Returns the unused read buffer to the pool once the destination socket is closed. */
  closed(): void {
    if (this.lent) {
      this.holding.free(this.lent.length);
      this.pool.release(this.lent);
    }
    this.lent = undefined;
  }

  /** Starts relaying to the client; bytes the destination sent before this (a banner) go first. */
  start(upstream: net.Socket, client: Duplex): void {
    this.upstream = upstream;
    this.client = client;
    for (const chunk of this.early) client.write(chunk, () => this.holding.free(chunk.length));
    this.early = [];
    if (upstream.readableEnded) client.end();
    else upstream.once('end', () => client.end());
  }

  /**
   * The same for a destination socket that already existed, so without
   * `onread` (a tunnel through the parent proxy): its stream's chunks are
   * relayed and counted alike, and are not pooled. While paused the socket
   * still reads ahead into its stream buffer, so that much is counted then.
   */
  startStream(upstream: net.Socket, client: Duplex): void {
    this.start(upstream, client);
    const readAhead = upstream.readableHighWaterMark + STREAM_READ_BYTES;
    let ahead = false;
    upstream.on('pause', () => {
      if (!ahead) this.holding.hold(readAhead);
      ahead = true;
    });
    upstream.on('resume', () => {
      if (ahead) this.holding.free(readAhead);
      ahead = false;
    });
    upstream.on('data', (chunk: Buffer) => {
      this.holding.hold(chunk.length);
      this.relay(chunk.length, chunk, false);
    });
  }

  private done(buffer: Buffer, pooled = true): void {
    this.holding.free(buffer.length);
    if (pooled) this.pool.release(buffer);
  }

  private relay(bytes: number, buffer: Buffer, pooled = true): boolean {
    const client = this.client;
    if (!client) {
      const copy = Buffer.from(buffer.subarray(0, bytes));
      this.holding.hold(copy.length);
      this.early.push(copy);
      this.done(buffer, pooled);
      return true;
    }
    if (client.destroyed) {
      this.done(buffer, pooled);
      return false;
    }
    let queued = false;
    client.write(buffer.subarray(0, bytes), () => {
      if (queued) this.done(buffer, pooled);
      if (this.paused && !this.blocked(client, MAX_QUEUED_BYTES / 2)) {
        this.paused = false;
        this.upstream?.resume();
      }
    });
    // written synchronously: the kernel has the bytes and the buffer is free again
    if (client.writableLength === 0) this.done(buffer, pooled);
    else queued = true;
    if (this.blocked(client, MAX_QUEUED_BYTES)) {
      this.paused = true;
      this.upstream?.pause();
      return false;
    }
    return true;
  }

  private blocked(client: Duplex, most: number): boolean {
    const waiting = client.writableLength;
    return waiting > most || (waiting > 0 && this.holding.full());
  }
}
