import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
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

  it('rotation keeps the old credential valid for 24 hours while the new one is unused', () => {
    const c = store.createCluster('lab');
    const r = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false);
    if (!r.ok) throw new Error(r.problem);
    const old = r.credentials.control!;
    const oldPull = r.credentials.pull!;
    const rotated = store.rotateCredential(c.id, 'control');
    const rotatedPull = store.rotateCredential(c.id, 'pull');
    clock.advance(24 * HOUR - MIN);
    expect(store.authenticate('control', old)).toMatchObject({ ok: true, current: false });
    expect(store.authenticate('pull', rotatedPull.value)).toMatchObject({ ok: true, current: true });
    expect(store.authenticate('pull', oldPull)).toMatchObject({ ok: true, current: false });
    clock.advance(2 * MIN);
    expect(store.authenticate('control', old)).toMatchObject({ ok: false, cause: 'expired' });
    expect(store.authenticate('pull', oldPull)).toMatchObject({ ok: false, cause: 'expired' });
    expect(store.authenticate('control', rotated.value)).toMatchObject({ ok: true, current: true });
  });

  // The overlap used to end early once the agent used the new control value; with Secrets the operator delivers, a
  // GitOps sync may restore the old value within the overlap, so the old value now keeps its whole 24 hours.
  it('a superseded control credential stays valid for the whole overlap after the agent used the new one, then is refused as expired', () => {
    const c = store.createCluster('lab');
    const r = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false);
    if (!r.ok) throw new Error(r.problem);
    expect(store.authenticate('control', r.credentials.control!)).toMatchObject({ ok: true, current: true });
    const first = store.rotateCredential(c.id, 'control');
    const second = store.rotateCredential(c.id, 'control'); // first is superseded without ever being used
    const pull = store.rotateCredential(c.id, 'pull');
    clock.advance(MIN);
    expect(store.authenticate('control', second.value)).toMatchObject({ ok: true, current: true });
    expect(store.undeliveredRotations(c.id).map((x) => x.purpose)).toEqual(['pull']);
    // back and forth between the old and the new value, as a GitOps sync that restores the old one would
    clock.advance(23 * HOUR);
    for (const old of [r.credentials.control!, first.value]) expect(store.authenticate('control', old)).toMatchObject({ ok: true, current: false, clusterId: c.id });
    expect(store.authenticate('control', second.value)).toMatchObject({ ok: true, current: true });
    expect(store.authenticate('control', r.credentials.control!)).toMatchObject({ ok: true, current: false });
    expect(store.authenticate('pull', r.credentials.pull!)).toMatchObject({ ok: true, current: false });
    expect(store.credentialSummary(c.id).map((k) => [k.purpose, k.current])).toEqual([['control', false], ['pull', false], ['control', false], ['control', true], ['pull', true]]);
    // the overlap ends 24 hours after each rotation: the old values are refused as expired, naming when it ended
    clock.advance(HOUR);
    for (const old of [r.credentials.control!, first.value]) {
      expect(store.authenticate('control', old)).toMatchObject({ ok: false, cause: 'expired', clusterId: c.id, validUntil: expect.any(String) });
    }
    expect(store.authenticate('pull', r.credentials.pull!)).toMatchObject({ ok: false, cause: 'expired' });
    expect(store.authenticate('control', second.value)).toMatchObject({ ok: true, current: true });
    expect(store.authenticate('pull', pull.value)).toMatchObject({ ok: true, current: true });
    expect(store.credentialSummary(c.id).map((k) => [k.purpose, k.current])).toEqual([['control', true], ['pull', true]]);
  });

  it('a rejoin revokes every earlier control, pull and relay credential once the agent authenticates with the new control credential', () => {
    const c = store.createCluster('lab');
    const first = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, true);
    if (!first.ok) throw new Error(first.problem);
    expect(store.authenticate('control', first.credentials.control!)).toMatchObject({ ok: true });
    const inOverlap = store.rotateCredential(c.id, 'pull'); // the first pull credential is now in a rotation overlap
    const second = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false); // observability off this time
    if (!second.ok) throw new Error(second.problem);

    // until the agent confirms, the old ones keep working (it may not have written the new Secrets yet)
    expect(store.authenticate('control', first.credentials.control!)).toMatchObject({ ok: true });
    expect(store.authenticate('pull', inOverlap.value)).toMatchObject({ ok: true });
    expect(store.authenticate('relay', first.credentials.relay!)).toMatchObject({ ok: true });

    // the agent's session on the new control credential confirms them: everything older is revoked at once
    clock.advance(MIN);
    expect(store.authenticate('control', second.credentials.control!)).toMatchObject({ ok: true, clusterId: c.id });
    for (const [purpose, value] of [['control', first.credentials.control!], ['pull', first.credentials.pull!], ['pull', inOverlap.value], ['relay', first.credentials.relay!]] as const) {
      expect(store.authenticate(purpose, value), `${purpose} ${value.slice(0, 7)}`).toMatchObject({ ok: false, cause: 'revoked', reason: 'rejoined', clusterId: c.id });
    }
    expect(store.authenticate('pull', second.credentials.pull!)).toMatchObject({ ok: true });
    expect(store.credentialSummary(c.id).map((k) => [k.purpose, k.current])).toEqual([['control', true], ['pull', true]]);

    // a rotation after that keeps its whole overlap, the new value used or not
    const rotated = store.rotateCredential(c.id, 'control');
    clock.advance(23 * HOUR);
    expect(store.authenticate('control', second.credentials.control!)).toMatchObject({ ok: true });
    expect(store.authenticate('control', rotated.value)).toMatchObject({ ok: true });
    expect(store.authenticate('control', second.credentials.control!)).toMatchObject({ ok: true, current: false });
    clock.advance(HOUR);
    expect(store.authenticate('control', second.credentials.control!)).toMatchObject({ ok: false, cause: 'expired' });
  });

  it('a rejoin confirmed through a control credential rotated from it revokes the same', () => {
    const c = store.createCluster('lab');
    const first = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false);
    const second = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false);
    if (!first.ok || !second.ok) throw new Error('join failed');
    const rotated = store.rotateCredential(c.id, 'control');
    expect(store.authenticate('control', rotated.value)).toMatchObject({ ok: true });
    expect(store.authenticate('control', first.credentials.control!)).toMatchObject({ ok: false, cause: 'revoked', reason: 'rejoined' });
    // the join's own control credential was superseded by that rotation: it keeps the rotation's overlap
    expect(store.authenticate('control', second.credentials.control!)).toMatchObject({ ok: true, current: false });
  });

  it('a data file from before confirmations existed keeps its credentials', () => {
    store.close();
    const old = join(dir, 'old.db');
    const db = new DatabaseSync(old);
    db.exec(`CREATE TABLE credentials (
      id INTEGER PRIMARY KEY AUTOINCREMENT, cluster_id TEXT NOT NULL, purpose TEXT NOT NULL, hash TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL, superseded_at TEXT, valid_until TEXT, revoked_at TEXT, undelivered_value TEXT)`);
    db.close();
    store = new Store(old, clock);
    const c = store.createCluster('lab');
    const r = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false);
    if (!r.ok) throw new Error(r.problem);
    expect(store.authenticate('control', r.credentials.control!)).toMatchObject({ ok: true });
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

  it('keeps S3 secret keys out of the database: sealed apart from the spec until the assignment is acknowledged, then dropped', () => {
    const c = store.createCluster('lab');
    const secretKey = `s3-secret-${'k'.repeat(30)}`;
    const sessionToken = `s3-session-${'t'.repeat(30)}`;
    const spec = {
      image: 'x:1',
      artifacts: [
        { name: 'a', source: { s3: { bucket: 'b', key: 'k', accessKeyId: 'AKIA1', secretAccessKey: secretKey, sessionToken } } },
        { name: 'b', source: { s3: { bucket: 'b', key: 'k2', access_key_id: 'AKIA2', secret_access_key: `${secretKey}-2` } } },
      ],
    };
    const ev = store.createEvaluation(c.id, spec);
    const files = () => readdirSync(dir).filter((f) => f.startsWith('cp.db')).map((f) => readFileSync(join(dir, f)).toString('latin1')).join('');
    for (const v of [secretKey, sessionToken, `${secretKey}-2`]) expect(files()).not.toContain(v);
    expect(ev.spec).toEqual({
      image: 'x:1',
      artifacts: [
        { name: 'a', source: { s3: { bucket: 'b', key: 'k', accessKeyId: 'AKIA1', secretAccessKey: '[redacted]', sessionToken: '[redacted]' } } },
        { name: 'b', source: { s3: { bucket: 'b', key: 'k2', access_key_id: 'AKIA2', secret_access_key: '[redacted]' } } },
      ],
    });
    expect(store.assignmentSpec(ev)).toEqual(spec);
    // the key that seals them is a file of its own, readable only by the control plane's user
    expect(statSync(join(dir, 'secrets.key')).mode & 0o077).toBe(0);

    // survives a restart (the sealing key is kept), and is dropped once the cluster acknowledged the assignment
    store.close();
    store = new Store(file, clock);
    expect(store.assignmentSpec(store.getEvaluation(ev.id)!)).toEqual(spec);
    store.applyUpdate(c.id, { id: 'u1', evaluationId: ev.id, phase: 'Pending', reason: '', message: '', exitCode: null, pod: '', node: '', observedAt: null, sequence: 1 });
    expect(store.assignmentSpec(store.getEvaluation(ev.id)!)).toEqual(ev.spec);
  });

  it('keeps secret environment values out of the database: the names stay in the spec, the values are sealed until the assignment is acknowledged', () => {
    const c = store.createCluster('lab');
    const apiKey = `api-key-${'v'.repeat(30)}`;
    const spec = { image: 'x:1', env: { SEED: '7' }, secretEnv: { API_KEY: apiKey, HF_TOKEN: `${apiKey}-hf` } };
    const ev = store.createEvaluation(c.id, spec);
    const files = () => readdirSync(dir).filter((f) => f.startsWith('cp.db')).map((f) => readFileSync(join(dir, f)).toString('latin1')).join('');
    expect(files()).not.toContain(apiKey);
    expect(ev.spec).toEqual({ image: 'x:1', env: { SEED: '7' }, secretEnv: { API_KEY: '[redacted]', HF_TOKEN: '[redacted]' } });
    expect(store.carriesSecrets(ev.id)).toBe(true);
    expect(store.assignmentSpec(ev)).toEqual(spec);
    store.applyUpdate(c.id, { id: 'u1', evaluationId: ev.id, phase: 'Pending', reason: '', message: '', exitCode: null, pod: '', node: '', observedAt: null, sequence: 1 });
    expect(store.carriesSecrets(ev.id)).toBe(false);
    expect(store.assignmentSpec(store.getEvaluation(ev.id)!)).toEqual(ev.spec);
    expect(files()).not.toContain(apiKey);
  });

  it('keeps an undelivered rotation sealed on disk: no plaintext credential in the database or its WAL, and the same value after a restart', () => {
    const c = store.createCluster('lab');
    const r = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, true);
    if (!r.ok) throw new Error(r.problem);
    const rotated = (['control', 'pull', 'relay'] as const).map((p) => store.rotateCredential(c.id, p).value);
    const files = () => readdirSync(dir).filter((f) => f.startsWith('cp.db')).map((f) => readFileSync(join(dir, f)).toString('latin1')).join('');
    for (const v of rotated) expect(files()).not.toContain(v);
    const db = new DatabaseSync(file, { readOnly: true });
    const stored = (db.prepare('SELECT undelivered_value FROM credentials WHERE undelivered_value IS NOT NULL').all() as { undelivered_value: string }[]).map((x) => x.undelivered_value);
    db.close();
    expect(stored).toHaveLength(3);
    for (const s of stored) expect(s).toMatch(/^v1:[A-Za-z0-9+/=]+$/);
    expect(store.undeliveredRotations(c.id).map((x) => x.value).sort()).toEqual([...rotated].sort());

    store.close();
    store = new Store(file, clock);
    expect(store.undeliveredRotations(c.id).map((x) => x.value).sort()).toEqual([...rotated].sort());
    for (const v of rotated) expect(files()).not.toContain(v);
  });

  it('seals the undelivered rotations of a data file from before they were sealed, leaving none in it', () => {
    const c = store.createCluster('lab');
    const r = store.redeemJoinToken(store.issueJoinToken(c.id).token, {}, false);
    if (!r.ok) throw new Error(r.problem);
    store.rotateCredential(c.id, 'pull');
    store.close();
    const legacy = `rlm_rp_${'L'.repeat(40)}`;
    const db = new DatabaseSync(file);
    db.prepare("UPDATE credentials SET undelivered_value = ? WHERE purpose = 'pull' AND undelivered_value IS NOT NULL").run(legacy);
    db.close();
    store = new Store(file, clock);
    const files = readdirSync(dir).filter((f) => f.startsWith('cp.db')).map((f) => readFileSync(join(dir, f)).toString('latin1')).join('');
    expect(files).not.toContain(legacy);
    expect(store.undeliveredRotations(c.id)).toMatchObject([{ purpose: 'pull', value: legacy }]);
  });

  it('seals the S3 secret keys of a data file from before sealing, leaving none in it', () => {
    const c = store.createCluster('lab');
    const ev = store.createEvaluation(c.id, { image: 'x:1' });
    store.close();
    const secretKey = `legacy-secret-${'q'.repeat(30)}`;
    const spec = { image: 'x:1', artifacts: [{ name: 'a', source: { s3: { bucket: 'b', key: 'k', accessKeyId: 'AK', secretAccessKey: secretKey } } }] };
    const db = new DatabaseSync(file);
    db.prepare('UPDATE evaluations SET spec = ?, sealed_secrets = NULL WHERE id = ?').run(JSON.stringify(spec), ev.id);
    db.close();
    store = new Store(file, clock);
    const files = readdirSync(dir).filter((f) => f.startsWith('cp.db')).map((f) => readFileSync(join(dir, f)).toString('latin1')).join('');
    expect(files).not.toContain(secretKey);
    expect(store.assignmentSpec(store.getEvaluation(ev.id)!)).toEqual(spec);
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

  it('an update is scoped by its cluster: another cluster can neither write into an evaluation nor shadow an update id', () => {
    const a = store.createCluster('a');
    const b = store.createCluster('b');
    const ev = store.createEvaluation(a.id, { image: 'busybox' });
    const u = { id: 'u1', evaluationId: ev.id, phase: 'Running', reason: '', message: '', exitCode: null, pod: 'p', node: 'n', observedAt: null, sequence: 1 };
    // B names A's evaluation: refused, nothing stored, A's evaluation untouched
    expect(store.applyUpdate(b.id, { ...u, phase: 'Failed', sequence: 9 })).toEqual({ refused: 'other_cluster', ownerClusterId: a.id });
    expect(store.getEvaluation(ev.id)).toMatchObject({ clusterId: a.id, phase: 'Submitted', acknowledgedAt: null });
    expect(store.listUpdates(ev.id)).toEqual([]);
    expect(store.updateCounts(b.id)).toEqual({ distinct: 0, duplicatesReceived: 0 });
    // B's update u1 for its own (never submitted) evaluation does not make A's u1 a duplicate
    expect(store.applyUpdate(b.id, { ...u, evaluationId: 'ev-local-b' })).toBe('applied');
    expect(store.applyUpdate(a.id, u)).toBe('applied');
    expect(store.getEvaluation(ev.id)).toMatchObject({ phase: 'Running' });
    expect(store.getEvaluation('ev-local-b')).toMatchObject({ clusterId: b.id, spec: null, phase: 'Running' });
    // a never-submitted evaluation belongs to the cluster that reported it first
    expect(store.applyUpdate(a.id, { ...u, id: 'u2', evaluationId: 'ev-local-b', phase: 'Failed', sequence: 2 })).toEqual({ refused: 'other_cluster', ownerClusterId: b.id });
    expect(store.getEvaluation('ev-local-b')).toMatchObject({ phase: 'Running' });
    // Hello's pending ids: only the cluster's own stored updates count
    expect(store.knownUpdateIds(a.id, ['u1', 'u2'])).toEqual(['u1']);
    store.applyUpdate(b.id, { ...u, evaluationId: 'ev-local-b' });
    expect(store.updateCounts(b.id)).toEqual({ distinct: 1, duplicatesReceived: 1 });
    expect(store.updateCounts(a.id)).toEqual({ distinct: 1, duplicatesReceived: 0 });
  });

  it('a data file whose updates were keyed by id alone is migrated to (cluster, id), its updates kept', () => {
    store.close();
    const old = join(dir, 'old-updates.db');
    const db = new DatabaseSync(old);
    db.exec(`CREATE TABLE evaluation_updates (
      id TEXT PRIMARY KEY, evaluation_id TEXT NOT NULL, cluster_id TEXT NOT NULL, sequence INTEGER NOT NULL,
      phase TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL, exit_code INTEGER, pod TEXT NOT NULL,
      node TEXT NOT NULL, observed_at TEXT, received_at TEXT NOT NULL, duplicates INTEGER NOT NULL DEFAULT 0);
      CREATE INDEX evaluation_updates_evaluation ON evaluation_updates (evaluation_id, sequence);
      CREATE INDEX evaluation_updates_cluster ON evaluation_updates (cluster_id);
      INSERT INTO evaluation_updates VALUES ('u1', 'ev-x', 'c_a', 1, 'Running', '', '', NULL, 'p', 'n', NULL, '2026-01-01T00:00:00.000Z', 2);`);
    db.close();
    store = new Store(old, clock);
    expect(store.listUpdates('ev-x')).toMatchObject([{ id: 'u1', clusterId: 'c_a', duplicates: 2 }]);
    expect(store.knownUpdateIds('c_a', ['u1'])).toEqual(['u1']);
    expect(store.applyUpdate('c_b', { id: 'u1', evaluationId: 'ev-y', phase: 'Running', reason: '', message: '', exitCode: null, pod: '', node: '', observedAt: null, sequence: 1 })).toBe('applied');
    store.close();
    const check = new DatabaseSync(old, { readOnly: true });
    const key = (check.prepare('PRAGMA table_info(evaluation_updates)').all() as { name: string; pk: number }[]).filter((c) => c.pk > 0).map((c) => c.name);
    const tables = (check.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'index') AND name LIKE 'evaluation_updates%' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
    check.close();
    expect(key).toEqual(['id', 'cluster_id']);
    expect(tables).toEqual(['evaluation_updates', 'evaluation_updates_cluster', 'evaluation_updates_evaluation']);
    store = new Store(old, clock);
  });
});
