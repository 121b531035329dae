// The agent's preflight end to end with the agent's own rights
// (test/preflight/rbac.yaml): every check runs without a permission gap,
// ConfigMap rlmesh-preflight is readable with the documented kubectl
// command, the PreflightReport goes to the session, and outbound 443 and
// clock skew are measured against the reference control plane on loopback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { startTestControlPlane, type TestControlPlane } from '../support/control-plane.ts';
import type { PreflightReport } from '../../lib/gen/rlmesh/v1/session_pb.ts';
import { agentPreflightOnce, startAgentPreflight } from '../../lib/preflight/agent.ts';
import { PROBE_CONFIGMAP, PROBE_KEY } from '../../lib/preflight/checks/network-policy.ts';
import { CHECK_IDS } from '../../lib/preflight/run.ts';
import { runtimeConfigSchema } from '../../lib/runtime-config.ts';
import { kubectl } from '../support/cluster.ts';
import { agentKubeConfig, NS, RUNS, setUpNamespaces, tearDownNamespaces } from './support.ts';
import { until } from '../support/until.ts';

let cp: TestControlPlane;

beforeAll(async () => {
  setUpNamespaces();
  cp = await startTestControlPlane();
});

afterAll(async () => {
  await cp?.close();
  tearDownNamespaces();
});

const configFor = () =>
  runtimeConfigSchema.parse({
    namespace: NS,
    runsNamespace: RUNS,
    controlPlane: { apiHost: 'localhost', apiPort: cp.port, registryHost: 'localhost', caBundlePath: cp.caFile },
    credentials: {},
    observability: {},
    gpuFeatureDiscovery: { enabled: true },
    egress: {},
    artifactCache: {},
  });

describe('agent preflight', () => {
  it('runs every in-cluster check with the agent rights, publishes the ConfigMap and sends the report', async () => {
    const config = configFor();
    const sent: PreflightReport[] = [];
    const report = await agentPreflightOnce({ kc: await agentKubeConfig(), config, log: pino({ level: 'silent' }), send: (r) => void sent.push(r) });

    expect(report.checks.map((c) => c.id)).toEqual(CHECK_IDS.filter((id) => !['install-rights', 'referenced-objects', 'api-addresses', 'helm-version'].includes(id)));
    for (const c of report.checks) expect(c.found, `${c.id} could read what it needs`).not.toMatch(/^could not check/);

    const byId = Object.fromEntries(report.checks.map((c) => [c.id, c]));
    expect(byId['kubernetes-version']!.verdict).toBe('pass');
    expect(byId['storage-class']!.verdict).toBe('pass');
    expect(byId['outbound-443']!.verdict).toBe('fail');
    // nothing should listen on localhost:443 here, but another test's TLS server may, briefly
    expect(byId['outbound-443']!.found).toMatch(new RegExp(`^from the agent pod: localhost:${cp.port} TLS ok in \\d+ ms; localhost:443 (connection refused|TLS certificate not trusted)`));
    expect(byId['outbound-443']!.fix).toMatch(/^(Allow outbound TCP 443 from the cluster's nodes to localhost in your firewall or egress gateway\.|Let TLS to these hosts pass uninspected)/);
    expect(byId['clock-skew']!.verdict).toBe('pass');
    expect(byId['clock-skew']!.found).toContain(`https://localhost:${cp.port}/v1/info (Date header)`);
    expect(byId['network-policy']!.found).toContain('the controller has not reported a NetworkPolicy probe yet');

    // the status users read, with the command the docs give
    const summary = kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-preflight', '-o', 'jsonpath={.data.summary}']).stdout;
    expect(summary).toMatch(/^fail: \d+ fail \([a-z0-9-, ]*outbound-443[a-z0-9-, ]*\), \d+ warn.*, \d+ pass at \d{4}-/);
    const stored = JSON.parse(kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-preflight', '-o', 'jsonpath={.data.report\\.json}']).stdout) as { id: string };
    expect(stored.id).toBe(report.id);

    expect(sent).toHaveLength(1);
    expect(sent[0]!.id).toBe(report.id);
    expect(sent[0]!.checks.map((c) => `${c.id}:${c.verdict}`)).toEqual(report.checks.map((c) => `${c.id}:${c.verdict}`));
    // no probe result yet: the platform is told this cluster cannot run evaluations, and why
    expect(sent[0]!.evaluationsBlocked).toBe(true);
    expect(sent[0]!.evaluationsBlockedReason).toMatch(/^evaluations wait as NetworkPolicyNotEnforced .*the controller has not reported a NetworkPolicy probe yet/);

    // a second run replaces the ConfigMap; with the opt-out set, evaluations are not blocked
    const optedOut = { ...config, evaluations: { runWithoutNetworkPolicyEnforcement: true } };
    const again = await agentPreflightOnce({ kc: await agentKubeConfig(), config: optedOut, log: pino({ level: 'silent' }), send: (r) => void sent.push(r) });
    expect(JSON.parse(kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-preflight', '-o', 'jsonpath={.data.report\\.json}']).stdout).id).toBe(again.id);
    expect(sent[1]!.evaluationsBlocked).toBe(false);
  });

  it('runs at start and on every interval until stopped', async () => {
    const sent: PreflightReport[] = [];
    const stop = startAgentPreflight({ kc: await agentKubeConfig(), config: configFor(), log: pino({ level: 'silent' }), send: (r) => void sent.push(r), intervalMs: 1500 });
    try {
      await until('two reports', () => (sent.length >= 2 ? true : undefined), { timeoutMs: 30_000 });
    } finally {
      stop();
    }
    const count = sent.length;
    await new Promise((r) => setTimeout(r, 2500));
    expect(sent.length).toBe(count);
    expect(new Set(sent.map((r) => r.id)).size).toBe(count);
  });

  // a fresh install: the agent's first run may come before the controller's first probe
  it('runs again once the controller writes a probe verdict that differs from what its last run saw, without waiting for the interval', async () => {
    kubectl(['-n', NS, 'delete', 'configmap', PROBE_CONFIGMAP, '--ignore-not-found']);
    const sent: PreflightReport[] = [];
    const config = { ...configFor(), preflight: { networkPolicyProbe: { enabled: true, image: '' } } };
    const hour = 3600_000;
    const stop = startAgentPreflight({ kc: await agentKubeConfig(), config, log: pino({ level: 'silent' }), send: (r) => void sent.push(r), intervalMs: hour, blockedIntervalMs: hour, probePollMs: 3000 });
    try {
      await until('the first report', () => (sent.length >= 1 ? true : undefined), { timeoutMs: 60_000 });
      const first = sent[0]!.checks.find((c) => c.id === 'network-policy')!;
      expect(first.found).toContain('the controller has not reported a NetworkPolicy probe yet');
      // as the controller writes it (the agent's rights cannot)
      const probe = { id: 'network-policy', verdict: 'pass', found: 'a test pod in rlmesh-runs was refused what the policies forbid', fix: 'Nothing to do.', at: new Date().toISOString() };
      kubectl(['-n', NS, 'create', 'configmap', PROBE_CONFIGMAP, `--from-literal=${PROBE_KEY}=${JSON.stringify(probe)}`]);
      await until('a report that saw the probe', () => (sent.length >= 2 ? true : undefined), { timeoutMs: 30_000 });
      expect(sent).toHaveLength(2);
      expect(sent[1]!.checks.find((c) => c.id === 'network-policy')).toMatchObject({ verdict: 'pass', found: expect.stringContaining(probe.found) });
      // the same verdict at the next polls: no further run
      await new Promise((r) => setTimeout(r, 7000));
      expect(sent).toHaveLength(2);
    } finally {
      stop();
      kubectl(['-n', NS, 'delete', 'configmap', PROBE_CONFIGMAP, '--ignore-not-found']);
    }
  });
});
