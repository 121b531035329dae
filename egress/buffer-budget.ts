// What the proxy may hold in relay buffers, derived from its container's
// memory limit so that no client, and no set of clients, gets it OOM-killed:
//
//   budget        a quarter of the limit, for every client together
//   client share  an eighth of the budget (a thirty-second of the limit)
//   free pool     a sixteenth of the limit, buffers kept for reuse
//
// A client at its share, or every client together at the budget, gets no
// new connection (429 / 503), its tunnels stop reading from destinations
// once they have bytes queued, and reads shrink to the smallest buffer. The
// rest of the limit is for Node itself, the JavaScript heap of the
// connections, and the kernel's socket buffers, which the container's memory
// limit counts too.
export const MiB = 1024 * 1024;
/** The smallest read buffer: what an open tunnel always holds (see downstream-relay.ts). */
export const MIN_READ_BYTES = 16 * 1024;

export interface BufferLimits {
  memoryLimitBytes: number;
  totalBytes: number;
  perClientBytes: number;
  /** free buffers kept for reuse, per read size */
  poolBytesPerSize: number;
  /** tunnel limits that leave half the budget (and half of each share) for data beyond each tunnel's smallest read buffer */
  maxTunnels: number;
  maxTunnelsPerClient: number;
}

export function bufferLimits(memoryLimitBytes: number): BufferLimits {
  const totalBytes = Math.floor(memoryLimitBytes / 4);
  const perClientBytes = Math.floor(totalBytes / 8);
  return {
    memoryLimitBytes,
    totalBytes,
    perClientBytes,
    poolBytesPerSize: Math.floor(memoryLimitBytes / 64),
    maxTunnels: Math.max(1, Math.floor(totalBytes / (2 * MIN_READ_BYTES))),
    maxTunnelsPerClient: Math.max(1, Math.floor(perClientBytes / (2 * MIN_READ_BYTES))),
  };
}

export class BufferBudget {
  readonly limits: BufferLimits;
  private total = 0;
  private readonly byClient = new Map<string, number>();

  constructor(limits: BufferLimits) {
    this.limits = limits;
  }

  /** Bytes held for every client together. */
  held(): number {
    return this.total;
  }

  heldBy(client: string): number {
    return this.byClient.get(client) ?? 0;
  }

  /** Whether the client, or every client together, is at its limit. */
  full(client: string): boolean {
    return this.total >= this.limits.totalBytes || this.heldBy(client) >= this.limits.perClientBytes;
  }

  /** Bytes the client may still take before it, or the whole budget, is full. */
  room(client: string): number {
    return Math.min(this.limits.perClientBytes - this.heldBy(client), this.limits.totalBytes - this.total);
  }

  /** One tunnel's or request's part of its client's share; end() gives back whatever it still holds. */
  holding(client: string): Holding {
    return new Holding(this, client);
  }

  add(client: string, bytes: number): void {
    this.total += bytes;
    const left = this.heldBy(client) + bytes;
    if (left > 0) this.byClient.set(client, left);
    else this.byClient.delete(client);
  }
}

export class Holding {
  private readonly budget: BufferBudget;
  private readonly client: string;
  private bytes = 0;
  private ended = false;

  constructor(budget: BufferBudget, client: string) {
    this.budget = budget;
    this.client = client;
  }

  hold(bytes: number): void {
    if (this.ended) return;
    this.bytes += bytes;
    this.budget.add(this.client, bytes);
  }

  free(bytes: number): void {
    const n = Math.min(bytes, this.bytes);
    this.bytes -= n;
    this.budget.add(this.client, -n);
  }

  full(): boolean {
    return this.budget.full(this.client);
  }

  room(): number {
    return this.budget.room(this.client);
  }

  /** Closed: what is still held goes back (a write callback that never came cannot leak budget), and nothing more is counted. */
  end(): void {
    this.free(this.bytes);
    this.ended = true;
  }
}
