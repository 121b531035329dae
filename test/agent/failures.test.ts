// What a user meets when something is wrong: a used, expired or invalid token,
// a /v1/info that names another session endpoint, and a bad config. Each is one log line naming the cause and the fix; the
// agent stays up (not ready) and retries instead of crash-looping, except for a
// bad config, which exits non-zero naming the field.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { api, ROOT, startControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { cluster, newCluster, resetAgentState, runtimeConfig, secret, SYSTEM } from './harness.ts';
import { agentSuite } from './suite.ts';
import { tempDir } from '../support/temp.ts';

const ERROR = 50;

describe('agent failures a user can meet', () => {
  const suite = agentSuite({ joinToken: true }, {
    resetEach: true,
  });

  const expectRefusal = async (token: string, code: string, cause: RegExp, said: string) => {
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp), token });
    const line = await agent.waitFor(`${code} log line`, new RegExp(`"code":"${code}"`));
    const entry = JSON.parse(line) as { level: number; msg: string };
    expect(entry.level).toBe(ERROR);
    expect(entry.msg).toMatch(cause);
    expect(entry.msg).toMatch(/new install command/i);
    expect(entry.msg).not.toContain(token);
    // retried with backoff, never a crash loop, and not ready meanwhile
    await until('a retry', () => agent.lines().filter((l) => l.code === code).length >= 2 || undefined, { timeoutMs: 20_000 });
    expect(agent.proc.exitCode).toBeNull();
    const ready = await agent.readyz();
    expect(ready.status).toBe(503);
    expect(ready.body).toMatch(cause);
    // in the agent's own words: the control plane's message is in the log line, never in /readyz
    expect(entry.msg).toContain(said);
    expect(ready.body).not.toContain(said);
    expect(await agent.metrics()).toMatch(new RegExp(`rlmesh_agent_join_outcomes_total\\{outcome="${code}"\\} [1-9]`));
    expect(agent.log()).not.toContain(token);
    expect(secret(SYSTEM, 'rlmesh-cluster-control')).toBeUndefined();
    await agent.stop();
  };

  it('a used token: names the cause and the fix', async () => {
    const { joinToken } = await newCluster(suite.cp, 'used');
    const first = await suite.start({ configFile: runtimeConfig(suite.cp), token: joinToken });
    await first.waitFor('first join', /session connected/);
    await first.stop();
    resetAgentState(); // the credentials are gone (say, a reinstall into a fresh namespace): the token cannot be traded again
    await expectRefusal(joinToken, 'token_used', /join token already used/, 'this join token was already used at');
  });

  it('an expired token: names the cause and the fix', async () => {
    const { joinToken } = await newCluster(suite.cp, 'expired');
    const r = await api(suite.cp, 'POST', '/v1/test/clock/advance', { ms: 2 * 3600 * 1000 });
    expect(r.status).toBe(200);
    await expectRefusal(joinToken, 'token_expired', /join token expired/, 'this join token expired at');
  });

  it('an invalid token: names the cause and the fix', async () => {
    await expectRefusal(`rlm_jt_${'Q'.repeat(40)}`, 'token_invalid', /join token invalid/, 'is not known to this control plane');
  });

  // The agent is configured with controlPlane.apiHost=127.0.0.1 and controlPlane.apiPort=<the
  // control plane's ephemeral port> (the chart always renders 443; only tests set the port).
  // This control plane answers /v1/info with localhost, which its certificate covers and which
  // reaches the same server: only the pin keeps the agent from dialling it.
  it('a /v1/info naming another session endpoint: one line with the cause and the fix, retried, never dialled', async () => {
    const other = await startControlPlane({ args: ['--advertise-host', 'localhost', '--ping-interval', '1', '--silence-timeout', '10'] });
    try {
      const { clusterId, joinToken } = await newCluster(other, 'pinned-endpoint');
      const agent = await suite.start({ configFile: runtimeConfig(other), token: joinToken });
      const line = await agent.waitFor('untrusted endpoint line', /"code":"untrusted_session_endpoint"/);
      const entry = JSON.parse(line) as { level: number; msg: string };
      expect(entry.level).toBe(ERROR);
      const port = new URL(other.url).port;
      expect(entry.msg).toContain(`/v1/info named the session endpoint localhost:${port}, which the agent refuses (host localhost is not the configured API host 127.0.0.1)`);
      expect(entry.msg).toMatch(/check that controlPlane\.apiHost is the rlmesh API/);
      await until('a retry', () => agent.lines().filter((l) => l.code === 'untrusted_session_endpoint').length >= 2 || undefined, { timeoutMs: 20_000 });
      expect(agent.proc.exitCode).toBeNull();
      const ready = await agent.readyz();
      expect(ready.status).toBe(503);
      expect(ready.body).toMatch(/which the agent refuses/);
      // the name the control plane chose is in the log line only
      expect(ready.body).not.toContain(`localhost:${port}`);
      expect(agent.log()).not.toMatch(/session connected/);
      expect((await cluster(other, clusterId)).status).not.toBe('Connected');
      await agent.stop();
    } finally {
      await other.stop();
    }
  });

  it('a bad config exits non-zero with one line naming the field', () => {
    const dir = tempDir('agent-badcfg-');
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ controlPlane: { apiHost: 'https://api.rlmesh.dev' }, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {} }));
    const r = spawnSync(join(ROOT, 'node_modules/.bin/node'), [join(ROOT, 'agent/main.ts')], {
      env: { PATH: process.env.PATH ?? '', RLMESH_CONFIG: file, RLMESH_SPOOL_DIR: dir },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.status).not.toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!).msg).toMatch(/field 'controlPlane.apiHost' must be a bare lowercase DNS name/);

    const badEnv = spawnSync(join(ROOT, 'node_modules/.bin/node'), [join(ROOT, 'agent/main.ts')], {
      env: { PATH: process.env.PATH ?? '', RLMESH_CONFIG: runtimeConfig(suite.cp), RLMESH_SPOOL_DIR: dir, RLMESH_JOIN_TOKEN: 'not-a-token' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(badEnv.status).not.toBe(0);
    expect(badEnv.stdout.trim().split('\n')).toHaveLength(1);
    expect(badEnv.stdout).toMatch(/RLMESH_JOIN_TOKEN must look like rlm_jt_/);
    expect(badEnv.stdout).not.toContain('not-a-token');
  });
});
