// Who is asking for a registry token: the publisher, a cluster by its pull
// credential, a cluster by its unredeemed join token, or nobody. Credentials
// are judged by each registered control plane's store, read-only and by the
// same rules as the API (controlplane/store.ts), so a rotation's overlap, a
// rejoin and an archive end registry access exactly when they end the rest.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PREFIX, sameSecret } from '../secrets.ts';
import { StoreReader, type AuthResult } from '../store.ts';
import type { Identity } from './grants.ts';

export type Identified = { ok: true; who: Identity } | { ok: false; why: string };

const WHERE = 'the pull Secret (rlmesh-registry-pull, or your credentials.pullSecret) in both rlmesh-system and rlmesh-runs';

/** A control plane announces its store by a file `<name>.json` = {"db": "/abs/controlplane.db"} in the stores folder. */
export class Identifier {
  private readonly readers = new Map<string, StoreReader>();
  private readonly storesDir: string;
  private readonly publisher: { username: string; password: string };
  constructor(storesDir: string, publisher: { username: string; password: string }) {
    this.storesDir = storesDir;
    this.publisher = publisher;
  }

  private stores(): StoreReader[] {
    const out: StoreReader[] = [];
    for (const f of existsSync(this.storesDir) ? readdirSync(this.storesDir) : []) {
      if (!f.endsWith('.json')) continue;
      let db: string;
      try {
        db = (JSON.parse(readFileSync(join(this.storesDir, f), 'utf8')) as { db: string }).db;
      } catch {
        continue; // being written
      }
      if (!existsSync(db)) {
        this.readers.get(db)?.close();
        this.readers.delete(db);
        continue;
      }
      let r = this.readers.get(db);
      if (!r) this.readers.set(db, (r = new StoreReader(db)));
      out.push(r);
    }
    return out;
  }

  identify(username: string, password: string): Identified {
    if (username === this.publisher.username) {
      return sameSecret(password, this.publisher.password) ? { ok: true, who: { kind: 'publisher' } } : { ok: false, why: 'wrong password for the publisher account' };
    }
    if (password.startsWith(PREFIX.joinToken)) return this.joinToken(password);
    if (password.startsWith(PREFIX.pull)) return this.pullCredential(username, password);
    return { ok: false, why: `the password is neither a pull credential (${PREFIX.pull}…) nor a join token (${PREFIX.joinToken}…); check ${WHERE}` };
  }

  private pullCredential(username: string, password: string): Identified {
    for (const store of this.stores()) {
      const r = store.credential('pull', password);
      if (r.ok) {
        if (r.clusterId !== username) return { ok: false, why: `this pull credential belongs to cluster ${r.clusterId} but came with user name ${username}; write the dockerconfigjson exactly as \`rlmesh clusters join --format k8s-secret\` printed it into ${WHERE}` };
        return { ok: true, who: { kind: 'cluster', clusterId: r.clusterId } };
      }
      if (r.cause !== 'unknown') return { ok: false, why: refusedPull(r) };
    }
    return { ok: false, why: `the platform never issued this pull credential (mistyped or from another platform); write the cluster's current one into ${WHERE}` };
  }

  private joinToken(token: string): Identified {
    for (const store of this.stores()) {
      const r = store.joinToken(token);
      if (r.ok) return { ok: true, who: { kind: 'join', clusterId: r.clusterId } };
      if (r.problem === 'token_invalid') continue;
      const what = { token_used: 'was redeemed', token_expired: 'expired', token_revoked: 'was revoked' }[r.problem];
      return { ok: false, why: `this join token ${what} at ${r.at}, and a join token pulls only until then; from the join on, the cluster pulls with its own pull credential: check ${WHERE}` };
    }
    return { ok: false, why: 'the platform never issued this join token; copy the install command again from Clusters → Connect your cluster' };
  }
}

function refusedPull(r: Exclude<AuthResult, { ok: true } | { cause: 'unknown' }>): string {
  switch (r.cause) {
    case 'archived':
      return `cluster ${r.clusterId} was archived at ${r.at}, which revoked its pull credential; register the cluster again from Clusters → Connect your cluster`;
    case 'revoked':
      return r.reason === 'rejoined'
        ? `this pull credential of cluster ${r.clusterId} was replaced when the cluster joined again (revoked at ${r.at}); write the new one into ${WHERE}`
        : `this pull credential of cluster ${r.clusterId} was revoked at ${r.at}; register the cluster again from Clusters → Connect your cluster`;
    case 'expired':
      return `this pull credential of cluster ${r.clusterId} was rotated at ${r.supersededAt} and its overlap ended at ${r.validUntil}; write the current one into ${WHERE}`;
  }
}
