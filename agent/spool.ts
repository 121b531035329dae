// The spool: everything the agent owes the control plane goes first into an
// append-only journal on the spool PVC, fsync'd, before it is sent. Each record
// carries an id; the control plane acks ids it has stored and dedupes
// redeliveries by id, so a kill -9 at any moment neither loses nor doubles an
// update. Acked records are compacted away; the journal is bounded and refuses
// (never drops) records past its limit.
//
// Journal lines (one JSON object per line):
//   {"k":"u","id","e","s","f","m"}  an update: evaluation, sequence, fingerprint, message (proto JSON)
//   {"k":"a","ids":[...]}           ids the control plane acked
//   {"k":"s","e","s","f"}           last sequence + fingerprint of an evaluation (written by compaction)
//   {"k":"x","e"}                   forget an evaluation (it was deleted)
// The per-evaluation sequence and fingerprint survive restarts, so a restarted
// agent neither re-reports a status it already reported nor reuses a sequence.
import { randomUUID } from 'node:crypto';
import { mkdirSync, openSync, closeSync, fsyncSync, readFileSync, renameSync, writeFileSync, existsSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { errorFields } from '../lib/error-fields.ts';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export type SpooledUpdate = { id: string; evaluationId: string; sequence: number; fingerprint: string; message: Json };

type EvalState = { sequence: number; fingerprint: string };

type Line =
  | { k: 'u'; id: string; e: string; s: number; f: string; m: Json }
  | { k: 'a'; ids: string[] }
  | { k: 's'; e: string; s: number; f: string }
  | { k: 'x'; e: string };

export class SpoolFullError extends Error {
  constructor(bytes: number, max: number) {
    super(
      `the agent spool is full (${bytes} of ${max} bytes): the control plane has not acknowledged updates for a long time; ` +
        'new updates wait until the session delivers the spooled ones (check the agent log for session errors) or raise agent.spoolMaxBytes',
    );
  }
}

export type SpoolOptions = { maxBytes: number; log: Logger; now?: () => number };

const FILE = 'journal.ndjson';

export class Spool {
  private readonly path: string;
  private readonly dir: string;
  private readonly maxBytes: number;
  private readonly log: Logger;
  private readonly now: () => number;
  private fh!: FileHandle;
  private fileBytes = 0;
  private queuedBytes = 0;
  private ackedSinceCompaction = 0;
  private readonly pendingById = new Map<string, SpooledUpdate>();
  // durable per-evaluation state, and the state of records still being written
  private readonly states = new Map<string, EvalState>();
  private readonly inflight = new Map<string, EvalState>();
  // apply: the in-memory effect of a line, run once the line is durable
  private queue: { line: string; apply?: () => void; resolve: () => void }[] = [];
  private flushing: Promise<void> | undefined;
  private nearFullWarned = false;
  private readonly spaceListeners: (() => void)[] = [];
  private closed = false;

  private constructor(dir: string, opts: SpoolOptions) {
    this.dir = dir;
    this.path = join(dir, FILE);
    this.maxBytes = opts.maxBytes;
    this.log = opts.log;
    this.now = opts.now ?? Date.now;
  }

  static async open(dir: string, opts: SpoolOptions): Promise<Spool> {
    const spool = new Spool(dir, opts);
    await spool.load();
    return spool;
  }

  /** updates not yet acked, oldest first */
  pending(): SpooledUpdate[] {
    return [...this.pendingById.values()];
  }

  state(evaluationId: string): EvalState | undefined {
    return this.inflight.get(evaluationId) ?? this.states.get(evaluationId);
  }

  get bytes(): number {
    return this.fileBytes + this.queuedBytes;
  }

  get records(): number {
    return this.pendingById.size;
  }

  onSpace(cb: () => void): void {
    this.spaceListeners.push(cb);
  }

  /**
   * Records an update for an evaluation whose status now has `fingerprint`.
   * The in-memory state advances at once (so the next call sees the new
   * sequence); the promise resolves when the record is durable on disk.
   * Throws SpoolFullError (synchronously) when the journal is at its limit.
   */
  append(evaluationId: string, fingerprint: string, build: (id: string, sequence: number) => Json): Promise<SpooledUpdate> {
    const prev = this.state(evaluationId);
    // sequences stay monotonic even if the journal was lost (a reinstall): seed from the clock
    const sequence = Math.max((prev?.sequence ?? 0) + 1, this.now());
    const id = randomUUID();
    const message = build(id, sequence);
    const line = JSON.stringify({ k: 'u', id, e: evaluationId, s: sequence, f: fingerprint, m: message } satisfies Line) + '\n';
    const size = Buffer.byteLength(line);
    if (this.bytes + size > this.maxBytes) throw new SpoolFullError(this.bytes, this.maxBytes);
    const st = { sequence, fingerprint };
    this.inflight.set(evaluationId, st);
    const rec: SpooledUpdate = { id, evaluationId, sequence, fingerprint, message };
    this.warnIfNearFull(size);
    return this.write(line, () => {
      this.pendingById.set(id, rec);
      this.states.set(evaluationId, st);
      if (this.inflight.get(evaluationId) === st) this.inflight.delete(evaluationId);
    }).then(() => rec);
  }

  /** the control plane stored these ids: forget them (compacted away later); returns the records acked */
  async ack(ids: string[]): Promise<SpooledUpdate[]> {
    const acked = ids.map((id) => this.pendingById.get(id)).filter((r): r is SpooledUpdate => r !== undefined);
    if (acked.length === 0) return [];
    for (const r of acked) this.pendingById.delete(r.id);
    this.ackedSinceCompaction += acked.length;
    await this.write(JSON.stringify({ k: 'a', ids: acked.map((r) => r.id) } satisfies Line) + '\n');
    for (const cb of this.spaceListeners) cb();
    return acked;
  }

  /** the evaluation is gone: drop its sequence state (pending updates stay until acked) */
  async forget(evaluationId: string): Promise<void> {
    if (!this.states.has(evaluationId) && !this.inflight.has(evaluationId)) return;
    this.inflight.delete(evaluationId);
    await this.write(JSON.stringify({ k: 'x', e: evaluationId } satisfies Line) + '\n', () => {
      if (!this.inflight.has(evaluationId)) this.states.delete(evaluationId);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.flushing;
    await this.fh.close();
  }

  private warnIfNearFull(adding: number) {
    const ratio = (this.bytes + adding) / this.maxBytes;
    if (ratio >= 0.8 && !this.nearFullWarned) {
      this.nearFullWarned = true;
      this.log.warn(
        { spoolBytes: this.bytes, spoolMaxBytes: this.maxBytes, pendingUpdates: this.pendingById.size },
        'the agent spool is over 80% full: the control plane has not acknowledged updates; check the session (agent log) — at 100% new updates wait until spooled ones are delivered',
      );
    } else if (ratio < 0.7) {
      this.nearFullWarned = false;
    }
  }

  private write(line: string, apply?: () => void): Promise<void> {
    if (this.closed) return Promise.reject(new Error('spool closed'));
    this.queuedBytes += Buffer.byteLength(line);
    return new Promise((resolve) => {
      this.queue.push({ line, apply, resolve });
      this.flushing ??= this.flush().finally(() => (this.flushing = undefined));
    });
  }

  // Group commit: everything queued while the previous fsync ran goes out in one
  // write + fsync. Writes are positional at the known-good end, so a failed or
  // torn write is overwritten by the retry instead of corrupting the next line.
  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0);
      const buf = Buffer.from(batch.map((b) => b.line).join(''));
      for (;;) {
        try {
          await this.fh.write(buf, 0, buf.length, this.fileBytes);
          await this.fh.datasync();
          break;
        } catch (err) {
          this.log.error(
            { ...errorFields(err), path: this.path },
            'cannot write the agent spool (disk full or the volume is failing); retrying in 1 s — check the spool PVC',
          );
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
      this.fileBytes += buf.length;
      this.queuedBytes -= buf.length;
      for (const b of batch) b.apply?.();
      const acked = this.ackedSinceCompaction;
      if (acked >= 1000 || (acked > 0 && this.fileBytes > this.maxBytes / 2) || (this.pendingById.size === 0 && this.fileBytes > 1024 * 1024)) {
        await this.compact();
      }
      for (const b of batch) b.resolve();
    }
  }

  private snapshotLines(): string {
    const lines: string[] = [];
    for (const [e, st] of this.states) lines.push(JSON.stringify({ k: 's', e, s: st.sequence, f: st.fingerprint } satisfies Line));
    for (const r of this.pendingById.values()) {
      lines.push(JSON.stringify({ k: 'u', id: r.id, e: r.evaluationId, s: r.sequence, f: r.fingerprint, m: r.message } satisfies Line));
    }
    return lines.length ? lines.join('\n') + '\n' : '';
  }

  // Rewrites the journal as a snapshot: write a temp file, fsync, rename over
  // the journal, fsync the directory. A crash at any point leaves either the
  // old or the new journal, both complete.
  private async compact(): Promise<void> {
    const content = this.snapshotLines();
    const tmp = this.path + '.tmp';
    const t = await open(tmp, 'w');
    try {
      await t.write(content);
      await t.datasync();
    } finally {
      await t.close();
    }
    await this.fh.close();
    renameSync(tmp, this.path);
    fsyncDir(this.dir);
    this.fh = await open(this.path, 'r+');
    this.fileBytes = Buffer.byteLength(content);
    this.ackedSinceCompaction = 0;
    for (const cb of this.spaceListeners) cb();
  }

  private async load(): Promise<void> {
    mkdirSync(this.dir, { recursive: true });
    if (!existsSync(this.path)) {
      writeFileSync(this.path, '');
      fsyncDir(this.dir);
    }
    const raw = readFileSync(this.path, 'utf8');
    const lines = raw.split('\n');
    const tail = lines.pop();
    if (tail) this.log.warn({ path: this.path, bytes: Buffer.byteLength(tail) }, 'dropped a torn last line in the agent spool (the agent was killed mid-write; that record was never sent)');
    let bad = 0;
    for (const text of lines) {
      if (!text) continue;
      let l: Line;
      try {
        l = JSON.parse(text) as Line;
      } catch {
        bad++;
        continue;
      }
      if (l.k === 'u') {
        this.pendingById.set(l.id, { id: l.id, evaluationId: l.e, sequence: l.s, fingerprint: l.f, message: l.m });
        const st = this.states.get(l.e);
        if (!st || st.sequence <= l.s) this.states.set(l.e, { sequence: l.s, fingerprint: l.f });
      } else if (l.k === 'a') {
        for (const id of l.ids) this.pendingById.delete(id);
      } else if (l.k === 's') {
        this.states.set(l.e, { sequence: l.s, fingerprint: l.f });
      } else if (l.k === 'x') {
        this.states.delete(l.e);
      }
    }
    if (bad) this.log.warn({ path: this.path, lines: bad }, 'skipped unreadable lines in the agent spool');
    this.fh = await open(this.path, 'r+');
    this.fileBytes = Buffer.byteLength(raw) - Buffer.byteLength(tail ?? '');
    await this.compact();
    this.log.info({ pendingUpdates: this.pendingById.size, evaluations: this.states.size, spoolBytes: this.fileBytes }, 'agent spool loaded');
  }
}

function fsyncDir(dir: string) {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
