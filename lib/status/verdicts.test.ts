import type * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { AgentStatus } from '../agent-status.ts';
import type { RLMeshCache, RLMeshEvaluation } from '../crds/types.ts';
import { cliChartSkew, componentSkew } from '../version-skew.ts';
import { agentVerdict } from './checks/agent.ts';
import { apiRuleCidrs, apiServerDriftVerdict } from './checks/api-server-addresses.ts';
import { cacheVerdict } from './checks/cache.ts';
import { credentialsVerdict, excerpt, publishedMetadata, pullRefusals, type CredentialFacts } from './checks/credentials.ts';
import { egressVerdict, parseDecisions, parseRecent } from './checks/egress-proxy.ts';
import { evaluationsVerdict } from './checks/evaluations.ts';
import { leaderVerdict } from './checks/leader.ts';
import { networkPolicyVerdict } from './checks/network-policy.ts';
import { preflightVerdict } from './checks/preflight.ts';
import { privateDestinationVerdict } from '../preflight/checks/private-via-proxy.ts';
import { releaseVerdict } from './checks/release.ts';
import { spoolVerdict } from './checks/spool.ts';
import { formatStatusTable, statusExitCode } from './format.ts';
import { ago } from './types.ts';

const NOW = Date.parse('2026-05-01T12:00:00Z');
const at = (msAgo: number): string => new Date(NOW - msAgo).toISOString();

function agent(o: { state?: string; updatedAgo?: number; spool?: [number, number]; rotations?: AgentStatus['credentials']['rotations']; draining?: boolean; versionSkew?: AgentStatus['session']['versionSkew'] } = {}): AgentStatus {
  const connected = (o.state ?? 'connected') === 'connected';
  return {
    agentVersion: '0.1.0',
    pod: 'rlmesh-cluster-agent-1',
    updatedAt: at(o.updatedAgo ?? 5_000),
    session: { state: o.state ?? 'connected', clusterId: 'c-1', lastHeardAt: at(3_000), ...(connected ? { connectedSince: at(600_000) } : { disconnectedSince: at(90_000) }), ...(o.versionSkew ? { versionSkew: o.versionSkew } : {}) },
    credentials: { source: 'join', inUseSince: at(7200_000), rotations: o.rotations ?? [] },
    spool: { records: 4, bytes: o.spool?.[0] ?? 1000, maxBytes: o.spool?.[1] ?? 10_000 },
    draining: o.draining ?? false,
  };
}

describe('skew policy', () => {
  it('CLI and chart of the same minor pass; another minor fails naming both and what to do', () => {
    expect(cliChartSkew('0.1.0', '0.1.7')).toEqual({ ok: true });
    // the policy of lib/version-skew.ts: the same major, at most 2 minors apart
    expect(cliChartSkew('0.3.0', '0.1.0')).toEqual({ ok: true });
    const r = cliChartSkew('0.4.0', '0.1.0');
    expect(r.ok).toBe(false);
    expect(r.ok === false && r.problem).toMatch(/^CLI 0\.4\.0 does not support chart 0\.1\.0/);
    expect(r.ok === false && r.fix).toBe("Use the rlmesh CLI 0.1.x that the chart's release ships.");
    expect(cliChartSkew('dev', '0.1.0').ok).toBe(false);
    expect(componentSkew('rlmesh-cluster-agent', '0.1.0', '0.1.0').ok).toBe(true);
    expect(componentSkew('rlmesh-cluster-agent', '0.0.9', '0.1.0').ok).toBe(false);
  });
});

describe('release', () => {
  const deployment = (chart: string): k8s.V1Deployment => ({
    metadata: { name: 'rlmesh-cluster-agent', labels: { 'helm.sh/chart': `rlmesh-runtime-${chart}`, 'app.kubernetes.io/version': chart, 'app.kubernetes.io/instance': 'rlmesh' } },
    spec: { selector: {}, template: { spec: { containers: [{ name: 'a', image: `registry.rlmesh.dev/rlmesh/rlmesh-runtime@sha256:${'a'.repeat(64)}` }] } } },
  });
  it('passes within the skew, listing chart, images, agent and CLI', () => {
    const r = releaseVerdict({ namespace: 'rlmesh-system', deployments: [deployment('0.1.0')], agentVersion: '0.1.0', cliVersion: '0.1.2' });
    expect(r.verdict).toBe('pass');
    expect(r.found).toBe(`release rlmesh: chart 0.1.0 (appVersion 0.1.0), agent 0.1.0, CLI 0.1.2; images registry.rlmesh.dev/rlmesh/rlmesh-runtime@sha256:${'a'.repeat(12)}…`);
  });
  it('fails outside the skew, and without a release', () => {
    expect(releaseVerdict({ namespace: 'rlmesh-system', deployments: [deployment('0.4.0')], agentVersion: '0.4.0', cliVersion: '0.1.0' }).verdict).toBe('fail');
    const none = releaseVerdict({ namespace: 'x', deployments: [], agentVersion: undefined, cliVersion: '0.1.0' });
    expect(none).toMatchObject({ verdict: 'fail', found: 'no rlmesh-runtime release in namespace x' });
  });
});

describe('agent', () => {
  const v = (published: Parameters<typeof agentVerdict>[0]['published']) => agentVerdict({ namespace: 'rlmesh-system', published, apiHost: 'api.rlmesh.dev', now: NOW });
  it('connected: the cluster id, since when, last heard', () => {
    expect(v({ kind: 'ok', status: agent() })).toEqual({
      id: 'agent',
      verdict: 'pass',
      found: `cluster c-1 connected since ${at(600_000)} (10m), last heard from the control plane (api.rlmesh.dev) 3s ago`,
      fix: 'Nothing to do.',
    });
  });
  it('fails when not connected, saying since when and what to do; a refused credential says so', () => {
    const r = v({ kind: 'ok', status: agent({ state: 'backoff' }) });
    expect(r.verdict).toBe('fail');
    expect(r.found).toBe(`cluster c-1 not connected since ${at(90_000)} (90s): session backoff, last heard from the control plane (api.rlmesh.dev) 3s ago`);
    expect(r.fix).toMatch(/^The agent cannot hold a session to the control plane \(api.rlmesh.dev\): check that the control plane is up/);
    expect(v({ kind: 'ok', status: agent({ state: 'unauthenticated' }) }).fix).toMatch(/refuses the control credential/);
  });
  it('a version the control plane refuses fails with its line and the upgrade; the oldest supported line warns', () => {
    const refused = v({ kind: 'ok', status: agent({ state: 'unsupported', versionSkew: { controlPlaneVersion: '0.4.0', verdict: 'unsupported', line: 'agent 0.1.0 is older than this control plane accepts (0.2 to 0.4)' } }) });
    expect(refused).toMatchObject({ verdict: 'fail', found: 'cluster c-1: the control plane (api.rlmesh.dev) refuses agent 0.1.0 (control plane 0.4.0): agent 0.1.0 is older than this control plane accepts (0.2 to 0.4)' });
    expect(refused.fix).toMatch(/^Upgrade the chart to a release the control plane accepts/);
    const oldest = v({ kind: 'ok', status: agent({ versionSkew: { controlPlaneVersion: '0.3.0', verdict: 'oldest', line: 'agent 0.1 is the oldest line this control plane accepts' } }) });
    expect(oldest).toMatchObject({ verdict: 'warn', found: expect.stringMatching(/connected since .*; agent 0\.1 is the oldest line this control plane accepts$/) });
    expect(v({ kind: 'ok', status: agent({ versionSkew: { controlPlaneVersion: '0.1.0', verdict: 'supported', line: '' } }) }).verdict).toBe('pass');
  });
  it('fails when the agent stopped publishing or never did; warns while draining', () => {
    expect(v({ kind: 'ok', status: agent({ updatedAgo: 120_000 }) })).toMatchObject({ verdict: 'fail', found: expect.stringContaining('last reported 2m ago') });
    expect(v({ kind: 'missing' }).verdict).toBe('fail');
    expect(v({ kind: 'unreadable', problem: 'x' }).verdict).toBe('fail');
    expect(v({ kind: 'ok', status: agent({ draining: true }) }).verdict).toBe('warn');
  });
});

describe('credentials', () => {
  const meta = (annotations: Record<string, string> = {}): k8s.V1ObjectMeta => ({ annotations, managedFields: [{ time: new Date(NOW - 3 * 3600_000), manager: 'x' }] });
  const facts = (o: Partial<CredentialFacts> = {}): CredentialFacts => ({
    namespace: 'rlmesh-system', runsNamespace: 'rlmesh-runs', controlSecret: 'rlmesh-cluster-control', pullSecret: 'rlmesh-registry-pull',
    control: meta({ 'rlmesh.dev/join-token-sha256': 'ab' }),
    pull: [{ namespace: 'rlmesh-system', meta: meta() }, { namespace: 'rlmesh-runs', meta: meta() }],
    agent: agent(), pullRefusals: [], now: NOW, ...o,
  });
  it('passes with the source and age', () => {
    const r = credentialsVerdict(facts());
    expect(r.verdict).toBe('pass');
    expect(r.found).toBe(`control Secret rlmesh-cluster-control written by the join, written 3h 0m ago, in use by the agent since ${at(7200_000)}; pull Secret rlmesh-registry-pull in rlmesh-system and rlmesh-runs`);
    expect(credentialsVerdict(facts({ control: meta() })).found).toContain('delivered out of band');
  });
  it('a pull the registry refuses fails naming the pod and the Secret to fix', () => {
    const pod: k8s.V1Pod = { metadata: { namespace: 'rlmesh-runs', name: 'filler-1' }, status: { containerStatuses: [{ name: 'f', image: 'i', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image: 401 Unauthorized' } } }] } };
    const r = credentialsVerdict(facts({ pullRefusals: pullRefusals([pod]) }));
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain('the registry refuses it: pod rlmesh-runs/filler-1 ImagePullBackOff: Back-off pulling image: 401 Unauthorized');
    expect(r.fix).toMatch(/^Put the pull credential the join wrote back into Secret rlmesh-runs\/rlmesh-registry-pull/);
    const notFound = { ...pod, status: { containerStatuses: [{ ...pod.status!.containerStatuses![0]!, state: { waiting: { reason: 'ErrImagePull', message: 'not found' } } }] } };
    expect(credentialsVerdict(facts({ pullRefusals: pullRefusals([notFound]) })).verdict).toBe('warn');
  });
  it('missing Secrets fail; a refused rotation fails, one being stored warns', () => {
    expect(credentialsVerdict(facts({ control: undefined })).verdict).toBe('fail');
    expect(credentialsVerdict(facts({ pull: [{ namespace: 'rlmesh-runs', meta: undefined }] })).found).toBe('pull Secret rlmesh-runs/rlmesh-registry-pull does not exist');
    const refused = credentialsVerdict(facts({ agent: agent({ rotations: [{ purpose: 'pull', state: 'refused', since: at(0), problem: 'the value is not JSON' }] }) }));
    expect(refused).toMatchObject({ verdict: 'fail', found: expect.stringContaining('refused a pull rotation') });
    expect(credentialsVerdict(facts({ agent: agent({ rotations: [{ purpose: 'control', state: 'storing', since: at(0) }] }) })).verdict).toBe('warn');
  });
  it('a rotation awaiting a Secret the operator delivers warns with the Secret, key and deadline, and fails once the deadline passed', () => {
    const pending = (until: string) => facts({ agent: agent({ rotations: [{ purpose: 'control', state: 'awaiting-secret', since: at(60_000), secrets: ['rlmesh-system/rlmesh-secrets'], key: 'control', until }] }) });
    const later = new Date(Date.parse(at(0)) + 24 * 3600_000).toISOString();
    const r = credentialsVerdict(pending(later));
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain(`rotation pending: write the new control value into rlmesh-system/rlmesh-secrets key "control" by ${later}`);
    expect(r.fix).toMatch(/the agent follows it without a restart/);
    const over = credentialsVerdict(pending(at(1000)));
    expect(over.verdict).toBe('fail');
    expect(over.fix).toContain(`The overlap of the control rotation ended at ${at(1000)}`);
  });
  it('a kube context that may not read Secrets: the metadata the agent published, said so; nothing published is no answer', () => {
    const wanted = [['rlmesh-system', 'rlmesh-cluster-control'], ['rlmesh-system', 'rlmesh-registry-pull'], ['rlmesh-runs', 'rlmesh-registry-pull']] as const;
    const published = agent();
    published.credentials.secrets = [
      { namespace: 'rlmesh-system', name: 'rlmesh-cluster-control', exists: true, fromJoin: true, writtenAt: at(3 * 3600_000) },
      { namespace: 'rlmesh-system', name: 'rlmesh-registry-pull', exists: true, fromJoin: true, writtenAt: at(3 * 3600_000) },
      { namespace: 'rlmesh-runs', name: 'rlmesh-registry-pull', exists: true, fromJoin: true, writtenAt: at(3 * 3600_000) },
    ];
    const [control, pullSys, pullRuns] = publishedMetadata(published, wanted)!;
    const r = credentialsVerdict(facts({ control, pull: [{ namespace: 'rlmesh-system', meta: pullSys }, { namespace: 'rlmesh-runs', meta: pullRuns }], agent: published, fromAgent: true }));
    expect(r.verdict).toBe('pass');
    expect(r.found).toBe(`control Secret rlmesh-cluster-control written by the join, written 3h 0m ago, in use by the agent since ${at(7200_000)}; pull Secret rlmesh-registry-pull in rlmesh-system and rlmesh-runs (as the agent published their metadata)`);
    published.credentials.secrets[2] = { namespace: 'rlmesh-runs', name: 'rlmesh-registry-pull', exists: false };
    const gone = publishedMetadata(published, wanted)!;
    expect(credentialsVerdict(facts({ control: gone[0], pull: [{ namespace: 'rlmesh-system', meta: gone[1] }, { namespace: 'rlmesh-runs', meta: gone[2] }], fromAgent: true })).found).toBe('pull Secret rlmesh-runs/rlmesh-registry-pull does not exist');
    expect(publishedMetadata(agent(), wanted)).toBeUndefined();
  });
});

describe('preflight and network-policy', () => {
  const report = (verdicts: ('pass' | 'warn' | 'fail')[]) => ({ id: 'r', at: at(60_000), mode: 'agent' as const, checks: verdicts.map((verdict, i) => ({ id: `c${i}`, verdict, found: `found ${i}`, fix: `fix ${i}` })) });
  it('preflight: fail and warn name each check and its fix', () => {
    expect(preflightVerdict('ns', report(['pass', 'pass']), NOW)).toMatchObject({ verdict: 'pass', found: `all 2 checks passed at ${at(60_000)} (60s ago)` });
    expect(preflightVerdict('ns', report(['pass', 'fail']), NOW)).toMatchObject({ verdict: 'fail', found: expect.stringContaining('c1: found 1'), fix: 'c1: fix 1' });
    expect(preflightVerdict('ns', report(['warn']), NOW).verdict).toBe('warn');
    expect(preflightVerdict('ns', undefined, NOW).verdict).toBe('warn');
    // the agent's check of the corporate proxy: a proxy that opens private destinations fails status with the check's fix
    const opens = privateDestinationVerdict({ target: '10.96.0.1:443', proxy: 'http://proxy.corp:3128', opened: true, withoutCredentials: false });
    const failing = preflightVerdict('ns', { id: 'r', at: at(60_000), mode: 'agent', checks: [opens] } as const, NOW);
    expect(failing).toMatchObject({ verdict: 'fail', found: expect.stringContaining('private-via-proxy: asked the corporate proxy http://proxy.corp:3128 for CONNECT 10.96.0.1:443') });
    expect(failing.fix).toContain('private-via-proxy: The egress proxy hands it only addresses it checked');
  });
  it('network-policy: not enforced fails (evaluations wait), unless opted out (warn)', () => {
    const stored = { id: 'network-policy', verdict: 'fail' as const, found: 'the target was reachable', fix: 'Install a CNI that enforces NetworkPolicy.', at: at(10_000) };
    const r = networkPolicyVerdict(stored, { probeEnabled: true, runWithoutEnforcement: false, now: NOW });
    expect(r.verdict).toBe('fail');
    expect(r.found).toMatch(/the target was reachable .*; evaluations wait as NetworkPolicyNotEnforced$/);
    expect(r.fix).toMatch(/runWithoutNetworkPolicyEnforcement=true/);
    expect(networkPolicyVerdict(stored, { probeEnabled: true, runWithoutEnforcement: true, now: NOW }).verdict).toBe('warn');
    expect(networkPolicyVerdict({ ...stored, verdict: 'pass', found: 'refused' }, { probeEnabled: true, runWithoutEnforcement: false, now: NOW })).toMatchObject({ verdict: 'pass', found: expect.stringMatching(/^enforced: refused/) });
    expect(networkPolicyVerdict(undefined, { probeEnabled: false, runWithoutEnforcement: false, now: NOW }).verdict).toBe('fail');
  });
});

describe('controller-leader', () => {
  const lease = (holder: string | undefined, renewedAgo: number): k8s.V1Lease => ({ spec: { ...(holder ? { holderIdentity: holder } : {}), renewTime: new Date(NOW - renewedAgo), leaseDurationSeconds: 15 } });
  it('passes with a fresh holder, fails with none or an expired one', () => {
    expect(leaderVerdict('ns', [{ role: 'controller', namespace: 'ns', name: 'l', lease: lease('pod-a', 2000) }], NOW)).toMatchObject({ verdict: 'pass', found: 'controller: pod-a, renewed 2s ago' });
    expect(leaderVerdict('ns', [{ role: 'controller', namespace: 'ns', name: 'l', lease: lease('pod-a', 60_000) }], NOW)).toMatchObject({ verdict: 'fail', found: 'controller: pod-a, renewed 60s ago (expired)' });
    expect(leaderVerdict('ns', [{ role: 'controller', namespace: 'ns', name: 'l', lease: undefined }], NOW).found).toBe('controller: no leader (Lease ns/l does not exist)');
  });
});

describe('egress-proxy', () => {
  const deployment = (ready: number): k8s.V1Deployment => ({ spec: { replicas: 2, selector: {}, template: {} }, status: { readyReplicas: ready } });
  const text = [
    '# TYPE rlmesh_egress_decisions_total counter',
    'rlmesh_egress_decisions_total{outcome="allowed",rule="platform"} 40',
    'rlmesh_egress_decisions_total{outcome="refused",rule="private-address"} 3',
    'rlmesh_egress_decisions_total{outcome="refused",rule="not-allowed"} 7',
  ].join('\n');
  it('reads the decisions; ready passes with the refusals by rule; none ready fails', () => {
    expect(parseDecisions(text)).toHaveLength(3);
    expect(egressVerdict({ namespace: 'ns', deployment: deployment(2), decisions: parseDecisions(text) })).toMatchObject({ verdict: 'pass', found: '2/2 ready; 10 of 50 decisions refused since its pods started (not-allowed 7, private-address 3)' });
    expect(egressVerdict({ namespace: 'ns', deployment: deployment(1), decisions: undefined }).verdict).toBe('warn');
  });
  it('says how many it refused in the last ten minutes and when the last one was, summed over its pods', () => {
    const pod = (recent: number, last: number) => `${text}\n# TYPE rlmesh_egress_recent_refusals gauge\nrlmesh_egress_recent_refusals ${recent}\nrlmesh_egress_last_refusal_timestamp_seconds ${last}\n`;
    expect(parseRecent(pod(2, (NOW - 40_000) / 1000))).toEqual({ count: 2, lastAt: (NOW - 40_000) / 1000 });
    const recent = [pod(2, (NOW - 40_000) / 1000), pod(1, (NOW - 95_000) / 1000)].map(parseRecent).reduce((a, b) => ({ count: a.count + b.count, lastAt: Math.max(a.lastAt, b.lastAt) }));
    expect(egressVerdict({ namespace: 'ns', deployment: deployment(2), decisions: parseDecisions(text), recent, now: NOW }).found).toBe(
      '2/2 ready; 3 refused in the last 10 min, the last 40s ago; 10 of 50 decisions refused since its pods started (not-allowed 7, private-address 3)',
    );
    // none yet: no "last"
    expect(egressVerdict({ namespace: 'ns', deployment: deployment(2), decisions: [], recent: parseRecent(pod(0, 0)), now: NOW }).found).toBe('2/2 ready; 0 refused in the last 10 min; 0 of 0 decisions refused since its pods started');
    expect(egressVerdict({ namespace: 'ns', deployment: deployment(0), decisions: undefined }).verdict).toBe('fail');
    expect(egressVerdict({ namespace: 'ns', deployment: undefined, decisions: undefined }).verdict).toBe('fail');
  });
});

describe('cache, evaluations, spool', () => {
  const cache = (phase: 'Ready' | 'Full' | 'Failed'): RLMeshCache => ({ metadata: { name: 'default' }, spec: {}, status: { phase, usedBytes: 25, capacityBytes: 100, used: '25', capacity: '100', entries: 2 } }) as unknown as RLMeshCache;
  it('cache: Ready passes with its use, Full warns, Failed fails', () => {
    expect(cacheVerdict('runs', [cache('Ready')])).toMatchObject({ verdict: 'pass', found: 'default: Ready 25 of 100 (25%), 2 artifact(s)' });
    expect(cacheVerdict('runs', [cache('Full')]).verdict).toBe('warn');
    expect(cacheVerdict('runs', [cache('Failed')]).verdict).toBe('fail');
  });
  const ev = (name: string, phase: string, finishedAgo?: number, reason?: string): RLMeshEvaluation =>
    ({ metadata: { name, creationTimestamp: new Date(NOW - 7200_000) }, status: { phase, ...(finishedAgo !== undefined ? { finishTime: at(finishedAgo) } : {}), ...(reason ? { reason, message: `${reason} message` } : {}) } }) as unknown as RLMeshEvaluation;
  it('evaluations: counts by phase, the last failures with reasons; a recent failure or a long wait warns', () => {
    expect(evaluationsVerdict('runs', [ev('a', 'Succeeded', 60_000), ev('b', 'Running')], NOW)).toMatchObject({ verdict: 'pass', found: '2 in runs: Running 1, Succeeded 1' });
    const r = evaluationsVerdict('runs', [ev('a', 'Failed', 60_000, 'ExitCode'), ev('b', 'Failed', 7200_000, 'DeadlineExceeded')], NOW);
    expect(r.verdict).toBe('warn');
    expect(r.found).toBe('2 in runs: Failed 2; last failures: a 60s ago: ExitCode (ExitCode message); b 2h 0m ago: DeadlineExceeded (DeadlineExceeded message)');
    expect(evaluationsVerdict('runs', [ev('w', 'Waiting', undefined, 'NetworkPolicyNotEnforced')], NOW).verdict).toBe('warn');
    expect(evaluationsVerdict('runs', [], NOW).found).toBe('none in runs');
  });
  it('spool: under half passes, half warns, 80% fails with what to do', () => {
    expect(spoolVerdict('ns', agent({ spool: [1000, 10_000] }))).toMatchObject({ verdict: 'pass', found: '4 update(s) not yet acknowledged, 1.0 KiB of 9.8 KiB (10%)' });
    expect(spoolVerdict('ns', agent({ spool: [6000, 10_000] })).verdict).toBe('warn');
    const full = spoolVerdict('ns', agent({ state: 'backoff', spool: [10_000, 10_000] }));
    expect(full.verdict).toBe('fail');
    expect(full.found).toMatch(/full, new updates wait; the agent has no session to the control plane/);
    expect(spoolVerdict('ns', undefined).verdict).toBe('fail');
  });
});

describe('output', () => {
  it('one line per check with ✓ ! ✗, the fix under each that is not a pass; exit 1 on a fail', () => {
    const checks = [
      { id: 'agent', verdict: 'pass' as const, found: 'connected', fix: 'Nothing to do.' },
      { id: 'spool', verdict: 'fail' as const, found: 'full', fix: 'Restore the session.' },
      { id: 'cache', verdict: 'warn' as const, found: 'Full', fix: 'Raise it.' },
    ];
    const report = { at: at(0), namespace: 'ns', verdict: 'fail' as const, checks };
    expect(formatStatusTable(report)).toBe(['✓ agent  connected', '✗ spool  full', '         → Restore the session.', '! cache  Full', '         → Raise it.', '', 'status: 1 check(s) failed, 1 warn: fix each ✗ (→ says how).', ''].join('\n'));
    expect(statusExitCode(report)).toBe(1);
    expect(statusExitCode({ ...report, verdict: 'warn' })).toBe(0);
    expect(ago(42_000)).toBe('42s');
    expect(ago(3 * 86400_000 + 3600_000)).toBe('3d 1h');
  });
});

describe('excerpt', () => {
  it('keeps a short message whole, and of a long one the part around the refusal', () => {
    expect(excerpt('401 Unauthorized', /401/)).toBe('401 Unauthorized');
    const long = `failed to pull "registry.rlmesh.dev/rlmesh/rlmesh-runtime@sha256:${'a'.repeat(64)}": ${'x'.repeat(300)} failed to fetch anonymous token: unexpected status from GET request: 401 Unauthorized`;
    const e = excerpt(long, /401|unauthori[sz]ed/i);
    expect(e).toMatch(/^….*401 Unauthorized$/);
    expect(e.length).toBeLessThanOrEqual(241);
    expect(excerpt('y'.repeat(500))).toBe(`${'y'.repeat(240)}…`);
  });
});

describe('api-server-addresses', () => {
  const controllerEgress = (cidrs: string[]): k8s.V1NetworkPolicyEgressRule[] => [
    { to: [{ ipBlock: { cidr: '169.254.20.10/32' } }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] },
    { to: cidrs.map((cidr) => ({ ipBlock: { cidr } })), ports: [{ protocol: 'TCP', port: 443 }, { protocol: 'TCP', port: 6443 }] },
  ];

  it('finds the API rule, not the DNS rule, even with an ipBlock DNS peer', () => {
    expect(apiRuleCidrs(controllerEgress(['10.0.0.5/32', '10.96.0.1/32']))).toEqual(['10.0.0.5/32', '10.96.0.1/32']);
    expect(apiRuleCidrs(controllerEgress([]).slice(0, 1))).toBeUndefined();
  });

  it('passes while the policies open every address of the API, a wider CIDR included', () => {
    expect(apiServerDriftVerdict(['10.0.0.5/32', '10.96.0.1/32'], ['10.0.0.0/28', '10.96.0.1/32'], 'rlmesh-system').verdict).toBe('pass');
  });

  it('fails when the API has moved outside them, naming the new address, the upgrade that reads them again and the value', () => {
    const r = apiServerDriftVerdict(['10.0.0.9/32', '10.96.0.1/32'], ['10.0.0.5/32', '10.96.0.1/32'], 'rlmesh-system');
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain('the Kubernetes API now answers at 10.0.0.9/32, which the NetworkPolicies do not open');
    expect(r.fix).toContain('helm upgrade rlmesh … -n rlmesh-system --reuse-values');
    expect(r.fix).toContain('--set network.apiServerAddresses={10.0.0.9/32,10.96.0.1/32}');
  });

  it('warns when the controller\'s policy has no API rule', () => {
    expect(apiServerDriftVerdict(['10.0.0.5/32'], undefined, 'rlmesh-system').verdict).toBe('warn');
  });
});
