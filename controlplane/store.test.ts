import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256Hex } from './secrets.ts';
import { Store } from './store.ts';
import { manualClock, type ManualClock } from '../test/support/control-plane.ts';
import { DatabaseSync } from 'node:sqlite';

const MIN = 60_000;
const HOUR = 60 * MIN;

describe('Store', () => {
  let dir: string;
  let file: string;
  let clock: ManualClock;
  let store: Store;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rlmesh-store-'));
    file = join(dir, 'cp.db');
    clock = manualClock();
    store = new Store(file, clock);
  });
  afterEach(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps only hashes of tokens and credentials on disk', () => {
    const c = store.createCluster('lab');
    const { token } = store.issueJoinToken(c.id);
    expect(token).toMatch(/^rlm_jt_[0-9A-Za-z]{32,}$/);
    const r = store.redeemJoinToken(token, {}, true);
    if (!r.ok) throw new Error(r.problem);
    expect(r.credentials.control).toMatch(/^rlm_cc_[0-9A-Za-z]{32,}$/);
    expect(r.credentials.relay).toMatch(/^rlm_rs_[0-9A-Za-z]{32,}$/);
    store.close();
    const db = new DatabaseSync(file);
    const dump = JSON.stringify([
      db.prepare('SELECT * FROM join_tokens').all(),
      db.prepare('SELECT * FROM credentials').all(),
    ]);
    db.close();
    expect(dump).not.toContain(token);
    expect(dump).not.toContain(r.credentials.control);
    expect(dump).toContain(sha256Hex(token));
    store = new Store(file, clock);
  });

  it('a join token works once, for one hour', () => {
    const c = store.createCluster('lab');
    const a = store.issueJoinToken(c.id);
    expect(store.redeemJoinToken(a.token, {}, false).ok).toBe(true);
    expect(store.redeemJoinToken(a.token, {}, false)).toMatchObject({ ok: false, problem: 'token_used' });
    const b = store.issueJoinToken(c.id);
    clock.advance(61 * MIN);
    expect(store.redeemJoinToken(b.token, {}, false)).toMatchObject({ ok: false, problem: 'token_expired' });
    expect(store.redeemJoinToken('rlm_jt_' + 'x'.repeat(40), {}, false)).toMatchObject({ ok: false, problem: 'token_invalid' });
  });

  it('rotation keeps the old credential valid for 24 hours', () => {
    const c = store.createCluster('lab');
    const r = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false);
    if (!r.ok) throw new Error(r.problem);
    const old = r.credentials.control!;
    const rotated = store.rotateCredential(c.id, 'control');
    expect(store.authenticate('control', rotated.value)).toMatchObject({ ok: true, clusterId: c.id });
    clock.advance(24 * HOUR - MIN);
    expect(store.authenticate('control', old)).toMatchObject({ ok: true });
    clock.advance(2 * MIN);
    expect(store.authenticate('control', old)).toMatchObject({ ok: false, cause: 'expired' });
    expect(store.authenticate('control', rotated.value)).toMatchObject({ ok: true });
  });

  it('archive revokes tokens and credentials', () => {
    const c = store.createCluster('lab');
    const r = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false);
    if (!r.ok) throw new Error(r.problem);
    const spare = store.issueJoinToken(c.id);
    store.archiveCluster(c.id);
    expect(store.authenticate('control', r.credentials.control!)).toMatchObject({ ok: false, cause: 'archived' });
    expect(store.redeemJoinToken(spare.token, {}, false)).toMatchObject({ ok: false, problem: 'token_revoked' });
    expect(store.getCluster(c.id)?.status).toBe('Archived');
  });

  it('applies an update once and counts redeliveries', () => {
    const c = store.createCluster('lab');
    const ev = store.createEvaluation(c.id, { image: 'busybox' });
    const u = { id: 'u1', evaluationId: ev.id, phase: 'Running', reason: '', message: '', exitCode: null, pod: 'p', node: 'n', observedAt: null, sequence: 1 };
    expect(store.applyUpdate(c.id, u)).toBe('applied');
    expect(store.applyUpdate(c.id, u)).toBe('duplicate');
    expect(store.applyUpdate(c.id, { ...u, id: 'u0', phase: 'Pending', sequence: 0 })).toBe('applied');
    expect(store.getEvaluation(ev.id)?.phase).toBe('Running');
    expect(store.applyUpdate(c.id, { ...u, id: 'u2', phase: 'Succeeded', exitCode: 0, sequence: 2 })).toBe('applied');
    expect(store.getEvaluation(ev.id)).toMatchObject({ phase: 'Succeeded', result: { phase: 'Succeeded', exitCode: 0 } });
    expect(store.updateCounts(c.id)).toEqual({ distinct: 3, duplicatesReceived: 1 });
    expect(store.listUpdates(ev.id).map((x) => x.id)).toEqual(['u0', 'u1', 'u2']);
  });
});
