// The session: control-plane-initiated rotation written into the Secrets the
// agent owns and followed without a restart (the old credential still valid
// within the overlap, refused after it),
// and a control-plane restart: the agent goes unready within the silence
// window, reconnects, and lastSeenAt advances again; and a restart while the
// control plane is away: not ready naming it, connected once it is back.
import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { api } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { cluster, controlPlane, decode, newCluster, resetAgentState, runtimeConfig, RUNS, secret, SYSTEM, tryConnect } from './harness.ts';
import { agentSuite } from './suite.ts';

describe('agent session', () => {
  const suite = agentSuite({ joinToken: true });

  it('writes a rotation sent over the session into the Secrets and re-authenticates without a restart; the old control credential keeps its overlap, then is refused as expired', async () => {
    const { clusterId, joinToken } = await newCluster(suite.cp, 'rotation');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp), token: joinToken });
    await agent.waitFor('connected', /session connected/);
    const pid = agent.proc.pid;
    const old = decode(secret(SYSTEM, 'rlmesh-cluster-control'), 'control')!;

    const r = await api<{ value: string; deliveredToSession: boolean }>(suite.cp, 'POST', `/v1/clusters/${clusterId}/credentials/control/rotate`);
    expect(r.status).toBe(200);
    expect(r.body.deliveredToSession).toBe(true);
    await until('control Secret holds the rotated value', () => (decode(secret(SYSTEM, 'rlmesh-cluster-control'), 'control') === r.body.value ? true : undefined), { timeoutMs: 20_000 });
    await until('session re-authenticated', () => (agent.lines().filter((l) => l.msg === 'session connected').length >= 2 ? true : undefined), { timeoutMs: 20_000 });
    expect(agent.proc.pid).toBe(pid);
    expect(agent.log()).not.toContain(r.body.value);

    const pull = await api<{ value: string }>(suite.cp, 'POST', `/v1/clusters/${clusterId}/credentials/pull/rotate`);
    expect(pull.status).toBe(200);
    for (const ns of [SYSTEM, RUNS]) {
      await until(`pull Secret in ${ns} rotated`, () => (decode(secret(ns, 'rlmesh-registry-pull'), '.dockerconfigjson') === pull.body.value ? true : undefined), { timeoutMs: 20_000 });
    }

    // the old value keeps its whole overlap although the agent uses the new one (a GitOps sync may restore it:
    // controlplane/README.md); it used to be revoked at once, which took such clusters offline
    expect(await tryConnect(suite.cp, old)).toBe('connected');
    expect((await api(suite.cp, 'POST', '/v1/test/clock/advance', { ms: 25 * 3600 * 1000 })).status).toBe(200);
    const refused = await tryConnect(suite.cp, old);
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.Unauthenticated);
    expect((refused as ConnectError).rawMessage).toMatch(/control credential expired: it was replaced by a rotation at .* and its 24-hour overlap ended at /);
    // the agent, on the new credential, stays connected and seen
    const seen = (await cluster(suite.cp, clusterId)).lastSeenAt!;
    await until('lastSeenAt advances on the new credential', async () => ((await cluster(suite.cp, clusterId)).lastSeenAt! > seen ? true : undefined), { timeoutMs: 10_000 });
    expect((await cluster(suite.cp, clusterId)).status).toBe('Connected');
    expect(agent.log()).not.toMatch(/refused the control credential/);
    await agent.stop();
  });

  it('a control-plane restart: unready within the silence window, then reconnected with lastSeenAt advancing', async () => {
    resetAgentState();
    const { clusterId, joinToken } = await newCluster(suite.cp, 'restart');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp), token: joinToken });
    await agent.waitFor('connected', /session connected/);
    await until('ready', async () => ((await agent.readyz()).status === 200 ? true : undefined), { timeoutMs: 10_000 });

    const port = new URL(suite.cp.url).port;
    const { dataDir } = suite.cp;
    await suite.cp.stop('SIGKILL');
    // --silence-ms is 5 s in the tests (45 s in production)
    await until('unready after the control plane died', async () => ((await agent.readyz()).status === 503 ? true : undefined), { timeoutMs: 60_000 });

    suite.cp = await controlPlane(dataDir, `127.0.0.1:${port}`);
    await until('reconnected', () => (agent.lines().filter((l) => l.msg === 'session connected').length >= 2 ? true : undefined), { timeoutMs: 60_000 });
    const first = await until('Connected again', async () => {
      const c = await cluster(suite.cp, clusterId);
      return c.status === 'Connected' ? c : undefined;
    }, { timeoutMs: 10_000 });
    await until('lastSeenAt advances again', async () => ((await cluster(suite.cp, clusterId)).lastSeenAt! > first.lastSeenAt! ? true : undefined), { timeoutMs: 10_000 });
    await until('ready again', async () => ((await agent.readyz()).status === 200 ? true : undefined), { timeoutMs: 10_000 });
    expect(await agent.metrics()).toMatch(/rlmesh_agent_session_reconnects_total [1-9]/);
    await agent.stop();
  });

  it('a restart while the control plane is away: not ready naming it, then connected once it is back', async () => {
    resetAgentState();
    const { clusterId, joinToken } = await newCluster(suite.cp, 'away-at-start');
    const configFile = runtimeConfig(suite.cp);
    const first = await suite.start({ configFile, token: joinToken });
    await first.waitFor('connected', /session connected/);
    await first.stop();

    const port = new URL(suite.cp.url).port;
    const { dataDir } = suite.cp;
    await suite.cp.stop('SIGKILL');
    // the restart opens its session connection early, while discovery runs: that attempt fails here
    const again = await suite.start({ configFile, spoolDir: first.spoolDir });
    await until('not ready, naming the unreachable control plane', async () => {
      const r = await again.readyz();
      return r.status === 503 && /cannot discover the session endpoint: cannot reach the control plane at controlPlane\.apiHost \(the agent log says why/.test(r.body) ? true : undefined;
    }, { timeoutMs: 15_000 });
    expect(again.log()).toMatch(/cannot reach the control plane at https:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    expect(again.log()).not.toMatch(/session connected/);

    suite.cp = await controlPlane(dataDir, `127.0.0.1:${port}`);
    await again.waitFor('connected', /session connected/, { timeoutMs: 30_000 });
    await until('Connected', async () => ((await cluster(suite.cp, clusterId)).status === 'Connected' ? true : undefined), { timeoutMs: 10_000 });
    await until('ready', async () => ((await again.readyz()).status === 200 ? true : undefined), { timeoutMs: 10_000 });
    await again.stop();
  });
});
