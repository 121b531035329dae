// Relays a tunnel's destination → client direction (downloads, the bulk of
// egress traffic) with less CPU than stream piping: the destination socket
// reads into pooled 256 KiB buffers (Node's `onread`), each read is written
// straight to the client, and a buffer returns to the pool as soon as the
// kernel has taken its bytes. Reading pauses while more than 1 MiB waits for
// the client. Idle tunnels hold no buffer: one is taken only when data arrives.
import type net from 'node:net';
import type { Duplex } from 'node:stream';

const BUFFER_BYTES = 256 * 1024;
const MAX_QUEUED_BYTES = 1024 * 1024;
const POOL_SIZE = 32;
const pool: Buffer[] = [];

function release(buffer: Buffer): void {
  if (pool.length < POOL_SIZE) pool.push(buffer);
}

export class DownstreamRelay {
  private upstream?: net.Socket;
  private client?: Duplex;
  private early: Buffer[] = [];
  private paused = false;
  // the buffer handed out for the next read; a read that ends in EOF or EAGAIN
  // never reaches the callback, so it is handed out again or returned on close
  private lent?: Buffer;

  /** Pass as `onread` to net.connect for the destination socket. */
  readonly onread = {
    buffer: (): Buffer => (this.lent ??= pool.pop() ?? Buffer.allocUnsafe(BUFFER_BYTES)),
    callback: (bytes: number, buffer: Buffer): boolean => {
      this.lent = undefined;
      return this.relay(bytes, buffer);
    },
  };

  /** Returns the unused read buffer to the pool once the destination socket is closed. */
  closed(): void {
    if (this.lent) release(this.lent);
    this.lent = undefined;
  }

  /** Starts relaying to the client; bytes the destination sent before this (a banner) go first. */
  start(upstream: net.Socket, client: Duplex): void {
    this.upstream = upstream;
    this.client = client;
    for (const chunk of this.early) client.write(chunk);
    this.early = [];
    if (upstream.readableEnded) client.end();
    else upstream.once('end', () => client.end());
  }

  private relay(bytes: number, buffer: Buffer): boolean {
    const client = this.client;
    if (!client) {
      this.early.push(Buffer.from(buffer.subarray(0, bytes)));
      release(buffer);
      return true;
    }
    if (client.destroyed) return false;
    let queued = false;
    client.write(buffer.subarray(0, bytes), () => {
      if (queued) release(buffer);
      if (this.paused && client.writableLength <= MAX_QUEUED_BYTES / 2) {
        this.paused = false;
        this.upstream?.resume();
      }
    });
    // written synchronously: the kernel has the bytes and the buffer is free again
    if (client.writableLength === 0) release(buffer);
    else queued = true;
    if (client.writableLength > MAX_QUEUED_BYTES) {
      this.paused = true;
      this.upstream?.pause();
      return false;
    }
    return true;
  }
}
