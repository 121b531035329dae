// The saved answer of an interrupted join (join-result.json on the spool): used
// to finish that join with the same token, and removed as soon as the token is
// another one, so credentials that will never be written do not stay at rest.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { runtimeConfigSchema } from '../lib/runtime-config.ts';
import type { AgentConfig } from './config.ts';
import { obtainCredentials, pendingJoinFile, readPendingJoin, type BootstrapDeps } from './credential-bootstrap.ts';
import type { CredentialStore, ReadResult, ControlCredentials } from './credentials.ts';
import { tokenHash, type JoinResult } from '../lib/credential-secret.ts';
import type { ControlPlaneClient } from './join.ts';

const OLD = `rlm_jt_${'o'.repeat(40)}`;
const NEW = `rlm_jt_${'n'.repeat(40)}`;
const oldJoin: JoinResult = { clusterId: 'c_old', control: `rlm_cc_${'a'.repeat(40)}`, pull: '{"auths":{}}' };
const log = pino({ level: 'silent' });

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function spool(saved?: { tokenHash: string; result: JoinResult } | string): string {
  const dir = mkdtempSync(join(tmpdir(), 'agent-bootstrap-'));
  dirs.push(dir);
  if (saved !== undefined) writeFileSync(pendingJoinFile(dir), typeof saved === 'string' ? saved : JSON.stringify(saved), { mode: 0o600 });
  return dir;
}

function deps(spoolDir: string, token: string, control: ReadResult<ControlCredentials>) {
  const written: { result: JoinResult; hash: string }[] = [];
  const store = {
    readControl: () => Promise.resolve(control),
    writeJoined: (result: JoinResult, hash: string) => Promise.resolve(void written.push({ result, hash })),
  } as unknown as CredentialStore;
  const cfg: AgentConfig = {
    runtime: runtimeConfigSchema.parse({ controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {} }),
    joinToken: token,
    podName: 'agent-0',
    podNamespace: 'rlmesh-system',
    spoolDir,
    listenHost: '127.0.0.1',
    timing: { heartbeatMs: 1000, silenceMs: 5000, backoffBaseMs: 10, backoffMaxMs: 20, authBackoffMs: 20, reportDelayMs: 10, watchSilenceMs: 1000, leaseSeconds: 15 },
  };
  const d: BootstrapDeps = {
    cfg,
    kc: {} as k8s.KubeConfig,
    store,
    cp: {} as ControlPlaneClient,
    log,
    agentVersion: 'test',
    onJoinOutcome: () => undefined,
    setProblem: () => undefined,
  };
  return { d, written };
}

describe('join-result.json on the spool', () => {
  it('is kept and returned for the same token; removed for another token and when unreadable', () => {
    const same = spool({ tokenHash: tokenHash(OLD), result: oldJoin });
    expect(readPendingJoin(same, tokenHash(OLD), log)).toEqual(oldJoin);
    expect(existsSync(pendingJoinFile(same))).toBe(true);

    const other = spool({ tokenHash: tokenHash(OLD), result: oldJoin });
    expect(readPendingJoin(other, tokenHash(NEW), log)).toBeUndefined();
    expect(existsSync(pendingJoinFile(other))).toBe(false);

    const torn = spool('{"tokenHash":"ab');
    expect(readPendingJoin(torn, tokenHash(NEW), log)).toBeUndefined();
    expect(existsSync(pendingJoinFile(torn))).toBe(false);

    expect(readPendingJoin(spool(), tokenHash(NEW), log)).toBeUndefined();
  });

  it('a new token removes the stale answer even when its own credentials are already in the control Secret', async () => {
    const dir = spool({ tokenHash: tokenHash(OLD), result: oldJoin });
    const { d, written } = deps(dir, NEW, { ok: true, value: { control: 'rlm_cc_new', clusterId: 'c_new', tokenHash: tokenHash(NEW), resourceVersion: '1' } });
    const creds = await obtainCredentials(d);
    expect(creds.clusterId).toBe('c_new');
    expect(existsSync(pendingJoinFile(dir))).toBe(false);
    expect(written).toEqual([]);
  });

  it('the same token finishes the interrupted join from it, then removes it', async () => {
    const dir = spool({ tokenHash: tokenHash(OLD), result: oldJoin });
    const { d, written } = deps(dir, OLD, { ok: false, problem: 'Secret rlmesh-system/rlmesh-cluster-control does not exist' });
    const creds = await obtainCredentials(d);
    expect(creds).toMatchObject({ clusterId: 'c_old', control: oldJoin.control, tokenHash: tokenHash(OLD) });
    expect(written).toEqual([{ result: oldJoin, hash: tokenHash(OLD) }]);
    expect(existsSync(pendingJoinFile(dir))).toBe(false);
  });

  it('the same token whose Secrets were written before the crash: reused, and the answer removed', async () => {
    const dir = spool({ tokenHash: tokenHash(OLD), result: oldJoin });
    const { d, written } = deps(dir, OLD, { ok: true, value: { control: oldJoin.control, clusterId: 'c_old', tokenHash: tokenHash(OLD), resourceVersion: '1' } });
    await obtainCredentials(d);
    expect(written).toEqual([]);
    expect(existsSync(pendingJoinFile(dir))).toBe(false);
  });
});
