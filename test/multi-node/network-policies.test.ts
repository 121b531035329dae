// The chart's NetworkPolicies proven by real traffic across three real nodes:
// the truth table of test/e2e/traffic-table.ts with every source on one node
// and every target on the other two, so each attempt between pods leaves one
// node's kube-router (the source's egress rules) and meets another's (the
// target's ingress rules). CoreDNS runs where the local cluster put it (real-0,
// test/cluster/addons.ts); of the two other nodes, the "source" node carries the
// attempting evaluation pod, the filler, one egress proxy replica, the agent
// and the client, and the "target" node the attempted proxy replica, the other
// evaluation pod and the kubelet attempted; the resolver that is not a DNS peer
// runs beside CoreDNS. The chart's pods are placed with the values a user has
// (nodeSelector, affinity, topologySpread) and the evaluations with the
// platform's node selector; the test's own pods with nodeName. The placement is
// read back from the cluster and asserted, and every printed row names the node
// of both ends. The table must equal the intended matrix and cyclonus's
// prediction cell by cell; then, with no policy at all, every attempt gets
// through, so each refusal was a policy's and not a missing route between nodes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NET } from '../cluster/real-node.ts';
import { key, type Scenario } from '../egress/network-model.ts';
import {
  NS, RUNS, cleanSlate, controlPlane, evaluationImage, quoted, releasedChart, runInstallCommand, smallEvaluation, submit, waitConnected, type Chart,
} from '../e2e/harness.ts';
import { startPublicServer, type PublicServer } from '../e2e/public-server.ts';
import {
  ELSEWHERE, LISTEN_PORT, OTHER_DNS_NS, TrafficTable, clientObjects, dnsServerObjects, controlPlaneReaches, evaluationPod, isApiServer, isCoreDns, podsOf, proxyReaches,
} from '../e2e/traffic-table.ts';
import { kubectl } from '../support/cluster.ts';
import { ensureThreeRealNodes } from '../support/multi-node.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { tempDir } from '../support/temp.ts';
import { until } from '../support/until.ts';

const HOSTNAME = 'kubernetes.io/hostname';

let chart: Chart;
let cp: ControlPlane;
let publicServer: PublicServer;
let traffic: TrafficTable;
let evalSource = '';
let evalTarget = '';
/** the nodes by role: CoreDNS's, the attempting pods', the attempted pods' */
let dnsNode = '';
let sourceNode = '';
let targetNode = '';

/** Chart values that put the agent and the filler on the source node and one proxy replica on each of the other two nodes. */
function placementValues(): string[] {
  const onNodes = (names: string[]) => ({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: HOSTNAME, operator: 'In', values: names }] }] } } });
  return [
    '--set-json', `agent.nodeSelector=${JSON.stringify({ [HOSTNAME]: sourceNode })}`,
    '--set-json', `artifactCache.filler.nodeSelector=${JSON.stringify({ [HOSTNAME]: sourceNode })}`,
    '--set-json', `egress.affinity=${JSON.stringify(onNodes([sourceNode, targetNode]))}`,
    // with the affinity above, only the two nodes count as domains: one replica each
    '--set', 'egress.topologySpread.whenUnsatisfiable=DoNotSchedule',
  ];
}

beforeAll(async () => {
  cleanSlate();
  kubectl(['delete', 'namespace', ELSEWHERE, OTHER_DNS_NS, '--ignore-not-found', '--timeout=120s'], { allowFail: true });
  const nodes = (await ensureThreeRealNodes()).map((n) => n.name);
  dnsNode = podsOf('kube-system', 'k8s-app=kube-dns')[0]?.spec.nodeName ?? '';
  const others = nodes.filter((n) => n !== dnsNode);
  if (others.length !== 2) throw new Error(`CoreDNS must run on one of ${nodes.join(', ')} (it runs on "${dnsNode}")`);
  [sourceNode, targetNode] = others as [string, string];

  chart = releasedChart();
  cp = await controlPlane(chart);
  const image = await evaluationImage();
  traffic = new TrafficTable(image, tempDir('netpol-multi-node-'));
  publicServer = await startPublicServer();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'netpol-multi-node' });
  runInstallCommand(cp, `${created.body.installCommand} ${quoted(['--set', `egress.allowRanges={${NET.publicAddress}/32}`, ...placementValues()])}`);
  const clusterId = created.body.clusterId;
  await waitConnected(cp, clusterId);
  const corednsImage = kubectl(['-n', 'kube-system', 'get', 'deployment', 'coredns', '-o', 'jsonpath={.spec.template.spec.containers[0].image}']).stdout;
  kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...dnsServerObjects(corednsImage, dnsNode), ...clientObjects(image, sourceNode)] }) });
  // two long evaluations, placed by the platform's node selector: one to attempt from, one to be attempted
  const long = (node: string) => ({ ...smallEvaluation(image, { TEST_DURATION: '2h', TEST_LISTEN: String(LISTEN_PORT) }), deadlineSeconds: '7200', nodeSelector: { [HOSTNAME]: node } });
  evalSource = await submit(cp, clusterId, long(sourceNode));
  evalTarget = await submit(cp, clusterId, long(targetNode));
  await until('the evaluation pods, the other resolver and the client to run', () => {
    try {
      evaluationPod(evalSource);
      evaluationPod(evalTarget);
      return podsOf(OTHER_DNS_NS, 'dns.operator.openshift.io/daemonset-dns=default').length && podsOf(ELSEWHERE, 'role=client').length ? true : undefined;
    } catch {
      return undefined;
    }
  }, {
    timeoutMs: 180_000, intervalMs: 1000,
    context: () => kubectl(['-n', RUNS, 'get', 'rle,pods', '-o', 'wide'], { allowFail: true }).stdout + kubectl(['-n', NS, 'get', 'pods', '-o', 'wide'], { allowFail: true }).stdout,
  });
  traffic.survey(evalSource, evalTarget);
}, 600_000);

afterAll(async () => {
  console.log(traffic?.printed.join('\n\n'));
  await cp?.stop();
  await publicServer?.close();
  kubectl(['delete', 'namespace', ELSEWHERE, OTHER_DNS_NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
  cleanSlate();
});

describe('NetworkPolicies enforced across three real nodes, attempt by attempt', () => {
  it('every source runs on one node and every other target in a pod on another (the pod elsewhere, a source too, stays with the sources); CoreDNS, the attempted proxy and the attempting evaluation pod on three different nodes', () => {
    const placement = [...traffic.nodeOf].map(([k, node]) => `${k.padEnd(32)} ${node}`).join('\n');
    console.log(`placement (CoreDNS's node ${dnsNode}, sources' ${sourceNode}, targets' ${targetNode}):\n${placement}`);
    const nodeOf = (name: string) => traffic.nodeOf.get(name);
    expect({ eval: nodeOf(`${RUNS}/eval`), proxy: nodeOf(`${NS}/proxy-other`), coredns: nodeOf('kube-system/coredns') })
      .toEqual({ eval: sourceNode, proxy: targetNode, coredns: dnsNode });
    expect(new Set([sourceNode, targetNode, dnsNode]).size).toBe(3);
    expect(Object.fromEntries(traffic.sources.map((s) => [key(s.pod), nodeOf(key(s.pod))]))).toEqual({
      [`${RUNS}/eval`]: sourceNode, [`${RUNS}/filler`]: sourceNode, [`${NS}/proxy`]: sourceNode, [`${NS}/agent`]: sourceNode, [`${ELSEWHERE}/client`]: sourceNode,
    });
    // the targets that are pods, and the kubelet: none on the sources' node but the pod elsewhere, which
    // is also a source (its 443 target is there for the private address that is neither API nor control plane)
    const inCluster = traffic.targets.map((t) => t.to).filter((p) => p.ns !== 'outside' || p.name === 'node');
    expect(Object.fromEntries(inCluster.map((p) => [key(p), nodeOf(key(p))]))).toEqual({
      [`${ELSEWHERE}/client`]: sourceNode, [`${NS}/proxy-other`]: targetNode, 'kube-system/coredns': dnsNode, [`${OTHER_DNS_NS}/dns`]: dnsNode, [`${RUNS}/eval-other`]: targetNode, 'outside/node': targetNode,
    });
  });

  it('the chart as installed (DNS peers: CoreDNS): observed = intended = cyclonus, cell by cell, across nodes', async () => {
    const scenario: Scenario = { name: 'default', values: [], isDnsPeer: isCoreDns, dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches };
    expect(await traffic.run(`default (CoreDNS), sources on ${sourceNode}`, scenario)).toEqual([]);
  });

  it('with no NetworkPolicy at all every attempt gets through across nodes: each refusal above was a policy', async () => {
    kubectl(['-n', RUNS, 'delete', 'networkpolicies', '--all']);
    kubectl(['-n', NS, 'delete', 'networkpolicies', '--all']);
    // lifted on the source's node (its egress) and on the target's (its ingress)
    await traffic.applied('the policies to be lifted on the sources\' node', `${RUNS}/eval`, 'public server directly tcp/443', true);
    await traffic.applied('the policies to be lifted on the targets\' node', `${RUNS}/eval`, `another evaluation pod tcp/${LISTEN_PORT}`, true);
    expect(await traffic.run(`no NetworkPolicy, sources on ${sourceNode}`, 'no policies')).toEqual([]);
  });
});
