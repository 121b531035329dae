// The agents connected right now, one session per cluster, so that the admin
// API can push a rotation, an assignment or a cancellation into the stream at
// once, and archive can close it.
import type { ControlMessage } from '../lib/gen/rlmesh/v1/session_pb.ts';

/** An async queue the session's response stream drains; fail() ends the stream with an error. */
export class Outbox<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: (() => void) | undefined;
  private done = false;
  private error: unknown;

  push(item: T): void {
    if (this.done) return;
    this.items.push(item);
    this.wake();
  }

  close(): void {
    this.done = true;
    this.wake();
  }

  fail(error: unknown): void {
    if (this.done) return;
    this.error = error;
    this.close();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift()!;
        continue;
      }
      if (this.done) {
        if (this.error !== undefined) throw this.error;
        return;
      }
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}

export type LiveSession = {
  id: string;
  clusterId: string;
  outbox: Outbox<ControlMessage>;
  openedAt: Date;
  /**
   * opened with the cluster's current control credential: only such a session is sent credential rotations and
   * assignments that carry secrets (S3 keys, presigned URLs, secret environment values)
   */
  currentCredential: boolean;
};

export class LiveSessions {
  private readonly byCluster = new Map<string, LiveSession>();

  /** Registers a session; a previous session of the same cluster is closed with `replaced`. */
  open(session: LiveSession, replaced: () => unknown): void {
    const previous = this.byCluster.get(session.clusterId);
    this.byCluster.set(session.clusterId, session);
    previous?.outbox.fail(replaced());
  }

  /** Returns true when this was the cluster's current session (the cluster is now disconnected). */
  release(session: LiveSession): boolean {
    if (this.byCluster.get(session.clusterId) !== session) return false;
    this.byCluster.delete(session.clusterId);
    return true;
  }

  get(clusterId: string): LiveSession | undefined {
    return this.byCluster.get(clusterId);
  }

  send(clusterId: string, message: ControlMessage): boolean {
    const s = this.byCluster.get(clusterId);
    s?.outbox.push(message);
    return s !== undefined;
  }

  /** To every live session; how many. */
  sendAll(message: ControlMessage): number {
    for (const s of this.byCluster.values()) s.outbox.push(message);
    return this.byCluster.size;
  }

  /** A credential rotation, to the cluster's session only if it may receive rotations; true when sent. */
  sendRotation(clusterId: string, message: ControlMessage): boolean {
    const s = this.byCluster.get(clusterId);
    if (!s?.currentCredential) return false;
    s.outbox.push(message);
    return true;
  }

  closeAll(error: unknown): void {
    for (const s of this.byCluster.values()) s.outbox.fail(error);
  }
}
