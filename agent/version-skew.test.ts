// The agent's side of the version skew policy, against a real control plane on
// loopback: a version the control plane accepts connects and records both
// versions; one it refuses leaves the agent up, in state unsupported, with the
// control plane's line in its log and its metric, and a /readyz reason of its own.
import { rmSync } from 'node:fs';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pkg from '../package.json' with { type: 'json' };
import { joinedCluster, startTestControlPlane, type TestControlPlane } from '../test/support/control-plane.ts';
import { until } from '../test/support/until.ts';
import { Session, type SessionState, type VersionSkew } from './control-plane-session.ts';
import { createMetrics } from './metrics.ts';
import { Readiness } from './readiness.ts';
import { agentStatus, RotationLog } from './status-publisher.ts';
import { agentVerdict } from '../lib/status/checks/agent.ts';

let cp: TestControlPlane;

beforeAll(async () => {
  cp = await startTestControlPlane({ tlsHosts: ['localhost'] });
});

afterAll(async () => {
  await cp?.close();
  rmSync(cp.dir, { recursive: true, force: true });
});

async function agent(agentVersion: string) {
  const joined = await joinedCluster(cp);
  const lines: { level: number; msg: string }[] = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { level: number; msg: string }) });
  const metrics = createMetrics({ spoolBytes: () => 0, spoolRecords: () => 0, spoolMaxBytes: 1, credentialAgeSeconds: () => 0 });
  const states: SessionState[] = [];
  const session = new Session({
    target: { host: 'localhost', port: cp.port },
    ca: cp.ca,
    proxy: undefined,
    credential: () => joined,
    agentVersion,
    kubernetesVersion: () => 'v1.35.4',
    timing: { heartbeatMs: 200, silenceMs: 5000, backoffBaseMs: 100, backoffMaxMs: 500, authBackoffMs: 60_000, reportDelayMs: 10, watchSilenceMs: 60_000, leaseSeconds: 15 },
    log,
    pendingIds: () => [],
    onConnected: () => undefined,
    onMessage: () => undefined,
    onState: (s) => (states.push(s), metrics.setState(s)),
    onReconnect: () => undefined,
    onVersionSkew: (v) => metrics.setVersionSkew(v),
  });
  const readiness = new Readiness();
  readiness.credentialProblem = undefined;
  readiness.attach({ session });
  session.start();
  return { session, lines, metrics, states, readiness };
}

describe('the agent and the version skew policy', () => {
  it('a supported version connects and reports both versions', async () => {
    const a = await agent(pkg.version);
    try {
      await until('connected', () => (a.session.currentState === 'connected' ? true : undefined), { timeoutMs: 10_000 });
      expect(a.session.versionSkew).toEqual({ agentVersion: pkg.version, controlPlaneVersion: pkg.version, verdict: 'supported', line: '' } satisfies VersionSkew);
      expect(await a.metrics.registry.getSingleMetricAsString('rlmesh_agent_version_skew')).toContain(`rlmesh_agent_version_skew{agent_version="${pkg.version}",control_plane_version="${pkg.version}",verdict="supported"} 1`);
      expect(a.lines.find((l) => l.msg === 'session connected')).toMatchObject({ controlPlaneVersion: pkg.version, agentVersion: pkg.version });
    } finally {
      await a.session.stop();
    }
  });

  it('a version the control plane refuses: one error line saying what to do, state unsupported, not ready with a reason that does not echo the control plane', async () => {
    const [major, minor] = pkg.version.split('.').map(Number) as [number, number];
    const newer = `${major}.${minor + 1}.0`;
    const a = await agent(newer);
    try {
      await until('refused', () => (a.session.currentState === 'unsupported' ? true : undefined), { timeoutMs: 10_000 });
      expect(a.session.versionSkew).toMatchObject({ agentVersion: newer, controlPlaneVersion: pkg.version, verdict: 'unsupported' });
      const errors = a.lines.filter((l) => l.level >= 50);
      expect(errors).toHaveLength(1);
      expect(errors[0]!.msg).toMatch(new RegExp(`^the control plane refused this agent's version: agent ${newer} refused: it is newer than the control plane, .*install a chart of the line ${major}\\.${minor}`));
      // /readyz says it in the agent's own words: the control plane's line is in the log, never in the readiness body
      expect(a.readiness.notReady()).toBe("no live session to the control plane: it refused this agent's version (the agent log says why, and which chart versions it supports)");
      expect(a.readiness.notReady()).not.toContain(a.session.versionSkew!.line);
      const metric = await a.metrics.registry.getSingleMetricAsString('rlmesh_agent_version_skew');
      expect(metric).toContain(`verdict="unsupported"`);
      expect(await a.metrics.registry.getSingleMetricAsString('rlmesh_agent_session_state')).toContain('rlmesh_agent_session_state{state="unsupported"} 1');
      // what the agent publishes, as rlmesh status shows it: the control plane's line and the upgrade to make
      const published = agentStatus({
        agentVersion: newer, session: a.session, credentials: { credentials: { clusterId: 'c-1', tokenHash: undefined }, ageSeconds: 0 },
        rotations: new RotationLog(), spool: { records: 0, bytes: 0 }, spoolMaxBytes: 1, draining: () => false,
      });
      const shown = agentVerdict({ namespace: 'rlmesh-system', published: { kind: 'ok', status: published }, apiHost: 'localhost', now: Date.now() });
      expect(shown.verdict).toBe('fail');
      expect(shown.found).toBe(`cluster c-1: the control plane (localhost) refuses agent ${newer} (control plane ${pkg.version}): ${a.session.versionSkew!.line}`);
      expect(errors[0]!.msg).toBe(`the control plane refused this agent's version: ${a.session.versionSkew!.line}`);
      expect(shown.fix).toMatch(/^Upgrade the chart to a release the control plane accepts/);
      // it waits as long as after a refused credential (authBackoffMs) before it asks again
      await new Promise((r) => setTimeout(r, 500));
      expect(a.states).toEqual(['unsupported']);
    } finally {
      await a.session.stop();
    }
  });
});
