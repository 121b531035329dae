// The chart's NetworkPolicies proven by real traffic on the real node, where
// kube-router enforces them. From an evaluation pod, the filler, an egress
// proxy, the agent and a pod in another namespace, each attempt (a TCP
// connect, a DNS query over UDP and over TCP) goes to the proxy, CoreDNS, a
// resolver that is not a DNS peer, the apiserver, the control plane, another
// evaluation pod, the "public" test server directly and the node. The attempts
// run in an ephemeral container of the real pod, so they leave from its network
// namespace and address, under the policies that select it. The observed
// table must equal, cell by cell, the intended matrix and cyclonus's
// prediction from the policies as they are in the cluster; then again with
// each custom network.dnsPeers shape (an ipBlock resolver; a namespace + pod
// selector with dnsPorts [53, 5353]); and once with no policies at all, where
// every attempt gets through, so each refusal above is a policy's and not a
// missing listener or route. Between them: helm uninstall while an evaluation
// runs leaves rlmesh-runs fenced; and at the end, with enforcement gone (the
// probe fails) or unverified (the probe off), new evaluations wait with the
// reason until the named opt-out lets them run.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NET, realNodes } from '../cluster/real-node.ts';
import { intended, key, simulate, writePolicies, type Pod, type Probe, type Scenario } from '../egress/network-model.ts';
import { helm, kubectl } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import {
  NS, RUNS, Runtime, cleanSlate, clusterRow, controlPlane, evaluation, evaluationImage, releasedChart, runInstallCommand, smallEvaluation, submit, upgradeReusing,
  waitConnected, waitFinished, type Chart, type Workload,
} from './harness.ts';
import { startPublicServer, type PublicServer } from './public-server.ts';
import { tempDir } from '../support/temp.ts';

const ELSEWHERE = 'rlmesh-netpol-elsewhere';
// the resolver that is a DNS peer only in the custom scenarios: OpenShift's namespace and label, ports 53 and 5353
const OTHER_DNS_NS = 'openshift-dns';
const OTHER_DNS_LABELS = { 'dns.operator.openshift.io/daemonset-dns': 'default' };
const LISTEN_PORT = 8080;
const KUBELET_PORT = 10250;

type Kind = 'tcp' | 'dns-udp' | 'dns-tcp';
type Attempt = { name: string; kind: Kind; addr: string };
/** one column of the table: what is attempted, and which model pod and probe it is to cyclonus */
type Target = { attempt: Attempt; to: Pod; probe: Probe };
type Source = { pod: Pod; podName: string };
type KubePod = { metadata: { name: string; namespace: string; labels?: Record<string, string> }; status: { podIP?: string; phase?: string } };

let chart: Chart;
let cp: ControlPlane;
let image = '';
let publicServer: PublicServer;
let work = '';
const rt = new Runtime();
const tables: string[] = [];

function podsOf(ns: string, selector: string): KubePod[] {
  return (JSON.parse(kubectl(['-n', ns, 'get', 'pods', '-l', selector, '-o', 'json']).stdout) as { items: KubePod[] }).items.filter((p) => p.status.phase === 'Running');
}

/** A real pod as the model sees it: its namespace, labels and address; `role` says what it is to the intended matrix. */
function modelled(p: KubePod, name: string, role?: string): Pod {
  return { ns: p.metadata.namespace, name, labels: p.metadata.labels ?? {}, ip: p.status.podIP!, ...(role ? { role } : {}) };
}

function outside(name: string, ip: string): Pod {
  return { ns: 'outside', name, labels: { role: name }, ip };
}

function workloadPod(w: Workload): KubePod {
  const p = rt.pods(w).find((x) => x.status.phase === 'Running');
  if (!p) throw new Error(`${w}: no running pod`);
  return JSON.parse(kubectl(['-n', w === 'filler' ? RUNS : NS, 'get', 'pod', p.metadata.name, '-o', 'json']).stdout) as KubePod;
}

function evaluationPod(id: string): KubePod {
  const p = podsOf(RUNS, 'rlmesh.dev/evaluation').find((x) => x.metadata.name.includes(id));
  if (!p) throw new Error(`no running pod of evaluation ${id}`);
  return p;
}

let seq = 0;
/**
 * Runs the attempts in a new ephemeral container of `source`'s pod (its network
 * namespace, its policies) and returns name → got through.
 */
async function attemptFrom(source: Source, attempts: Attempt[]): Promise<Map<string, boolean>> {
  const name = `attempts-${++seq}`;
  const container = {
    name,
    image,
    imagePullPolicy: 'IfNotPresent',
    env: [
      { name: 'TEST_ATTEMPTS', value: JSON.stringify(attempts) },
      { name: 'TEST_DURATION', value: '0s' },
      { name: 'TEST_PROBE_TIMEOUT', value: '2s' },
    ],
    securityContext: {
      runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' },
    },
  };
  const { ns } = source.pod;
  kubectl(['-n', ns, 'patch', 'pod', source.podName, '--subresource', 'ephemeralcontainers', '--type', 'strategic', '-p', JSON.stringify({ spec: { ephemeralContainers: [container] } })]);
  await until(`${name} in ${ns}/${source.podName} to finish`, () => {
    const statuses = JSON.parse(kubectl(['-n', ns, 'get', 'pod', source.podName, '-o', 'jsonpath={.status.ephemeralContainerStatuses}']).stdout || '[]') as {
      name: string; state?: { terminated?: object };
    }[];
    return statuses.find((s) => s.name === name)?.state?.terminated ? true : undefined;
  }, { timeoutMs: 90_000, intervalMs: 500 });
  const lines = kubectl(['-n', ns, 'logs', source.podName, '-c', name]).stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { step: string; name?: string; ok?: boolean });
  const seen = new Map(lines.filter((l) => l.step === 'attempt').map((l) => [l.name!, l.ok === true]));
  const missing = attempts.filter((a) => !seen.has(a.name)).map((a) => a.name);
  if (missing.length) throw new Error(`${key(source.pod)}: no outcome for ${missing.join(', ')}; its output:\n${lines.map((l) => JSON.stringify(l)).join('\n')}`);
  return seen;
}

/** The NetworkPolicies as they are in the cluster, for cyclonus. */
function livePolicies(file: string): string {
  const items = [RUNS, NS].flatMap((ns) => (JSON.parse(kubectl(['-n', ns, 'get', 'networkpolicies', '-o', 'json']).stdout) as { items: { metadata: Record<string, unknown> }[] }).items)
    .map((p) => ({ ...p, metadata: { name: p.metadata.name, namespace: p.metadata.namespace } }));
  return writePolicies(file, items);
}

let sources: Source[] = [];
let targets: Target[] = [];
let models: Pod[] = [];

/** The pods and addresses of the table, read from the cluster (pods may have been replaced since the last table). */
function survey(evalSource: string, evalTarget: string): void {
  const coredns = podsOf('kube-system', 'k8s-app=kube-dns')[0]!;
  const otherDns = podsOf(OTHER_DNS_NS, 'dns.operator.openshift.io/daemonset-dns=default')[0]!;
  // the proxy attempted is not the one attempting: a Service hairpin to itself would be a different path
  const [proxy, otherProxy] = rt.pods('egress').filter((x) => x.status.phase === 'Running').map((x) => JSON.parse(kubectl(['-n', NS, 'get', 'pod', x.metadata.name, '-o', 'json']).stdout) as KubePod);
  if (!proxy || !otherProxy) throw new Error('the table needs both egress proxy replicas running');
  const client = podsOf(ELSEWHERE, 'role=client')[0]!;
  const node = realNodes()[0]!;
  const kubernetesService = kubectl(['-n', 'default', 'get', 'service', 'kubernetes', '-o', 'jsonpath={.spec.clusterIP}']).stdout;
  const evalB = evaluationPod(evalSource);
  const evalC = evaluationPod(evalTarget);
  const m = {
    eval: modelled(evalB, 'eval', 'eval'),
    evalC: modelled(evalC, 'eval-other', 'eval'),
    filler: modelled(workloadPod('filler'), 'filler'),
    proxy: modelled(proxy, 'proxy'),
    proxyOther: modelled(otherProxy, 'proxy-other', 'proxy'),
    agent: modelled(workloadPod('agent'), 'agent'),
    client: modelled(client, 'client'),
    coredns: modelled(coredns, 'coredns'),
    otherDns: modelled(otherDns, 'dns'),
    // the apiserver and the control plane are both on the host's bridge address; the kubernetes Service's endpoint is its port 6443
    host: outside('host', NET.hostAddress),
    public: outside('public', NET.publicAddress),
    node: outside('node', node.address),
  };
  models = Object.values(m);
  const t = (name: string, kind: Kind, addr: string, to: Pod, port: number): Target => ({ attempt: { name, kind, addr }, to, probe: { protocol: kind === 'dns-udp' ? 'UDP' : 'TCP', port } });
  targets = [
    t('egress proxy tcp/3128', 'tcp', `${m.proxyOther.ip}:3128`, m.proxyOther, 3128),
    t('CoreDNS (kube-dns) dns/udp 53', 'dns-udp', `${NET.dnsService}:53`, m.coredns, 53),
    t('CoreDNS (kube-dns) dns/tcp 53', 'dns-tcp', `${NET.dnsService}:53`, m.coredns, 53),
    t('other resolver dns/udp 53', 'dns-udp', `${m.otherDns.ip}:53`, m.otherDns, 53),
    t('other resolver dns/tcp 53', 'dns-tcp', `${m.otherDns.ip}:53`, m.otherDns, 53),
    t('other resolver dns/udp 5353', 'dns-udp', `${m.otherDns.ip}:5353`, m.otherDns, 5353),
    t('other resolver dns/tcp 5353', 'dns-tcp', `${m.otherDns.ip}:5353`, m.otherDns, 5353),
    t('apiserver (kubernetes Service) tcp/443', 'tcp', `${kubernetesService}:443`, m.host, NET.apiserverPort),
    t('control plane tcp/443', 'tcp', `${NET.hostAddress}:443`, m.host, 443),
    t(`another evaluation pod tcp/${LISTEN_PORT}`, 'tcp', `${m.evalC.ip}:${LISTEN_PORT}`, m.evalC, LISTEN_PORT),
    t('public server directly tcp/443', 'tcp', `${NET.publicAddress}:443`, m.public, 443),
    t(`the node (kubelet) tcp/${KUBELET_PORT}`, 'tcp', `${node.address}:${KUBELET_PORT}`, m.node, KUBELET_PORT),
  ];
  sources = [
    { pod: m.eval, podName: evalB.metadata.name },
    { pod: m.filler, podName: workloadPod('filler').metadata.name },
    { pod: m.proxy, podName: proxy.metadata.name },
    { pod: m.agent, podName: workloadPod('agent').metadata.name },
    { pod: m.client, podName: client.metadata.name },
  ];
}

const probeKey = (p: Probe) => `${p.protocol}/${p.port}`;

/** What rlmesh-runs holds, for a wait that timed out: evaluations with their status, pods, the node's room. */
const runsState = (): string =>
  kubectl(['-n', RUNS, 'get', 'rle', '-o', 'custom-columns=NAME:.metadata.name,PHASE:.status.phase,REASON:.status.reason,MESSAGE:.status.message'], { allowFail: true }).stdout +
  kubectl(['-n', RUNS, 'get', 'pods', '-o', 'wide'], { allowFail: true }).stdout +
  kubectl(['describe', 'node', realNodes()[0]!.name], { allowFail: true }).stdout.split('Allocated resources:')[1]?.slice(0, 400);

/**
 * Runs every attempt from every source and compares the outcome with the
 * intended matrix (`scenario`, or "everything" with no policies) and with
 * cyclonus on the live policies. Returns the cells that disagree.
 */
async function table(label: string, scenario: Scenario | 'no policies'): Promise<string[]> {
  const probes = [...new Map(targets.map((t) => [probeKey(t.probe), t.probe])).values()];
  const predicted = new Map<string, Record<string, Record<string, string>>>();
  if (scenario !== 'no policies') {
    const policies = livePolicies(join(work, `policies-${seq}.json`));
    for (const p of probes) predicted.set(probeKey(p), simulate(work, policies, models, p, probes));
  }
  const rows: string[] = [];
  const differences: string[] = [];
  for (const source of sources) {
    const seen = await attemptFrom(source, targets.map((t) => t.attempt));
    for (const t of targets) {
      const observed = seen.get(t.attempt.name)!;
      const want = scenario === 'no policies' ? true : intended(scenario, source.pod, t.to, t.probe);
      const cell = predicted.get(probeKey(t.probe))?.[key(source.pod)]?.[key(t.to)];
      const cyclonus = scenario === 'no policies' ? want : cell === '.';
      if (scenario !== 'no policies' && cell !== '.' && cell !== 'X') differences.push(`${key(source.pod)} → ${key(t.to)} ${probeKey(t.probe)}: cyclonus has no cell (${cell})`);
      const mark = (b: boolean) => (b ? 'allow' : 'deny');
      rows.push(`${key(source.pod).padEnd(28)} ${t.attempt.name.padEnd(40)} observed ${mark(observed).padEnd(5)} intended ${mark(want).padEnd(5)} cyclonus ${scenario === 'no policies' ? '-' : mark(cyclonus)}`);
      if (observed !== want || observed !== cyclonus) differences.push(`${key(source.pod)} → ${t.attempt.name} (${t.attempt.addr}): observed ${mark(observed)}, intended ${mark(want)}, cyclonus ${scenario === 'no policies' ? '-' : mark(cyclonus)}`);
    }
  }
  tables.push(`${label}\n${rows.join('\n')}`);
  return differences;
}

/** Waits until the enforcer has applied a change: one attempt from `from` (ns/name of a source) gives `want`. */
async function applied(what: string, from: string, target: string, want: boolean): Promise<void> {
  const t = targets.find((x) => x.attempt.name === target)!;
  const source = sources.find((x) => key(x.pod) === from)!;
  await until(what, async () => ((await attemptFrom(source, [t.attempt])).get(t.attempt.name) === want ? true : undefined), { timeoutMs: 90_000, intervalMs: 1000 });
}

const isCoreDns = (p: Pod) => p.ns === 'kube-system' && p.labels['k8s-app'] === 'kube-dns';
const proxyReaches = (p: Pod) => p.ip === NET.publicAddress;
// by default the API's ports lead to any address (a NetworkPolicy cannot name the API server)
const isApiServer = () => true;

function dnsServerObjects(corednsImage: string): object[] {
  const corefile = '.:53 {\n  whoami\n}\n.:5353 {\n  whoami\n}\n';
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: OTHER_DNS_NS } },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'corefile', namespace: OTHER_DNS_NS }, data: { Corefile: corefile } },
    {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'dns', namespace: OTHER_DNS_NS, labels: OTHER_DNS_LABELS },
      spec: {
        securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' }, sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '53' }] },
        containers: [{
          name: 'coredns', image: corednsImage, imagePullPolicy: 'IfNotPresent', args: ['-conf', '/etc/coredns/Corefile'],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          volumeMounts: [{ name: 'config', mountPath: '/etc/coredns', readOnly: true }],
        }],
        volumes: [{ name: 'config', configMap: { name: 'corefile' } }],
      },
    },
  ];
}

function clientObjects(): object[] {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ELSEWHERE } },
    {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'client', namespace: ELSEWHERE, labels: { role: 'client' } },
      spec: {
        securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [{
          name: 'main', image, imagePullPolicy: 'IfNotPresent', env: [{ name: 'TEST_DURATION', value: '2h' }],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
        }],
      },
    },
  ];
}

let evalSource = '';
let evalTarget = '';
let clusterId = '';

beforeAll(async () => {
  cleanSlate();
  kubectl(['delete', 'namespace', ELSEWHERE, OTHER_DNS_NS, '--ignore-not-found', '--timeout=120s'], { allowFail: true });
  work = tempDir('netpol-real-');
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  publicServer = await startPublicServer();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'netpol' });
  // the "public" server's benchmarking address is let through the proxy, as in the spec journey
  runInstallCommand(cp, `${created.body.installCommand} --set 'egress.allowRanges={${NET.publicAddress}/32}'`);
  clusterId = created.body.clusterId;
  await waitConnected(cp, clusterId);
  const corednsImage = kubectl(['-n', 'kube-system', 'get', 'deployment', 'coredns', '-o', 'jsonpath={.spec.template.spec.containers[0].image}']).stdout;
  kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...dnsServerObjects(corednsImage), ...clientObjects()] }) });
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
  survey(evalSource, evalTarget);
}, 600_000);

afterAll(async () => {
  console.log(tables.join('\n\n'));
  await cp?.stop();
  await publicServer?.close();
  kubectl(['delete', 'namespace', ELSEWHERE, OTHER_DNS_NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
  cleanSlate();
});

describe('NetworkPolicies enforced on the real node, attempt by attempt', () => {
  it('the chart as installed (DNS peers: CoreDNS): observed = intended = cyclonus', async () => {
    const scenario: Scenario = { name: 'default', values: [], isDnsPeer: isCoreDns, dnsPorts: [53], proxyReaches, isApiServer };
    expect(await table('default (CoreDNS)', scenario)).toEqual([]);
  });

  it('network.dnsPeers as an ipBlock: the other resolver is the peer, CoreDNS no longer', async () => {
    const ip = models.find((p) => p.ns === OTHER_DNS_NS)!.ip;
    upgradeReusing(chart, ['--set-json', `network.dnsPeers=[{"ipBlock":{"cidr":"${ip}/32"}}]`]);
    for (const w of ['agent', 'filler', 'egress'] as const) await rt.rolledOut(w);
    survey(evalSource, evalTarget);
    await applied('the ipBlock DNS peer to be enforced', 'rlmesh-runs/filler', 'other resolver dns/udp 53', true);
    const scenario: Scenario = { name: 'ipBlock', values: [], isDnsPeer: (p) => p.ip === ip, dnsPorts: [53], proxyReaches, isApiServer };
    expect(await table(`network.dnsPeers ipBlock ${ip}/32`, scenario)).toEqual([]);
  });

  it('network.dnsPeers as namespace + pod selector with dnsPorts [53, 5353]', async () => {
    upgradeReusing(chart, [
      '--set-json', `network.dnsPeers=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"${OTHER_DNS_NS}"}},"podSelector":{"matchLabels":${JSON.stringify(OTHER_DNS_LABELS)}}}]`,
      '--set-json', 'network.dnsPorts=[53,5353]']);
    for (const w of ['agent', 'filler', 'egress'] as const) await rt.rolledOut(w);
    survey(evalSource, evalTarget);
    await applied('port 5353 to the selected resolver to be enforced', 'rlmesh-runs/filler', 'other resolver dns/udp 5353', true);
    const scenario: Scenario = {
      name: 'selector', values: [], isDnsPeer: (p) => p.ns === OTHER_DNS_NS && p.labels['dns.operator.openshift.io/daemonset-dns'] === 'default', dnsPorts: [53, 5353], proxyReaches, isApiServer,
    };
    expect(await table('network.dnsPeers namespace + pod selector, dnsPorts [53, 5353]', scenario)).toEqual([]);
  });

  it('network.apiServerAddresses pins the API ports: the filler can no longer reach the public server directly on 443', async () => {
    // the kubernetes EndpointSlice's address (test/cluster/addons.ts), where the Service's DNAT leads
    upgradeReusing(chart, ['--set', `network.apiServerAddresses={${NET.hostAddress}/32}`]);
    for (const w of ['agent', 'filler', 'egress'] as const) await rt.rolledOut(w);
    survey(evalSource, evalTarget);
    await applied('the pinned API addresses to be enforced', 'rlmesh-runs/filler', 'public server directly tcp/443', false);
    const scenario: Scenario = {
      name: 'pinned', values: [], isDnsPeer: (p) => p.ns === OTHER_DNS_NS && p.labels['dns.operator.openshift.io/daemonset-dns'] === 'default', dnsPorts: [53, 5353], proxyReaches,
      isApiServer: (p) => p.ip === NET.hostAddress,
    };
    expect(await table(`network.apiServerAddresses {${NET.hostAddress}/32}`, scenario)).toEqual([]);
  });

  it('helm uninstall mid-run keeps rlmesh-runs fenced: direct attempts stay refused, the evaluation ends cleanly, a reinstall adopts the fences', async () => {
    const short = await submit(cp, clusterId, { ...smallEvaluation(image, { TEST_DURATION: '100s' }), deadlineSeconds: '600' });
    await until(`evaluation ${short} to run`, () => { try { return evaluationPod(short); } catch { return undefined; } }, { timeoutMs: 240_000, intervalMs: 1000, context: runsState });
    helm(['uninstall', 'rlmesh', '-n', NS, '--wait', '--timeout', '3m']);
    const fences = (): string[] => kubectl(['-n', RUNS, 'get', 'networkpolicies,limitranges,resourcequotas', '-o', 'name']).stdout.split('\n').filter(Boolean).sort();
    expect(fences()).toEqual(['limitrange/rlmesh-runs-defaults', 'networkpolicy.networking.k8s.io/rlmesh-runs-default-deny', 'networkpolicy.networking.k8s.io/rlmesh-runs-egress', 'resourcequota/rlmesh-runs']);
    // every way out that does not lead through the (now uninstalled) proxy
    const direct = targets.filter((t) => !t.attempt.name.startsWith('egress proxy')).map((t) => t.attempt);
    const p = evaluationPod(short);
    const seen = await attemptFrom({ pod: modelled(p, 'eval-short', 'eval'), podName: p.metadata.name }, direct);
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
    survey(evalSource, evalTarget);
  }, 900_000);

  it('with no NetworkPolicy at all every attempt gets through: each refusal above was a policy', async () => {
    kubectl(['-n', RUNS, 'delete', 'networkpolicies', '--all']);
    kubectl(['-n', NS, 'delete', 'networkpolicies', '--all']);
    await applied('the policies to be lifted', 'rlmesh-runs/eval', 'public server directly tcp/443', true);
    expect(await table('no NetworkPolicy', 'no policies')).toEqual([]);
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
