// The chart's NetworkPolicies proven by real traffic on the real node, where
// kube-router enforces them: the truth table of traffic-table.ts (every source
// attempting every target from its own network namespace) must equal, cell by
// cell, the intended matrix and cyclonus's prediction from the policies as they
// are in the cluster; then again with each custom network.dnsPeers shape (an
// ipBlock resolver; a namespace + pod selector with dnsPorts [53, 5353]); and
// once with no policies at all, where every attempt gets through, so each
// refusal above is a policy's and not a missing listener or route. Between
// them: helm uninstall while an evaluation runs leaves rlmesh-runs fenced; and
// at the end, with enforcement gone (the probe fails) or unverified (the probe
// off), new evaluations wait with the reason until the named opt-out lets them
// run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NET, realNodes } from '../cluster/real-node.ts';
import { type Scenario } from '../egress/network-model.ts';
import { valuesSchema } from '../../lib/values-schema.ts';
import { helm, kubectl } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import {
  NS, RUNS, Runtime, cleanSlate, clusterRow, controlPlane, evaluation, evaluationImage, releasedChart, runInstallCommand, smallEvaluation, submit, upgradeReusing,
  waitConnected, waitFinished, type Chart,
} from './harness.ts';
import { startPublicServer, type PublicServer } from './public-server.ts';
import { tempDir } from '../support/temp.ts';
import {
  ELSEWHERE, LISTEN_PORT, OTHER_DNS_LABELS, OTHER_DNS_NS, TrafficTable, clientObjects, dnsServerObjects, controlPlaneReaches, evaluationPod, isApiServer, isCoreDns, modelled, podsOf, proxyReaches,
  type KubePod,
} from './traffic-table.ts';

let chart: Chart;
let cp: ControlPlane;
let image = '';
let publicServer: PublicServer;
let traffic: TrafficTable;
const rt = new Runtime();
const DEFAULT_DNS_PEERS = valuesSchema.parse({ joinToken: 'rlm_jt_0123456789abcdefghijklmnopqrstuv' }).network.dnsPeers;

/** What rlmesh-runs holds, for a wait that timed out: evaluations with their status, pods, the node's room. */
const runsState = (): string =>
  kubectl(['-n', RUNS, 'get', 'rle', '-o', 'custom-columns=NAME:.metadata.name,PHASE:.status.phase,REASON:.status.reason,MESSAGE:.status.message'], { allowFail: true }).stdout +
  kubectl(['-n', RUNS, 'get', 'pods', '-o', 'wide'], { allowFail: true }).stdout +
  kubectl(['describe', 'node', realNodes()[0]!.name], { allowFail: true }).stdout.split('Allocated resources:')[1]?.slice(0, 400) +
  `\nthe agent's last lines:\n${(() => { try { return rt.log('agent').trim().split('\n').slice(-15).join('\n'); } catch (e) { return (e as Error).message; } })()}`;

/** The sorted CIDRs of a policy's egress rule on TCP 6443 (the API's ports): where the install lets the Kubernetes API's ports lead. */
function apiPeers(ns: string, policy: string): string[] {
  const np = JSON.parse(kubectl(['-n', ns, 'get', 'networkpolicy', policy, '-o', 'json']).stdout) as { spec: { egress: { to?: { ipBlock?: { cidr: string } }[]; ports?: { port: number }[] }[] } };
  const rules = np.spec.egress.filter((r) => r.ports?.some((p) => p.port === 6443));
  if (rules.length !== 1) throw new Error(`${ns}/${policy}: ${rules.length} egress rules on 6443, expected one: ${JSON.stringify(np.spec.egress)}`);
  return (rules[0]!.to ?? []).map((p) => p.ipBlock?.cidr ?? JSON.stringify(p)).sort();
}

let evalSource = '';
let evalTarget = '';
let clusterId = '';

beforeAll(async () => {
  cleanSlate();
  kubectl(['delete', 'namespace', ELSEWHERE, OTHER_DNS_NS, '--ignore-not-found', '--timeout=120s'], { allowFail: true });
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  traffic = new TrafficTable(image, tempDir('netpol-real-'));
  publicServer = await startPublicServer();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'netpol' });
  // the "public" server's benchmarking address is let through the proxy, as in the spec journey
  runInstallCommand(cp, `${created.body.installCommand} --set 'egress.allowRanges={${NET.publicAddress}/32}'`);
  clusterId = created.body.clusterId;
  await waitConnected(cp, clusterId);
  const corednsImage = kubectl(['-n', 'kube-system', 'get', 'deployment', 'coredns', '-o', 'jsonpath={.spec.template.spec.containers[0].image}']).stdout;
  kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...dnsServerObjects(corednsImage), ...clientObjects(image)] }) });
  // two long evaluations: one to attempt from, one to be attempted
  const long = { ...smallEvaluation(image, { TEST_DURATION: '2h', TEST_LISTEN: String(LISTEN_PORT) }), deadlineSeconds: '7200' };
  evalSource = await submit(cp, clusterId, long);
  evalTarget = await submit(cp, clusterId, long);
  await until('the evaluation pods, the other resolver and the client to run', () => {
    try {
      evaluationPod(evalSource);
      evaluationPod(evalTarget);
      return podsOf(OTHER_DNS_NS, 'dns.operator.openshift.io/daemonset-dns=default').length && podsOf(ELSEWHERE, 'role=client').length ? true : undefined;
    } catch {
      return undefined;
    }
  }, { timeoutMs: 180_000, intervalMs: 1000 });
  traffic.survey(evalSource, evalTarget);
}, 600_000);

afterAll(async () => {
  console.log(traffic?.printed.join('\n\n'));
  await cp?.stop();
  await publicServer?.close();
  kubectl(['delete', 'namespace', ELSEWHERE, OTHER_DNS_NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
  cleanSlate();
});

describe('NetworkPolicies enforced on the real node, attempt by attempt', () => {
  it('the chart as installed (DNS peers: CoreDNS; the API addresses read at install): observed = intended = cyclonus; the filler and the agent refused on 443 where neither the API nor the control plane is', async () => {
    const scenario: Scenario = { name: 'default', values: [], isDnsPeer: isCoreDns, dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches };
    expect(await traffic.run('default (CoreDNS)', scenario)).toEqual([]);
    // the cells of issue 45: no 443 to every address, for the filler (the API's ports) nor for the agent (the control plane's)
    const cells = ['public server directly tcp/443', 'registry (private, not the API) tcp/443', 'a pod elsewhere tcp/443', 'control plane tcp/443', 'apiserver (kubernetes Service) tcp/443'];
    const attempts = traffic.targets.filter((t) => cells.includes(t.attempt.name)).map((t) => t.attempt);
    const from = async (name: string) => Object.fromEntries(await traffic.attemptFrom(traffic.sources.find((x) => x.pod.name === name)!, attempts));
    // the filler reaches 10.213.0.1, the API's address, on the API's ports (where the lab's control plane also listens)
    expect(await from('filler')).toEqual({
      'public server directly tcp/443': false, 'registry (private, not the API) tcp/443': false, 'a pod elsewhere tcp/443': false, 'control plane tcp/443': true, 'apiserver (kubernetes Service) tcp/443': true,
    });
    // the agent: its control plane and registry (controlPlane.addresses), no other private or special-purpose address
    expect(await from('agent')).toEqual({
      'public server directly tcp/443': false, 'registry (private, not the API) tcp/443': true, 'a pod elsewhere tcp/443': false, 'control plane tcp/443': true, 'apiserver (kubernetes Service) tcp/443': true,
    });
    // what the install read: the EndpointSlice's address and the Service's ClusterIP, nothing wider
    const clusterIp = kubectl(['-n', 'default', 'get', 'service', 'kubernetes', '-o', 'jsonpath={.spec.clusterIP}']).stdout;
    expect(apiPeers('rlmesh-runs', 'rlmesh-artifact-cache-filler')).toEqual([`${NET.hostAddress}/32`, `${clusterIp}/32`].sort());
  });

  it('network.metricsPeers naming the other namespace: its pod reaches the metrics and health ports, which the default peers kept it from', async () => {
    upgradeReusing(chart, ['--set-json', `network.metricsPeers=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"${ELSEWHERE}"}}}]`]);
    await traffic.applied('the metrics peer to be enforced', `${ELSEWHERE}/client`, 'egress proxy metrics tcp/9090', true);
    const scenario: Scenario = { name: 'metrics peers', values: [], isDnsPeer: isCoreDns, dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches, isMetricsPeer: (p) => p.ns === ELSEWHERE };
    expect(await traffic.run(`network.metricsPeers: namespace ${ELSEWHERE}`, scenario)).toEqual([]);
    // back to the default peers for the scenarios below
    upgradeReusing(chart, ['--set-json', `network.metricsPeers=${JSON.stringify(valuesSchema.parse({ joinToken: 'rlm_jt_0123456789abcdefghijklmnopqrstuv' }).network.metricsPeers)}`]);
    await traffic.applied('the default metrics peers to be enforced again', `${ELSEWHERE}/client`, 'egress proxy metrics tcp/9090', false);
  });

  it('network.dnsPeers as an ipBlock: the other resolver is the peer, CoreDNS no longer', async () => {
    const ip = traffic.models.find((p) => p.ns === OTHER_DNS_NS)!.ip;
    upgradeReusing(chart, ['--set-json', `network.dnsPeers=[{"ipBlock":{"cidr":"${ip}/32"}}]`]);
    for (const w of ['agent', 'filler', 'egress'] as const) await rt.rolledOut(w);
    traffic.survey(evalSource, evalTarget);
    await traffic.applied('the ipBlock DNS peer to be enforced', 'rlmesh-runs/filler', 'other resolver dns/udp 53', true);
    const scenario: Scenario = { name: 'ipBlock', values: [], isDnsPeer: (p) => p.ip === ip, dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches };
    expect(await traffic.run(`network.dnsPeers ipBlock ${ip}/32`, scenario)).toEqual([]);
  });

  it('network.dnsPeers as namespace + pod selector with dnsPorts [53, 5353]', async () => {
    upgradeReusing(chart, [
      '--set-json', `network.dnsPeers=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"${OTHER_DNS_NS}"}},"podSelector":{"matchLabels":${JSON.stringify(OTHER_DNS_LABELS)}}}]`,
      '--set-json', 'network.dnsPorts=[53,5353]']);
    for (const w of ['agent', 'filler', 'egress'] as const) await rt.rolledOut(w);
    traffic.survey(evalSource, evalTarget);
    await traffic.applied('port 5353 to the selected resolver to be enforced', 'rlmesh-runs/filler', 'other resolver dns/udp 5353', true);
    const scenario: Scenario = {
      name: 'selector', values: [], isDnsPeer: (p) => p.ns === OTHER_DNS_NS && p.labels['dns.operator.openshift.io/daemonset-dns'] === 'default', dnsPorts: [53, 5353], proxyReaches, isApiServer, controlPlaneReaches,
    };
    expect(await traffic.run('network.dnsPeers namespace + pod selector, dnsPorts [53, 5353]', scenario)).toEqual([]);
  });

  it('network.apiServerAddresses overrides what the install read: the API\'s ports lead to those addresses only', async () => {
    // the kubernetes EndpointSlice's address (test/cluster/addons.ts), where the Service's DNAT leads, without the ClusterIP
    upgradeReusing(chart, ['--set', `network.apiServerAddresses={${NET.hostAddress}/32}`]);
    for (const w of ['agent', 'filler', 'egress'] as const) await rt.rolledOut(w);
    expect(apiPeers('rlmesh-runs', 'rlmesh-artifact-cache-filler')).toEqual([`${NET.hostAddress}/32`]);
    expect(apiPeers(NS, 'rlmesh-cluster-agent')).toEqual([`${NET.hostAddress}/32`]);
    traffic.survey(evalSource, evalTarget);
    const scenario: Scenario = {
      name: 'pinned', values: [], isDnsPeer: (p) => p.ns === OTHER_DNS_NS && p.labels['dns.operator.openshift.io/daemonset-dns'] === 'default', dnsPorts: [53, 5353], proxyReaches,
      isApiServer, controlPlaneReaches,
    };
    expect(await traffic.run(`network.apiServerAddresses {${NET.hostAddress}/32}`, scenario)).toEqual([]);
    // CoreDNS as the DNS peer again: the agent restarted with this upgrade, and the resolver above answers no name,
    // so it could not reach its control plane for the evaluations below
    upgradeReusing(chart, ['--set-json', `network.dnsPeers=${JSON.stringify(DEFAULT_DNS_PEERS)}`, '--set-json', 'network.dnsPorts=[53]']);
    for (const w of ['agent', 'filler', 'egress'] as const) await rt.rolledOut(w);
    await waitConnected(cp, clusterId);
  });

  it('helm uninstall mid-run keeps rlmesh-runs fenced: direct attempts stay refused, the evaluation ends cleanly, a reinstall adopts the fences', async () => {
    const short = await submit(cp, clusterId, { ...smallEvaluation(image, { TEST_DURATION: '100s' }), deadlineSeconds: '600' });
    await until(`evaluation ${short} to run`, () => { try { return evaluationPod(short); } catch { return undefined; } }, { timeoutMs: 240_000, intervalMs: 1000, context: runsState });
    helm(['uninstall', 'rlmesh', '-n', NS, '--wait', '--timeout', '3m']);
    const fences = (): string[] => kubectl(['-n', RUNS, 'get', 'networkpolicies,limitranges,resourcequotas', '-o', 'name']).stdout.split('\n').filter(Boolean).sort();
    expect(fences()).toEqual(['limitrange/rlmesh-runs-defaults', 'networkpolicy.networking.k8s.io/rlmesh-runs-default-deny', 'networkpolicy.networking.k8s.io/rlmesh-runs-egress', 'resourcequota/rlmesh-runs']);
    // every way out that does not lead through the (now uninstalled) proxy
    const direct = traffic.targets.filter((t) => !t.attempt.name.startsWith('egress proxy')).map((t) => t.attempt);
    const p = evaluationPod(short);
    const seen = await traffic.attemptFrom({ pod: modelled(p, 'eval-short', 'eval'), podName: p.metadata.name }, direct);
    const through = direct.filter((a) => seen.get(a.name)).map((a) => `${a.name} (${a.addr})`);
    expect(through, 'attempts that got through after helm uninstall').toEqual([]);
    await until(`pod of ${short} to finish`, () => {
      const pod = JSON.parse(kubectl(['-n', RUNS, 'get', 'pod', p.metadata.name, '-o', 'json']).stdout) as KubePod & { status: { containerStatuses?: { name: string; state?: { terminated?: { exitCode: number } } }[] } };
      return pod.status.phase === 'Succeeded' || pod.status.phase === 'Failed' ? pod : undefined;
    }, { timeoutMs: 180_000, intervalMs: 2000 }).then((pod) => {
      expect(pod.status.phase).toBe('Succeeded');
      expect(pod.status.containerStatuses?.find((c) => c.name === 'evaluation')?.state?.terminated?.exitCode).toBe(0);
    });
    // the same cluster's New install command installs again over the kept namespace and fences
    const again = await api<{ installCommand: string }>(cp, 'POST', `/v1/clusters/${clusterId}/install-command`);
    runInstallCommand(cp, again.body.installCommand);
    await waitConnected(cp, clusterId);
    const manifest = helm(['get', 'manifest', 'rlmesh', '-n', NS]).stdout;
    for (const name of ['rlmesh-runs-default-deny', 'rlmesh-runs-egress', 'rlmesh-runs-defaults']) expect(manifest).toContain(`name: ${name}`);
    // the filler's own policy is back too (it went with the filler)
    expect(fences()).toEqual(expect.arrayContaining(['limitrange/rlmesh-runs-defaults', 'networkpolicy.networking.k8s.io/rlmesh-runs-default-deny', 'networkpolicy.networking.k8s.io/rlmesh-runs-egress', 'resourcequota/rlmesh-runs']));
    expect(kubectl(['-n', RUNS, 'get', 'networkpolicy', 'rlmesh-runs-egress', '-o', 'jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-name}']).stdout).toBe('rlmesh');
    // the reinstalled controller takes the finished evaluation over and reports it
    expect((await waitFinished(cp, short, 120)).phase).toBe('Succeeded');
    for (const w of ['agent', 'filler', 'egress'] as const) await rt.rolledOut(w);
    traffic.survey(evalSource, evalTarget);
  }, 900_000);

  it('with no NetworkPolicy at all every attempt gets through: each refusal above was a policy', async () => {
    kubectl(['-n', RUNS, 'delete', 'networkpolicies', '--all']);
    kubectl(['-n', NS, 'delete', 'networkpolicies', '--all']);
    await traffic.applied('the policies to be lifted', 'rlmesh-runs/eval', 'public server directly tcp/443', true);
    expect(await traffic.run('no NetworkPolicy', 'no policies')).toEqual([]);
  });

  it('NetworkPolicy not enforced, or the probe off: evaluations wait with the reason, the platform is told; the named opt-out lets them run', async () => {
    const probeAt = (): { verdict?: string; at?: string } => JSON.parse(kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-network-policy-probe', '-o', 'jsonpath={.data.result\\.json}']).stdout || '{}') as { verdict?: string; at?: string };
    const before = new Date().toISOString();
    // the policies are gone (above): the controller's probe at start finds the forbidden target reachable
    await rt.restart('controller');
    await until('the probe to fail', () => { const r = probeAt(); return r.verdict === 'fail' && r.at! > before ? r : undefined; }, { timeoutMs: 180_000, intervalMs: 2000 });
    const waiting = await submit(cp, clusterId, smallEvaluation(image));
    const reasonOf = (): { reason?: string; message?: string } => JSON.parse(kubectl(['-n', RUNS, 'get', 'rle', waiting, '-o', 'jsonpath={.status}'], { allowFail: true }).stdout || '{}') as { reason?: string; message?: string };
    const st = await until('the evaluation to wait for enforcement', () => (reasonOf().reason === 'NetworkPolicyNotEnforced' ? reasonOf() : undefined), { timeoutMs: 60_000, intervalMs: 1000 });
    expect(st.message).toMatch(/NetworkPolicy enforcement has not been seen: the probe found .*CNI that enforces it.*evaluations\.runWithoutNetworkPolicyEnforcement=true/);
    expect(kubectl(['-n', RUNS, 'get', 'pods', '-o', 'name']).stdout).not.toContain(`rle-${waiting}`);
    // the platform receives the Waiting update with that reason, and is told the cluster cannot run evaluations
    await until('the platform to hold the Waiting update', async () => ((await evaluation(cp, waiting)).updates.some((u) => u.phase === 'Waiting' && /NetworkPolicy/.test(u.message ?? '')) ? true : undefined), { timeoutMs: 60_000 });
    const row = await until('the cluster to say it cannot run evaluations', async () => {
      const r = (await clusterRow(cp, clusterId)) as Awaited<ReturnType<typeof clusterRow>> & { acceptsEvaluations?: boolean | null; evaluationsBlockedReason?: string };
      return r.acceptsEvaluations === false ? r : undefined;
    }, { timeoutMs: 90_000, intervalMs: 2000 });
    expect(row.evaluationsBlockedReason).toContain('NetworkPolicyNotEnforced');

    // the probe off (the upgrade also puts the policies back): still no pod, and the reason says the probe is off
    upgradeReusing(chart, ['--set', 'preflight.networkPolicyProbe.enabled=false', '--wait', '--timeout', '6m']);
    await until('the reason to name the probe off', () => (/the probe is off/.test(reasonOf().message ?? '') ? true : undefined), { timeoutMs: 90_000, intervalMs: 1000 });
    expect(reasonOf().reason).toBe('NetworkPolicyNotEnforced');
    expect(kubectl(['-n', RUNS, 'get', 'pods', '-o', 'name']).stdout).not.toContain(`rle-${waiting}`);

    // the opt-out, by its name: the evaluation runs
    upgradeReusing(chart, ['--set', 'evaluations.runWithoutNetworkPolicyEnforcement=true', '--wait', '--timeout', '6m']);
    expect((await waitFinished(cp, waiting, 180)).phase).toBe('Succeeded');
    await until('the cluster to accept evaluations again', async () => {
      const r = (await clusterRow(cp, clusterId)) as Awaited<ReturnType<typeof clusterRow>> & { acceptsEvaluations?: boolean | null };
      return r.acceptsEvaluations === true ? true : undefined;
    }, { timeoutMs: 120_000, intervalMs: 2000 });
  }, 900_000);
});
