// Everything the control plane remembers, in one SQLite file (node:sqlite), so
// a restart loses nothing: clusters, join tokens, credentials, evaluations and
// the evaluation updates agents delivered. Tokens and credentials are stored
// as SHA-256 hashes only; the one exception is a rotated credential the agent
// has not yet confirmed, kept sealed (secrets.ts) until it says CredentialRotated
// so it can be re-sent after a reconnect or a restart. The S3 secret keys,
// session tokens, presigned URLs and secret environment values of a submitted
// evaluation are not part of its stored spec: they are sealed (secrets.ts, key
// file beside the database) until the cluster acknowledges the assignment, then
// dropped.
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { mint, PREFIX, randomBase62, Sealer, sha256Hex } from './secrets.ts';
import type { CredentialPurpose } from '../lib/credential-secret.ts';

export interface Clock {
  now(): Date;
}
export const systemClock: Clock = { now: () => new Date() };

export const JOIN_TOKEN_TTL_MS = 60 * 60 * 1000;
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

export type ClusterStatus = 'Pending' | 'Connected' | 'Disconnected' | 'Archived';
export const TERMINAL_PHASES = new Set(['Succeeded', 'Failed', 'Cancelled']);

export type Cluster = {
  id: string;
  name: string;
  status: ClusterStatus;
  createdAt: string;
  joinedAt: string | null;
  lastSeenAt: string | null;
  archivedAt: string | null;
  facts: Record<string, unknown> | null;
  agentVersion: string | null;
  kubernetesVersion: string | null;
  /** set while the cluster drains: no new assignments reach it */
  drainingSince: string | null;
  /** set while the cluster's operator drains it on the cluster's side (rlmesh drain, as the agent reports it): no new assignments reach it either */
  operatorDrainingSince: string | null;
};

export type NodeReportRecord = { report: unknown; receivedAt: string; received: number };

export type JoinTokenProblem = 'token_invalid' | 'token_used' | 'token_expired' | 'token_revoked';
export type RedeemResult =
  | { ok: true; cluster: Cluster; credentials: Partial<Record<CredentialPurpose, string>> }
  | { ok: false; problem: JoinTokenProblem; clusterId?: string; at?: string };

export type AuthResult =
  /** current: the credential is the cluster's newest of its purpose (false: superseded by a rotation, within its overlap) */
  | { ok: true; clusterId: string; credentialId: number; current: boolean }
  | { ok: false; cause: 'unknown' }
  | { ok: false; cause: 'archived'; clusterId: string; at: string }
  | { ok: false; cause: 'revoked'; clusterId: string; at: string; reason: RevokeReason }
  | { ok: false; cause: 'expired'; clusterId: string; supersededAt: string; validUntil: string };

/**
 * Why a credential was revoked: the cluster was archived; it joined again and its agent confirmed the new credentials;
 * or (control only, rows written by control planes before the overlap lasted its whole 24 hours) a rotation replaced
 * it and the agent authenticated with the new value.
 */
export type RevokeReason = 'archived' | 'rejoined' | 'rotated';

export type CredentialSummary = { purpose: CredentialPurpose; createdAt: string; validUntil: string | null; current: boolean };

export type Evaluation = {
  id: string;
  clusterId: string;
  spec: Record<string, unknown> | null; // null: the cluster reported an evaluation this control plane never submitted
  phase: string;
  result: Record<string, unknown> | null;
  createdAt: string;
  updatedAt: string;
  firstAssignedAt: string | null;
  assignmentDeliveries: number;
  acknowledgedAt: string | null;
  cancelRequestedAt: string | null;
  cancelReason: string | null;
};

export type UpdateInput = {
  id: string;
  evaluationId: string;
  phase: string;
  reason: string;
  message: string;
  exitCode: number | null;
  pod: string;
  node: string;
  observedAt: string | null;
  sequence: number;
};
/**
 * What applyUpdate did: stored and applied, a redelivery of an update this cluster already sent,
 * or refused because the evaluation belongs to another cluster (nothing stored, nothing changed).
 */
export type UpdateOutcome = 'applied' | 'duplicate' | { refused: 'other_cluster'; ownerClusterId: string };
export type StoredUpdate = UpdateInput & { clusterId: string; receivedAt: string; duplicates: number };

type Row = Record<string, unknown>;
const str = (v: unknown): string => String(v);
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const jsonOrNull = <T>(v: unknown): T | null => (v === null || v === undefined ? null : (JSON.parse(String(v)) as T));

const SCHEMA_UPDATES = `
CREATE TABLE IF NOT EXISTS evaluation_updates (
  id TEXT NOT NULL, evaluation_id TEXT NOT NULL, cluster_id TEXT NOT NULL, sequence INTEGER NOT NULL,
  phase TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL, exit_code INTEGER, pod TEXT NOT NULL,
  node TEXT NOT NULL, observed_at TEXT, received_at TEXT NOT NULL, duplicates INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (cluster_id, id)
);
CREATE INDEX IF NOT EXISTS evaluation_updates_evaluation ON evaluation_updates (evaluation_id, sequence);
CREATE INDEX IF NOT EXISTS evaluation_updates_cluster ON evaluation_updates (cluster_id);
`;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS clusters (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL,
  joined_at TEXT, last_seen_at TEXT, archived_at TEXT, facts TEXT, agent_version TEXT, kubernetes_version TEXT,
  node_report TEXT, node_report_received_at TEXT, node_reports_received INTEGER NOT NULL DEFAULT 0, preflight TEXT
);
CREATE TABLE IF NOT EXISTS join_tokens (
  hash TEXT PRIMARY KEY, cluster_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT NOT NULL,
  used_at TEXT, revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS credentials (
  id INTEGER PRIMARY KEY AUTOINCREMENT, cluster_id TEXT NOT NULL, purpose TEXT NOT NULL, hash TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL, superseded_at TEXT, valid_until TEXT, revoked_at TEXT, undelivered_value TEXT,
  issued_by TEXT NOT NULL DEFAULT 'join', confirmed_at TEXT, revoke_reason TEXT
);
CREATE INDEX IF NOT EXISTS credentials_cluster ON credentials (cluster_id, purpose);
CREATE TABLE IF NOT EXISTS evaluations (
  id TEXT PRIMARY KEY, cluster_id TEXT NOT NULL, spec TEXT, phase TEXT NOT NULL, result TEXT,
  last_sequence INTEGER NOT NULL DEFAULT -1, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  first_assigned_at TEXT, assignment_deliveries INTEGER NOT NULL DEFAULT 0, acknowledged_at TEXT,
  cancel_requested_at TEXT, cancel_reason TEXT, sealed_secrets TEXT
);
CREATE INDEX IF NOT EXISTS evaluations_cluster ON evaluations (cluster_id);
${SCHEMA_UPDATES}`;

/** Keys of an assignment (protobuf JSON, either spelling) whose values are secrets (a presigned URL is one). */
export const SECRET_SPEC_KEYS = new Set(['secretAccessKey', 'sessionToken', 'secret_access_key', 'session_token', 'httpsUrl', 'https_url']);
/** Keys of an assignment whose values are maps of secrets (the secret environment): each value is sealed, the names kept. */
export const SECRET_MAP_KEYS = new Set(['secretEnv', 'secret_env']);
export const REDACTED = '[redacted]';
type SecretAt = { path: (string | number)[]; value: string };

/** The spec with every secret value replaced by REDACTED, and the secrets with where they were. */
export function splitSecrets(spec: Record<string, unknown>): { spec: Record<string, unknown>; secrets: SecretAt[] } {
  const secrets: SecretAt[] = [];
  const walk = (v: unknown, path: (string | number)[]): unknown => {
    if (Array.isArray(v)) return v.map((x, i) => walk(x, [...path, i]));
    if (v === null || typeof v !== 'object') return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (SECRET_SPEC_KEYS.has(k) && typeof x === 'string' && x !== '') {
        secrets.push({ path: [...path, k], value: x });
        out[k] = REDACTED;
      } else if (SECRET_MAP_KEYS.has(k) && x !== null && typeof x === 'object' && !Array.isArray(x)) {
        out[k] = Object.fromEntries(
          Object.entries(x).map(([name, value]) => {
            if (typeof value !== 'string' || value === '') return [name, value];
            secrets.push({ path: [...path, k, name], value });
            return [name, REDACTED];
          }),
        );
      } else out[k] = walk(x, [...path, k]);
    }
    return out;
  };
  return { spec: walk(spec, []) as Record<string, unknown>, secrets };
}

function restoreSecrets(spec: Record<string, unknown>, secrets: SecretAt[]): Record<string, unknown> {
  const out = structuredClone(spec);
  for (const { path, value } of secrets) {
    let at: Record<string | number, unknown> = out;
    for (const p of path.slice(0, -1)) at = at[p] as Record<string | number, unknown>;
    at[path[path.length - 1]!] = value;
  }
  return out;
}

export type StoreOptions = {
  /** the key that seals S3 secret keys of undelivered assignments; default `secrets.key` beside the database */
  sealKeyFile?: string;
};

const CREDENTIAL_BY_HASH = 'SELECT c.*, k.archived_at FROM credentials c JOIN clusters k ON k.id = c.cluster_id WHERE c.hash = ? AND c.purpose = ?';
const JOIN_TOKEN_BY_HASH = 'SELECT * FROM join_tokens WHERE hash = ?';

/** Whether a credential row still authenticates at `now`. */
function judgeCredential(row: Row | undefined, now: Date): AuthResult {
  if (!row) return { ok: false, cause: 'unknown' };
  const clusterId = str(row.cluster_id);
  if (row.archived_at !== null) return { ok: false, cause: 'archived', clusterId, at: str(row.archived_at) };
  if (row.revoked_at !== null) {
    const reason: RevokeReason = row.revoke_reason === 'rejoined' || row.revoke_reason === 'rotated' ? row.revoke_reason : 'archived';
    return { ok: false, cause: 'revoked', clusterId, at: str(row.revoked_at), reason };
  }
  if (row.valid_until !== null && now.getTime() >= Date.parse(str(row.valid_until))) {
    return { ok: false, cause: 'expired', clusterId, supersededAt: str(row.superseded_at), validUntil: str(row.valid_until) };
  }
  return { ok: true, clusterId, credentialId: Number(row.id), current: row.superseded_at === null };
}

/** Whether a join token row can still be redeemed at `now`. */
function judgeJoinToken(row: Row | undefined, now: Date): { ok: true; clusterId: string } | { ok: false; problem: JoinTokenProblem; clusterId?: string; at?: string } {
  if (!row) return { ok: false, problem: 'token_invalid' };
  const clusterId = str(row.cluster_id);
  if (row.revoked_at !== null) return { ok: false, problem: 'token_revoked', clusterId, at: str(row.revoked_at) };
  if (row.used_at !== null) return { ok: false, problem: 'token_used', clusterId, at: str(row.used_at) };
  if (now.getTime() >= Date.parse(str(row.expires_at))) return { ok: false, problem: 'token_expired', clusterId, at: str(row.expires_at) };
  return { ok: true, clusterId };
}

/**
 * A read-only view of a control plane's store for the platform registry's token
 * service (controlplane/registry-auth), which runs as its own process beside
 * the API: it judges pull credentials and join tokens by the same rules as the
 * API, and writes nothing.
 */
export class StoreReader {
  private readonly db: DatabaseSync;
  constructor(path: string) {
    this.db = new DatabaseSync(path, { readOnly: true });
    this.db.exec('PRAGMA busy_timeout = 5000;');
  }
  credential(purpose: CredentialPurpose, value: string, now = new Date()): AuthResult {
    return judgeCredential(this.db.prepare(CREDENTIAL_BY_HASH).get(sha256Hex(value), purpose) as Row | undefined, now);
  }
  joinToken(token: string, now = new Date()): ReturnType<typeof judgeJoinToken> {
    return judgeJoinToken(this.db.prepare(JOIN_TOKEN_BY_HASH).get(sha256Hex(token)) as Row | undefined, now);
  }
  close(): void {
    if (this.db.isOpen) this.db.close();
  }
}

export class Store {
  private readonly db: DatabaseSync;
  private readonly clock: Clock;
  private readonly sealer: Sealer;

  constructor(path: string, clock: Clock = systemClock, opts: StoreOptions = {}) {
    this.clock = clock;
    this.sealer = Sealer.fromFile(opts.sealKeyFile ?? join(dirname(path), 'secrets.key'));
    this.db = new DatabaseSync(path);
    // WAL + FULL: an update is acked only after its commit reached the disk.
    // secure_delete: what a secret's row held is overwritten, not left in a free page.
    this.db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000; PRAGMA secure_delete = ON;');
    this.db.exec(SCHEMA);
    migrate(this.db);
    this.sealPlaintextSpecs();
    this.sealPlaintextRotations();
  }

  /** Undelivered rotations stored in plaintext by a control plane from before they were sealed: sealed now, no copy left in the WAL. */
  private sealPlaintextRotations(): void {
    const rows = this.db.prepare("SELECT id, undelivered_value FROM credentials WHERE undelivered_value IS NOT NULL AND undelivered_value NOT LIKE 'v1:%'").all() as Row[];
    const update = this.db.prepare('UPDATE credentials SET undelivered_value = ? WHERE id = ?');
    for (const r of rows) update.run(this.sealer.seal(str(r.undelivered_value)), Number(r.id));
    if (rows.length > 0) this.db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  }

  /** Evaluations stored before secrets were sealed: seal theirs now, and leave no copy in the WAL. */
  private sealPlaintextSpecs(): void {
    const rows = this.db.prepare('SELECT id, spec, acknowledged_at FROM evaluations WHERE spec IS NOT NULL AND sealed_secrets IS NULL').all() as Row[];
    let changed = 0;
    for (const r of rows) {
      const { spec, secrets } = splitSecrets(JSON.parse(str(r.spec)) as Record<string, unknown>);
      if (secrets.length === 0) continue;
      const sealed = r.acknowledged_at === null ? this.sealer.seal(JSON.stringify(secrets)) : null;
      this.db.prepare('UPDATE evaluations SET spec = ?, sealed_secrets = ? WHERE id = ?').run(JSON.stringify(spec), sealed, str(r.id));
      changed++;
    }
    if (changed > 0) this.db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }

  now(): Date {
    return this.clock.now();
  }

  private nowIso(): string {
    return this.clock.now().toISOString();
  }

  private tx<T>(fn: () => T): T {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      const out = fn();
      this.db.exec('COMMIT');
      return out;
    } catch (err) {
      this.db.exec('ROLLBACK');
      throw err;
    }
  }

  // ---- clusters

  createCluster(name: string): Cluster {
    const id = `c_${randomBase62(20).toLowerCase()}`;
    this.db
      .prepare('INSERT INTO clusters (id, name, status, created_at) VALUES (?, ?, ?, ?)')
      .run(id, name, 'Pending', this.nowIso());
    return this.getCluster(id)!;
  }

  getCluster(id: string): Cluster | undefined {
    const row = this.db.prepare('SELECT * FROM clusters WHERE id = ?').get(id) as Row | undefined;
    return row ? toCluster(row) : undefined;
  }

  listClusters(): Cluster[] {
    return (this.db.prepare('SELECT * FROM clusters ORDER BY created_at, id').all() as Row[]).map(toCluster);
  }

  /** No session survives a restart: whatever was Connected is Disconnected until its agent dials again. */
  markAllDisconnected(): void {
    this.db.prepare("UPDATE clusters SET status = 'Disconnected' WHERE status = 'Connected'").run();
  }

  setConnected(id: string, connected: boolean): void {
    if (connected) {
      this.db.prepare("UPDATE clusters SET status = 'Connected', last_seen_at = ? WHERE id = ? AND status <> 'Archived'").run(this.nowIso(), id);
    } else {
      // not "seen": a session that ended after a silence must not look recent
      this.db.prepare("UPDATE clusters SET status = 'Disconnected' WHERE id = ? AND status <> 'Archived'").run(id);
    }
  }

  touch(id: string): void {
    this.db.prepare('UPDATE clusters SET last_seen_at = ? WHERE id = ?').run(this.nowIso(), id);
  }

  recordHello(id: string, agentVersion: string, kubernetesVersion: string): void {
    this.db
      .prepare('UPDATE clusters SET agent_version = ?, kubernetes_version = ?, last_seen_at = ? WHERE id = ?')
      .run(agentVersion, kubernetesVersion, this.nowIso(), id);
  }

  recordNodeReport(id: string, report: unknown): void {
    const now = this.nowIso();
    this.db
      .prepare(
        'UPDATE clusters SET node_report = ?, node_report_received_at = ?, node_reports_received = node_reports_received + 1, last_seen_at = ? WHERE id = ?',
      )
      .run(JSON.stringify(report), now, now, id);
  }

  nodeReport(id: string): NodeReportRecord | null {
    const row = this.db
      .prepare('SELECT node_report, node_report_received_at, node_reports_received FROM clusters WHERE id = ?')
      .get(id) as Row | undefined;
    if (!row || row.node_report === null) return null;
    return { report: JSON.parse(str(row.node_report)), receivedAt: str(row.node_report_received_at), received: Number(row.node_reports_received) };
  }

  recordPreflight(id: string, report: unknown): void {
    this.db.prepare('UPDATE clusters SET preflight = ?, last_seen_at = ? WHERE id = ?').run(JSON.stringify(report), this.nowIso(), id);
  }

  preflight(id: string): unknown {
    const row = this.db.prepare('SELECT preflight FROM clusters WHERE id = ?').get(id) as Row | undefined;
    return row ? jsonOrNull(row.preflight) : null;
  }

  /** Revokes every token and credential of the cluster; the cluster stays listed as Archived. */
  archiveCluster(id: string): Cluster | undefined {
    const now = this.nowIso();
    this.tx(() => {
      this.db.prepare("UPDATE clusters SET status = 'Archived', archived_at = COALESCE(archived_at, ?) WHERE id = ?").run(now, id);
      this.db.prepare('UPDATE join_tokens SET revoked_at = ? WHERE cluster_id = ? AND revoked_at IS NULL').run(now, id);
      this.db
        .prepare("UPDATE credentials SET revoked_at = ?, revoke_reason = 'archived', undelivered_value = NULL WHERE cluster_id = ? AND revoked_at IS NULL")
        .run(now, id);
      this.db.prepare('UPDATE evaluations SET sealed_secrets = NULL WHERE cluster_id = ?').run(id);
    });
    return this.getCluster(id);
  }

  // ---- join tokens

  issueJoinToken(clusterId: string): { token: string; expiresAt: string } {
    const token = mint(PREFIX.joinToken);
    const now = this.clock.now();
    const expiresAt = new Date(now.getTime() + JOIN_TOKEN_TTL_MS).toISOString();
    this.db
      .prepare('INSERT INTO join_tokens (hash, cluster_id, created_at, expires_at) VALUES (?, ?, ?, ?)')
      .run(sha256Hex(token), clusterId, now.toISOString(), expiresAt);
    return { token, expiresAt };
  }

  /**
   * Trades a join token, once, for the cluster's credentials. A rejoin (a fresh
   * token for a cluster that already joined) issues new credentials; the previous
   * ones stay valid only until the agent confirms the new ones by authenticating a
   * session with the new control credential (confirmJoin), and for at most the
   * rotation overlap if it never does. A rejoin replaces credentials because one
   * may have leaked, so the 24-hour overlap of a rotation does not apply.
   */
  redeemJoinToken(token: string, facts: Record<string, unknown>, withRelay: boolean): RedeemResult {
    return this.tx(() => {
      const row = this.db.prepare(JOIN_TOKEN_BY_HASH).get(sha256Hex(token)) as Row | undefined;
      const now = this.clock.now();
      const judged = judgeJoinToken(row, now);
      if (!judged.ok) return judged;
      const clusterId = judged.clusterId;
      this.db.prepare('UPDATE join_tokens SET used_at = ? WHERE hash = ?').run(now.toISOString(), str(row!.hash));
      this.db
        .prepare("UPDATE clusters SET joined_at = ?, facts = ?, status = CASE WHEN status = 'Pending' THEN 'Disconnected' ELSE status END WHERE id = ?")
        .run(now.toISOString(), JSON.stringify(facts), clusterId);
      const purposes: CredentialPurpose[] = withRelay ? ['control', 'pull', 'relay'] : ['control', 'pull'];
      const credentials: Partial<Record<CredentialPurpose, string>> = {};
      for (const purpose of purposes) credentials[purpose] = this.replaceCredential(clusterId, purpose, false, 'join').value;
      return { ok: true, cluster: this.getCluster(clusterId)!, credentials } as const;
    });
  }

  // ---- credentials

  private replaceCredential(clusterId: string, purpose: CredentialPurpose, keepForDelivery: boolean, issuedBy: 'join' | 'rotation'): { value: string; oldValidUntil: string } {
    const now = this.clock.now();
    const oldValidUntil = new Date(now.getTime() + ROTATION_OVERLAP_MS).toISOString();
    this.db
      .prepare(
        'UPDATE credentials SET superseded_at = ?, valid_until = ?, undelivered_value = NULL WHERE cluster_id = ? AND purpose = ? AND superseded_at IS NULL AND revoked_at IS NULL',
      )
      .run(now.toISOString(), oldValidUntil, clusterId, purpose);
    const value = mint(PREFIX[purpose]);
    this.db
      .prepare('INSERT INTO credentials (cluster_id, purpose, hash, created_at, undelivered_value, issued_by) VALUES (?, ?, ?, ?, ?, ?)')
      .run(clusterId, purpose, sha256Hex(value), now.toISOString(), keepForDelivery ? this.sealer.seal(value) : null, issuedBy);
    return { value, oldValidUntil };
  }

  /** Rotation: a new value now; the previous one stays valid for ROTATION_OVERLAP_MS. */
  rotateCredential(clusterId: string, purpose: CredentialPurpose): { value: string; oldValidUntil: string } {
    return this.tx(() => this.replaceCredential(clusterId, purpose, true, 'rotation'));
  }

  /** Rotated values the agent has not confirmed yet (sent again on every connect), unsealed. */
  undeliveredRotations(clusterId: string): { purpose: CredentialPurpose; value: string; oldValidUntil: string | null }[] {
    const rows = this.db
      .prepare(
        `SELECT c.purpose, c.undelivered_value,
           (SELECT MAX(o.valid_until) FROM credentials o WHERE o.cluster_id = c.cluster_id AND o.purpose = c.purpose AND o.superseded_at IS NOT NULL) AS old_valid_until
         FROM credentials c WHERE c.cluster_id = ? AND c.undelivered_value IS NOT NULL AND c.revoked_at IS NULL AND c.superseded_at IS NULL`,
      )
      .all(clusterId) as Row[];
    return rows.map((r) => ({ purpose: str(r.purpose) as CredentialPurpose, value: this.sealer.open(str(r.undelivered_value)), oldValidUntil: strOrNull(r.old_valid_until) }));
  }

  confirmRotation(clusterId: string, purpose: string): void {
    this.db
      .prepare('UPDATE credentials SET undelivered_value = NULL WHERE cluster_id = ? AND purpose = ? AND superseded_at IS NULL')
      .run(clusterId, purpose);
  }

  /**
   * Judges a credential and records what its use proves. Authenticating with the newest control credential proves
   * the agent holds it: its rotation is delivered, and the credentials of every join before it are revoked
   * (confirmJoin).
   *
   * A rotation's overlap is the whole ROTATION_OVERLAP_MS for every purpose, even once the agent used the new
   * value: with Secrets the operator delivers (GitOps, a secret manager), a sync or refresh may write the old
   * value back within the overlap, and the agent follows its Secret, so the old value must keep working until the
   * overlap ends. After it, the old value is refused as expired (judgeCredential).
   */
  authenticate(purpose: CredentialPurpose, value: string): AuthResult {
    const row = this.db.prepare(CREDENTIAL_BY_HASH).get(sha256Hex(value), purpose) as Row | undefined;
    const judged = judgeCredential(row, this.clock.now());
    if (!judged.ok || !row) return judged;
    const clusterId = judged.clusterId;
    // Authenticating with the newest control credential proves it was delivered.
    if (row.superseded_at === null && row.undelivered_value !== null) this.confirmRotation(clusterId, purpose);
    // ... and that the agent holds the credentials of the latest join: those from before it are revoked
    if (purpose === 'control' && row.superseded_at === null) {
      const join = this.db
        .prepare("SELECT MAX(id) AS id FROM credentials WHERE cluster_id = ? AND purpose = 'control' AND issued_by = 'join' AND confirmed_at IS NULL AND id <= ?")
        .get(clusterId, Number(row.id)) as Row;
      if (join.id !== null) this.confirmJoin(clusterId, Number(join.id));
    }
    return judged;
  }

  /**
   * The agent authenticated with the control credential of join `credentialId` (or
   * one rotated from it): it wrote that join's credentials, so every credential issued before the join
   * (control, pull, relay, and any still in a rotation overlap) is revoked now.
   * Returns how many were revoked.
   */
  confirmJoin(clusterId: string, credentialId: number): number {
    const now = this.nowIso();
    return this.tx(() => {
      this.db.prepare('UPDATE credentials SET confirmed_at = ? WHERE id = ? AND confirmed_at IS NULL').run(now, credentialId);
      const r = this.db
        .prepare("UPDATE credentials SET revoked_at = ?, revoke_reason = 'rejoined', undelivered_value = NULL WHERE cluster_id = ? AND id < ? AND revoked_at IS NULL")
        .run(now, clusterId, credentialId);
      return Number(r.changes);
    });
  }

  credentialSummary(clusterId: string): CredentialSummary[] {
    const rows = this.db
      .prepare('SELECT purpose, created_at, valid_until, superseded_at FROM credentials WHERE cluster_id = ? AND revoked_at IS NULL ORDER BY id')
      .all(clusterId) as Row[];
    const now = this.clock.now().getTime();
    return rows
      .filter((r) => r.valid_until === null || Date.parse(str(r.valid_until)) > now)
      .map((r) => ({ purpose: str(r.purpose) as CredentialPurpose, createdAt: str(r.created_at), validUntil: strOrNull(r.valid_until), current: r.superseded_at === null }));
  }

  // ---- evaluations

  /** Stores the spec with its secrets redacted; the secrets are sealed until the cluster acknowledges the assignment. */
  createEvaluation(clusterId: string, spec: Record<string, unknown>): Evaluation {
    const id = `ev-${randomBase62(20).toLowerCase()}`;
    const now = this.nowIso();
    const split = splitSecrets(spec);
    const sealed = split.secrets.length ? this.sealer.seal(JSON.stringify(split.secrets)) : null;
    this.db
      .prepare("INSERT INTO evaluations (id, cluster_id, spec, phase, created_at, updated_at, sealed_secrets) VALUES (?, ?, ?, 'Submitted', ?, ?, ?)")
      .run(id, clusterId, JSON.stringify(split.spec), now, now, sealed);
    return this.getEvaluation(id)!;
  }

  /** The spec as the cluster must receive it: with its sealed secrets opened. */
  assignmentSpec(ev: Evaluation): Record<string, unknown> {
    const row = this.db.prepare('SELECT sealed_secrets FROM evaluations WHERE id = ?').get(ev.id) as Row | undefined;
    const spec = ev.spec ?? {};
    if (!row || row.sealed_secrets === null) return spec;
    return restoreSecrets(spec, JSON.parse(this.sealer.open(str(row.sealed_secrets))) as SecretAt[]);
  }

  /** Whether the evaluation's assignment still holds sealed secrets (S3 keys, presigned URLs, secret environment values). */
  carriesSecrets(id: string): boolean {
    const row = this.db.prepare('SELECT sealed_secrets FROM evaluations WHERE id = ?').get(id) as Row | undefined;
    return row !== undefined && row.sealed_secrets !== null;
  }

  getEvaluation(id: string): Evaluation | undefined {
    const row = this.db.prepare('SELECT * FROM evaluations WHERE id = ?').get(id) as Row | undefined;
    return row ? toEvaluation(row) : undefined;
  }

  listEvaluations(clusterId: string): Evaluation[] {
    return (this.db.prepare('SELECT * FROM evaluations WHERE cluster_id = ? ORDER BY created_at, id').all(clusterId) as Row[]).map(toEvaluation);
  }

  /**
   * Submitted evaluations the agent has not acknowledged with an update yet: (re)sent on every connect.
   * While the cluster drains (either drain), only those already sent once (the cluster may hold them); the rest wait.
   */
  unacknowledgedAssignments(clusterId: string): Evaluation[] {
    const c = this.getCluster(clusterId);
    const draining = c?.drainingSince || c?.operatorDrainingSince ? ' AND first_assigned_at IS NOT NULL' : '';
    return (
      this.db
        .prepare(
          `SELECT * FROM evaluations WHERE cluster_id = ? AND spec IS NOT NULL AND acknowledged_at IS NULL AND cancel_requested_at IS NULL${draining} ORDER BY created_at, id`,
        )
        .all(clusterId) as Row[]
    ).map(toEvaluation);
  }

  /** Starts (or ends) draining: a draining cluster gets no new assignments. */
  setDraining(clusterId: string, draining: boolean): Cluster | undefined {
    this.db.prepare('UPDATE clusters SET draining_since = ? WHERE id = ?').run(draining ? (this.getCluster(clusterId)?.drainingSince ?? this.nowIso()) : null, clusterId);
    return this.getCluster(clusterId);
  }

  /** Records the operator's drain as the agent reports it (null: ended). */
  setOperatorDrain(clusterId: string, since: string | null): Cluster | undefined {
    this.db.prepare('UPDATE clusters SET operator_drain_since = ? WHERE id = ?').run(since, clusterId);
    return this.getCluster(clusterId);
  }

  /** Evaluations of the cluster that have not reached a final phase (what a drain waits for). */
  unfinishedEvaluations(clusterId: string): number {
    const row = this.db
      .prepare("SELECT COUNT(*) AS n FROM evaluations WHERE cluster_id = ? AND phase NOT IN ('Succeeded','Failed','Cancelled')")
      .get(clusterId) as Row;
    return Number(row.n);
  }

  markAssignmentSent(id: string): void {
    this.db
      .prepare('UPDATE evaluations SET first_assigned_at = COALESCE(first_assigned_at, ?), assignment_deliveries = assignment_deliveries + 1 WHERE id = ?')
      .run(this.nowIso(), id);
  }

  /**
   * Records a cancel request. An evaluation the cluster never received is
   * Cancelled at once; otherwise the agent gets a Cancellation and reports the end.
   */
  requestCancel(id: string, reason: string): Evaluation | undefined {
    const now = this.nowIso();
    this.tx(() => {
      this.db
        .prepare('UPDATE evaluations SET cancel_requested_at = COALESCE(cancel_requested_at, ?), cancel_reason = COALESCE(cancel_reason, ?), updated_at = ? WHERE id = ?')
        .run(now, reason, now, id);
      this.db
        .prepare(
          "UPDATE evaluations SET phase = 'Cancelled', result = ?, sealed_secrets = NULL WHERE id = ? AND first_assigned_at IS NULL AND acknowledged_at IS NULL AND phase NOT IN ('Succeeded','Failed','Cancelled')",
        )
        .run(JSON.stringify({ phase: 'Cancelled', reason: 'CancelledBeforeDelivery', message: reason, finishedAt: now }), id);
    });
    return this.getEvaluation(id);
  }

  /** Cancel requests for evaluations the cluster may be running: sent on every connect until a terminal phase arrives. */
  pendingCancellations(clusterId: string): Evaluation[] {
    return (
      this.db
        .prepare(
          "SELECT * FROM evaluations WHERE cluster_id = ? AND cancel_requested_at IS NOT NULL AND phase NOT IN ('Succeeded','Failed','Cancelled') ORDER BY created_at, id",
        )
        .all(clusterId) as Row[]
    ).map(toEvaluation);
  }

  /**
   * Applies an evaluation update exactly once by its id. A redelivered id only
   * bumps its duplicate counter. Updates older than the evaluation's latest
   * sequence are kept in the history but do not move the phase back.
   */
  applyUpdate(clusterId: string, u: UpdateInput): UpdateOutcome {
    return this.tx(() => {
      const now = this.nowIso();
      // an update is scoped by its cluster: the same id from another cluster is another update, never a duplicate of this one
      const dup = this.db.prepare('UPDATE evaluation_updates SET duplicates = duplicates + 1 WHERE cluster_id = ? AND id = ?').run(clusterId, u.id);
      if (Number(dup.changes) > 0) return 'duplicate';
      // an evaluation belongs to the cluster it was submitted to (or, never submitted, to the cluster that reported it first)
      const owner = this.db.prepare('SELECT cluster_id FROM evaluations WHERE id = ?').get(u.evaluationId) as Row | undefined;
      if (owner && str(owner.cluster_id) !== clusterId) return { refused: 'other_cluster', ownerClusterId: str(owner.cluster_id) };
      this.db
        .prepare(
          `INSERT INTO evaluation_updates (id, evaluation_id, cluster_id, sequence, phase, reason, message, exit_code, pod, node, observed_at, received_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(u.id, u.evaluationId, clusterId, u.sequence, u.phase, u.reason, u.message, u.exitCode, u.pod, u.node, u.observedAt, now);
      this.db
        .prepare("INSERT OR IGNORE INTO evaluations (id, cluster_id, spec, phase, created_at, updated_at) VALUES (?, ?, NULL, 'Submitted', ?, ?)")
        .run(u.evaluationId, clusterId, now, now);
      const terminal = TERMINAL_PHASES.has(u.phase);
      const result = terminal
        ? JSON.stringify({ phase: u.phase, exitCode: u.exitCode, reason: u.reason, message: u.message, pod: u.pod, node: u.node, finishedAt: u.observedAt ?? now })
        : null;
      this.db
        .prepare(
          `UPDATE evaluations SET acknowledged_at = COALESCE(acknowledged_at, ?), updated_at = ?, sealed_secrets = NULL,
             phase = CASE WHEN ? >= last_sequence THEN ? ELSE phase END,
             result = CASE WHEN ? >= last_sequence AND ? IS NOT NULL THEN ? ELSE result END,
             last_sequence = MAX(last_sequence, ?)
           WHERE id = ? AND cluster_id = ?`,
        )
        .run(now, now, u.sequence, u.phase, u.sequence, result, result, u.sequence, u.evaluationId, clusterId);
      return 'applied';
    });
  }

  /** Of `ids`, those this cluster's updates already stored (another cluster's updates with the same ids do not count). */
  knownUpdateIds(clusterId: string, ids: string[]): string[] {
    const stmt = this.db.prepare('SELECT 1 FROM evaluation_updates WHERE cluster_id = ? AND id = ?');
    return ids.filter((id) => stmt.get(clusterId, id) !== undefined);
  }

  listUpdates(evaluationId: string): StoredUpdate[] {
    return (this.db.prepare('SELECT * FROM evaluation_updates WHERE evaluation_id = ? ORDER BY sequence, received_at, id').all(evaluationId) as Row[]).map(toUpdate);
  }

  updateCounts(clusterId: string): { distinct: number; duplicatesReceived: number } {
    const row = this.db
      .prepare('SELECT COUNT(*) AS n, COALESCE(SUM(duplicates), 0) AS d FROM evaluation_updates WHERE cluster_id = ?')
      .get(clusterId) as Row;
    return { distinct: Number(row.n), duplicatesReceived: Number(row.d) };
  }
}

/** Columns added after the first release: a data dir from before gets them (existing credentials count as issued by a join, confirmed; specs are sealed after). */
function migrate(db: DatabaseSync): void {
  const have = new Set((db.prepare('PRAGMA table_info(credentials)').all() as Row[]).map((c) => str(c.name)));
  if (!have.has('issued_by')) db.exec("ALTER TABLE credentials ADD COLUMN issued_by TEXT NOT NULL DEFAULT 'join'");
  if (!have.has('confirmed_at')) db.exec('ALTER TABLE credentials ADD COLUMN confirmed_at TEXT; UPDATE credentials SET confirmed_at = created_at');
  if (!have.has('revoke_reason')) db.exec('ALTER TABLE credentials ADD COLUMN revoke_reason TEXT');
  const clusterColumns = new Set((db.prepare('PRAGMA table_info(clusters)').all() as Row[]).map((c) => str(c.name)));
  if (!clusterColumns.has('draining_since')) db.exec('ALTER TABLE clusters ADD COLUMN draining_since TEXT');
  if (!clusterColumns.has('operator_drain_since')) db.exec('ALTER TABLE clusters ADD COLUMN operator_drain_since TEXT');
  const evaluationColumns = new Set((db.prepare('PRAGMA table_info(evaluations)').all() as Row[]).map((c) => str(c.name)));
  if (!evaluationColumns.has('sealed_secrets')) db.exec('ALTER TABLE evaluations ADD COLUMN sealed_secrets TEXT');
  // evaluation_updates keyed by its id alone (before updates were scoped by cluster): rebuilt keyed by (cluster_id, id), rows kept
  const updateKey = (db.prepare('PRAGMA table_info(evaluation_updates)').all() as Row[]).filter((c) => Number(c.pk) > 0).map((c) => str(c.name));
  if (updateKey.length === 1) {
    const columns = 'id, evaluation_id, cluster_id, sequence, phase, reason, message, exit_code, pod, node, observed_at, received_at, duplicates';
    db.exec('BEGIN IMMEDIATE');
    try {
      db.exec(`ALTER TABLE evaluation_updates RENAME TO evaluation_updates_unscoped;
      DROP INDEX IF EXISTS evaluation_updates_evaluation;
      DROP INDEX IF EXISTS evaluation_updates_cluster;
      ${SCHEMA_UPDATES}
      INSERT INTO evaluation_updates (${columns}) SELECT ${columns} FROM evaluation_updates_unscoped;
      DROP TABLE evaluation_updates_unscoped;`);
      db.exec('COMMIT');
    } catch (err) {
      db.exec('ROLLBACK');
      throw err;
    }
  }
}

function toCluster(r: Row): Cluster {
  return {
    id: str(r.id),
    name: str(r.name),
    status: str(r.status) as ClusterStatus,
    createdAt: str(r.created_at),
    joinedAt: strOrNull(r.joined_at),
    lastSeenAt: strOrNull(r.last_seen_at),
    archivedAt: strOrNull(r.archived_at),
    facts: jsonOrNull(r.facts),
    agentVersion: strOrNull(r.agent_version),
    kubernetesVersion: strOrNull(r.kubernetes_version),
    drainingSince: strOrNull(r.draining_since),
    operatorDrainingSince: strOrNull(r.operator_drain_since),
  };
}

function toEvaluation(r: Row): Evaluation {
  return {
    id: str(r.id),
    clusterId: str(r.cluster_id),
    spec: jsonOrNull(r.spec),
    phase: str(r.phase),
    result: jsonOrNull(r.result),
    createdAt: str(r.created_at),
    updatedAt: str(r.updated_at),
    firstAssignedAt: strOrNull(r.first_assigned_at),
    assignmentDeliveries: Number(r.assignment_deliveries),
    acknowledgedAt: strOrNull(r.acknowledged_at),
    cancelRequestedAt: strOrNull(r.cancel_requested_at),
    cancelReason: strOrNull(r.cancel_reason),
  };
}

function toUpdate(r: Row): StoredUpdate {
  return {
    id: str(r.id),
    evaluationId: str(r.evaluation_id),
    clusterId: str(r.cluster_id),
    sequence: Number(r.sequence),
    phase: str(r.phase),
    reason: str(r.reason),
    message: str(r.message),
    exitCode: r.exit_code === null ? null : Number(r.exit_code),
    pod: str(r.pod),
    node: str(r.node),
    observedAt: strOrNull(r.observed_at),
    receivedAt: str(r.received_at),
    duplicates: Number(r.duplicates),
  };
}
