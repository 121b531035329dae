// Join: the agent trades the token once, writes its Secrets (the token's hash,
// never the token), connects, reports nodes; a restart never re-trades (and
// drops a saved join answer of another token); a new token rejoins, replaces
// the credentials, and once the agent is connected on the new ones the old
// control and relay credentials are refused.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { cluster, decode, newCluster, newInstallCommand, resetAgentState, runtimeConfig, RUNS, secret, SYSTEM, tryConnect } from './harness.ts';
import { agentSuite } from './suite.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** A remote write to the metrics relay with `relay` as bearer: 401 and its code when refused (an empty body fails later, with 400). */
async function relayWrite(cp: ControlPlane, clusterId: string, relay: string): Promise<{ status: number; code: string }> {
  const dispatcher = new Agent({ connect: { ca: readFileSync(cp.caFile, 'utf8') } });
  try {
    const res = await request(`${cp.url}/v1/cells/${clusterId}/metrics`, { method: 'POST', dispatcher, headers: { authorization: `Bearer ${relay}`, 'content-encoding': 'snappy' }, body: '' });
    return { status: res.statusCode, code: ((await res.body.json()) as { code: string }).code };
  } finally {
    await dispatcher.close();
  }
}

describe('agent join', () => {
  const suite = agentSuite({ joinToken: true, observability: true });

  it('joins once, writes every Secret, connects, reports nodes and keeps lastSeenAt moving; a restart does not rejoin; a new token does', async () => {
    const { clusterId, joinToken } = await newCluster(suite.cp);
    const config = runtimeConfig(suite.cp, { observability: true });
    const agent = await suite.start({ configFile: config, token: joinToken });
    await agent.waitFor('session connected', /session connected/);

    // the control Secret: keys control and cluster-id, the token's hash, never the token
    const control = secret(SYSTEM, 'rlmesh-cluster-control')!;
    expect(decode(control, 'cluster-id')).toBe(clusterId);
    expect(decode(control, 'control')).toMatch(/^rlm_cc_/);
    expect(control.metadata?.annotations?.['rlmesh.dev/join-token-sha256']).toBe(createHash('sha256').update(joinToken).digest('hex'));
    expect(JSON.stringify(control)).not.toContain(joinToken);
    // the pull Secret in both namespaces and the CRD hook's copy
    for (const [ns, name] of [[SYSTEM, 'rlmesh-registry-pull'], [RUNS, 'rlmesh-registry-pull'], [SYSTEM, 'rlmesh-registry-join-crd-upgrade']] as const) {
      const s = secret(ns, name)!;
      expect(s.type, `${ns}/${name}`).toBe('kubernetes.io/dockerconfigjson');
      const auths = JSON.parse(decode(s, '.dockerconfigjson')!).auths as Record<string, { username: string; password: string }>;
      expect(Object.values(auths)[0]!.username).toBe(clusterId);
      expect(Object.values(auths)[0]!.password).toMatch(/^rlm_rp_/);
    }
    // observability on: the relay Secret
    expect(decode(secret(SYSTEM, 'rlmesh-cluster-relay-secret'), 'relay-secret')).toMatch(/^rlm_rs_/);
    // no credential in the log
    expect(agent.log()).not.toMatch(/rlm_(jt|cc|rp|rs)_[0-9A-Za-z]{8}/);

    // Connected, lastSeenAt advancing, nodes reported with the kwok GPU node's 8 GPUs
    const first = await until('cluster Connected', async () => {
      const c = await cluster(suite.cp, clusterId);
      return c.status === 'Connected' && c.nodeReport ? c : undefined;
    });
    const gpu = first.nodeReport!.report.nodes!.find((n) => n.name === 'kwok-gpu-0');
    expect(gpu?.gpusAllocatable).toBe(8);
    await until('lastSeenAt advances', async () => {
      const c = await cluster(suite.cp, clusterId);
      return c.lastSeenAt! > first.lastSeenAt! ? c : undefined;
    }, { timeoutMs: 10_000 });
    expect((await agent.readyz()).status).toBe(200);
    expect(await agent.metrics()).toMatch(/rlmesh_agent_session_state\{state="connected"\} 1/);
    expect(await agent.metrics()).toMatch(/rlmesh_agent_join_outcomes_total\{outcome="joined"\} 1/);

    // restart with the same (now used) token: no join, same credentials. The spool holds
    // the saved answer of a join with another token that was interrupted before its
    // Secrets were written (then, say, helm rollback to this token): the token changed,
    // so those credentials are never used, and the file is removed
    const controlBefore = decode(secret(SYSTEM, 'rlmesh-cluster-control'), 'control')!;
    const relayBefore = decode(secret(SYSTEM, 'rlmesh-cluster-relay-secret'), 'relay-secret')!;
    await agent.stop();
    const stale = join(agent.spoolDir, 'join-result.json');
    writeFileSync(stale, JSON.stringify({ tokenHash: sha256(`rlm_jt_${'s'.repeat(40)}`), result: { clusterId, control: `rlm_cc_${'s'.repeat(40)}`, pull: '{"auths":{}}' } }), { mode: 0o600 });
    const again = await suite.start({ configFile: config, token: joinToken, spoolDir: agent.spoolDir });
    await again.waitFor('session connected after restart', /session connected/);
    expect(again.log()).toMatch(/already in the control Secret; not joining again/);
    expect(again.log()).not.toMatch(/joining the control plane/);
    expect(again.log()).toMatch(/removed the saved answer of an interrupted join with another join token/);
    expect(existsSync(stale)).toBe(false);
    expect(decode(secret(SYSTEM, 'rlmesh-cluster-control'), 'control')).toBe(controlBefore);

    // a new install command (helm upgrade --install --set joinToken=NEW): rejoin and replace
    const newToken = await newInstallCommand(suite.cp, clusterId);
    await again.stop();
    const rejoined = await suite.start({ configFile: config, token: newToken, spoolDir: agent.spoolDir });
    await rejoined.waitFor('session connected after rejoin', /session connected/);
    expect(rejoined.log()).toMatch(/a new join token was given: joining again/);
    const after = secret(SYSTEM, 'rlmesh-cluster-control')!;
    expect(decode(after, 'control')).not.toBe(controlBefore);
    expect(after.metadata?.annotations?.['rlmesh.dev/join-token-sha256']).toBe(createHash('sha256').update(newToken).digest('hex'));
    // the agent connected on the new credentials, which confirms them: the replaced ones are
    // revoked at once, not after the 24-hour overlap a rotation gets (no clock moved here)
    const refused = await tryConnect(suite.cp, controlBefore);
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.Unauthenticated);
    expect((refused as ConnectError).metadata.get('rlmesh-auth-cause')).toBe('revoked');
    expect((refused as ConnectError).rawMessage).toMatch(/joined again with a new install command and its agent confirmed the new credentials/);
    expect(await relayWrite(suite.cp, clusterId, relayBefore)).toEqual({ status: 401, code: 'credential_revoked' });
    const relayAfter = decode(secret(SYSTEM, 'rlmesh-cluster-relay-secret'), 'relay-secret')!;
    expect(relayAfter).not.toBe(relayBefore);
    expect((await relayWrite(suite.cp, clusterId, relayAfter)).status).toBe(400); // authenticated; the empty body is what fails
    // and the agent stays connected on the new ones
    expect(rejoined.lines().filter((l) => l.msg === 'session connected')).toHaveLength(1);
    expect(rejoined.log()).not.toMatch(/refused the control credential/);
    expect((await cluster(suite.cp, clusterId)).status).toBe('Connected');
    await rejoined.stop();
  });

  it('two replicas started together: exactly one trades the token (join Lease), both connect', async () => {
    resetAgentState();
    const { joinToken } = await newCluster(suite.cp, 'two-replicas');
    const config = runtimeConfig(suite.cp);
    const [a, b] = await Promise.all([
      suite.start({ configFile: config, token: joinToken, name: 'rlmesh-cluster-agent-a' }),
      suite.start({ configFile: config, token: joinToken, name: 'rlmesh-cluster-agent-b' }),
    ]);
    await Promise.all([a.waitFor('a connected', /session connected/, { timeoutMs: 90_000 }), b.waitFor('b connected', /session connected/, { timeoutMs: 90_000 })]);
    const joined = [a, b].filter((x) => /joined: credentials written/.test(x.log()));
    expect(joined).toHaveLength(1);
    for (const x of [a, b]) expect(x.log()).not.toMatch(/token_used/);
    const other = joined[0] === a ? b : a;
    expect(other.log()).toMatch(/already in the control Secret; not joining again/);
    await Promise.all([a.stop(), b.stop()]);
  });
});
