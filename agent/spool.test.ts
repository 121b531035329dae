import { appendFileSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Spool, SpoolFullError } from './spool.ts';
import { tempDir } from '../test/support/temp.ts';

function logCapture() {
  const lines: { msg: string; level: number }[] = [];
  const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { log, lines };
}

const dir = () => tempDir('spool-');
const msg = (id: string, seq: number, phase: string) => ({ id, evaluationId: 'e', sequence: String(seq), phase });

describe('spool', () => {
  it('keeps unacked updates across a reopen and forgets acked ones', async () => {
    const d = dir();
    const { log } = logCapture();
    const s = await Spool.open(d, { maxBytes: 1 << 20, log });
    const a = await s.append('e1', 'Running', (id, seq) => msg(id, seq, 'Running'));
    const b = await s.append('e2', 'Pending', (id, seq) => msg(id, seq, 'Pending'));
    const c = await s.append('e1', 'Succeeded', (id, seq) => msg(id, seq, 'Succeeded'));
    expect(c.sequence).toBeGreaterThan(a.sequence);
    await s.ack([a.id, 'unknown-id']);
    await s.close();

    const r = await Spool.open(d, { maxBytes: 1 << 20, log });
    expect(r.pending().map((p) => p.id)).toEqual([b.id, c.id]);
    expect(r.pending()[1]!.message).toMatchObject({ phase: 'Succeeded', id: c.id });
    // the last reported status and sequence survive, so a restart re-reports nothing and never reuses a sequence
    expect(r.state('e1')).toEqual({ sequence: c.sequence, fingerprint: 'Succeeded' });
    const d2 = await r.append('e1', 'Succeeded+1', (id, seq) => msg(id, seq, 'x'));
    expect(d2.sequence).toBeGreaterThan(c.sequence);
    await r.close();
  });

  it('drops a torn last line (killed mid-write) and keeps every complete record', async () => {
    const d = dir();
    const { log, lines } = logCapture();
    const s = await Spool.open(d, { maxBytes: 1 << 20, log });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await s.append(`e${i}`, 'Running', (id, seq) => msg(id, seq, 'Running'))).id);
    await s.close();
    // what a kill -9 in the middle of a write leaves behind: a partial JSON line with no newline
    appendFileSync(join(d, 'journal.ndjson'), '{"k":"u","id":"torn","e":"e9","s":1,"f":"Run');

    const r = await Spool.open(d, { maxBytes: 1 << 20, log });
    expect(r.pending().map((p) => p.id)).toEqual(ids);
    expect(r.state('e9')).toBeUndefined();
    expect(lines.some((l) => /torn last line/.test(l.msg))).toBe(true);
    // the journal is clean again: appending after recovery yields parseable lines only
    await r.append('e9', 'Running', (id, seq) => msg(id, seq, 'Running'));
    await r.close();
    for (const line of readFileSync(join(d, 'journal.ndjson'), 'utf8').trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
    const again = await Spool.open(d, { maxBytes: 1 << 20, log });
    expect(again.pending()).toHaveLength(6);
    await again.close();
  });

  it('refuses (never drops) past its limit, says so once near full, and frees space on ack', async () => {
    const d = dir();
    const { log, lines } = logCapture();
    const s = await Spool.open(d, { maxBytes: 4096, log });
    const held: string[] = [];
    let refused: unknown;
    for (let i = 0; i < 100; i++) {
      try {
        held.push((await s.append(`e${i}`, 'Running', (id, seq) => msg(id, seq, 'Running'))).id);
      } catch (err) {
        refused = err;
        break;
      }
    }
    expect(refused).toBeInstanceOf(SpoolFullError);
    expect((refused as Error).message).toMatch(/spool is full .* raise agent.spoolMaxBytes/);
    expect(lines.filter((l) => /over 80% full/.test(l.msg))).toHaveLength(1);
    expect(s.pending()).toHaveLength(held.length);
    let freed = 0;
    s.onSpace(() => freed++);
    await s.ack(held);
    expect(freed).toBeGreaterThan(0);
    expect(s.pending()).toHaveLength(0);
    await s.append('late', 'Running', (id, seq) => msg(id, seq, 'Running'));
    await s.close();
  });

  it('compacts acked records away', async () => {
    const d = dir();
    const { log } = logCapture();
    const s = await Spool.open(d, { maxBytes: 64 << 20, log });
    const all = await Promise.all(
      Array.from({ length: 1500 }, (_, i) => s.append(`e${i % 10}`, `p${i}`, (id, seq) => msg(id, seq, `p${i}`))),
    );
    const before = statSync(join(d, 'journal.ndjson')).size;
    await s.ack(all.slice(0, 1490).map((r) => r.id));
    await s.forget('e0');
    const after = statSync(join(d, 'journal.ndjson')).size;
    expect(after).toBeLessThan(before / 10);
    expect(s.pending()).toHaveLength(10);
    await s.close();
    const r = await Spool.open(d, { maxBytes: 64 << 20, log });
    expect(r.pending().map((p) => p.id)).toEqual(all.slice(1490).map((x) => x.id));
    expect(r.state('e3')!.fingerprint).toBe('p1493');
    await r.close();
  });
});
