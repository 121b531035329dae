// The real-traffic truth table of the chart's NetworkPolicies, shared by the
// single-node suite (network-policies.test.ts) and the multi-node one
// (test/multi-node/network-policies.test.ts). From an evaluation pod, the
// filler, an egress proxy, the agent and a pod in another namespace, each
// attempt (a TCP connect, a DNS query over UDP and over TCP) goes to the proxy,
// CoreDNS, a resolver that is not a DNS peer, the apiserver, the control plane,
// another evaluation pod, the "public" test server directly, the registry's
// private address on 443, a pod elsewhere on 443 and a node's kubelet. The attempts run in an ephemeral container of the real pod, so they
// leave from its network namespace and address, under the policies that select
// it. Each cell is compared with the intended matrix and with cyclonus's
// prediction from the policies as they are in the cluster.
import { join } from 'node:path';
import { NET, realNodes } from '../cluster/real-node.ts';
import { intended, key, simulate, writePolicies, type Pod, type Probe, type Scenario } from '../egress/network-model.ts';
import { kubectl } from '../support/cluster.ts';
import { until } from '../support/until.ts';
import { NS, RUNS, Runtime, type Workload } from './harness.ts';

export const ELSEWHERE = 'rlmesh-netpol-elsewhere';
// the resolver that is a DNS peer only in the custom scenarios: OpenShift's namespace and label, ports 53 and 5353
export const OTHER_DNS_NS = 'openshift-dns';
export const OTHER_DNS_LABELS = { 'dns.operator.openshift.io/daemonset-dns': 'default' };
export const LISTEN_PORT = 8080;
const KUBELET_PORT = 10250;

type Kind = 'tcp' | 'dns-udp' | 'dns-tcp';
export type Attempt = { name: string; kind: Kind; addr: string };
/** one column of the table: what is attempted, and which model pod and probe it is to cyclonus */
export type Target = { attempt: Attempt; to: Pod; probe: Probe };
export type Source = { pod: Pod; podName: string };
export type KubePod = { metadata: { name: string; namespace: string; labels?: Record<string, string> }; spec: { nodeName?: string }; status: { podIP?: string; phase?: string } };

const rt = new Runtime();

export function podsOf(ns: string, selector: string): KubePod[] {
  return (JSON.parse(kubectl(['-n', ns, 'get', 'pods', '-l', selector, '-o', 'json']).stdout) as { items: KubePod[] }).items.filter((p) => p.status.phase === 'Running');
}

/** A real pod as the model sees it: its namespace, labels and address; `role` says what it is to the intended matrix. */
export function modelled(p: KubePod, name: string, role?: string): Pod {
  return { ns: p.metadata.namespace, name, labels: p.metadata.labels ?? {}, ip: p.status.podIP!, ...(role ? { role } : {}) };
}

function outside(name: string, ip: string): Pod {
  return { ns: 'outside', name, labels: { role: name }, ip };
}

function getPod(ns: string, name: string): KubePod {
  return JSON.parse(kubectl(['-n', ns, 'get', 'pod', name, '-o', 'json']).stdout) as KubePod;
}

function workloadPod(w: Workload): KubePod {
  const p = rt.pods(w).find((x) => x.status.phase === 'Running');
  if (!p) throw new Error(`${w}: no running pod`);
  return getPod(w === 'filler' ? RUNS : NS, p.metadata.name);
}

export function evaluationPod(id: string): KubePod {
  const p = podsOf(RUNS, 'rlmesh.dev/evaluation').find((x) => x.metadata.name.includes(id));
  if (!p) throw new Error(`no running pod of evaluation ${id}`);
  return p;
}

/** The NetworkPolicies as they are in the cluster, for cyclonus. */
function livePolicies(file: string): string {
  const items = [RUNS, NS].flatMap((ns) => (JSON.parse(kubectl(['-n', ns, 'get', 'networkpolicies', '-o', 'json']).stdout) as { items: { metadata: Record<string, unknown> }[] }).items)
    .map((p) => ({ ...p, metadata: { name: p.metadata.name, namespace: p.metadata.namespace } }));
  return writePolicies(file, items);
}

const probeKey = (p: Probe) => `${p.protocol}/${p.port}`;
const mark = (b: boolean) => (b ? 'allow' : 'deny');

export class TrafficTable {
  sources: Source[] = [];
  targets: Target[] = [];
  models: Pod[] = [];
  /** model key (ns/name) → the node it ran on at the last survey ("host" for the host's bridge addresses) */
  nodeOf = new Map<string, string>();
  /** every table run, as printed rows */
  readonly printed: string[] = [];
  private seq = 0;
  private readonly image: string;
  private readonly work: string;

  /** `image`: the test evaluation image, which runs the attempts; `work`: a folder for cyclonus's files. */
  constructor(image: string, work: string) {
    this.image = image;
    this.work = work;
  }

  /** The pods and addresses of the table, read from the cluster (pods may have been replaced since the last table). */
  survey(evalSource: string, evalTarget: string): void {
    const coredns = podsOf('kube-system', 'k8s-app=kube-dns')[0]!;
    const otherDns = podsOf(OTHER_DNS_NS, 'dns.operator.openshift.io/daemonset-dns=default')[0]!;
    const evalB = evaluationPod(evalSource);
    const evalC = evaluationPod(evalTarget);
    // The proxy attempted is not the one attempting: a Service hairpin to itself would be a different path.
    // The attempting one shares the attempting evaluation pod's node where one does, so on several nodes the attempted one is elsewhere.
    const replicas = rt.pods('egress').filter((x) => x.status.phase === 'Running').map((x) => getPod(NS, x.metadata.name));
    const proxy = replicas.find((p) => p.spec.nodeName === evalB.spec.nodeName) ?? replicas[0];
    const otherProxy = replicas.find((p) => p !== proxy);
    if (!proxy || !otherProxy) throw new Error('the table needs both egress proxy replicas running');
    const filler = workloadPod('filler');
    const agent = workloadPod('agent');
    const client = podsOf(ELSEWHERE, 'role=client')[0]!;
    // the kubelet attempted is the attempted proxy's node's
    const node = realNodes().find((n) => n.name === otherProxy.spec.nodeName)!;
    const kubernetesService = kubectl(['-n', 'default', 'get', 'service', 'kubernetes', '-o', 'jsonpath={.spec.clusterIP}']).stdout;
    this.nodeOf = new Map();
    const on = (p: KubePod, name: string, role?: string): Pod => {
      const pod = modelled(p, name, role);
      this.nodeOf.set(key(pod), p.spec.nodeName ?? '?');
      return pod;
    };
    const m = {
      eval: on(evalB, 'eval', 'eval'),
      evalC: on(evalC, 'eval-other', 'eval'),
      filler: on(filler, 'filler'),
      proxy: on(proxy, 'proxy'),
      proxyOther: on(otherProxy, 'proxy-other', 'proxy'),
      agent: on(agent, 'agent'),
      client: on(client, 'client'),
      coredns: on(coredns, 'coredns'),
      otherDns: on(otherDns, 'dns'),
      // the apiserver and the control plane are both on the host's bridge address; the kubernetes Service's endpoint is its port 6443
      host: outside('host', NET.hostAddress),
      public: outside('public', NET.publicAddress),
      // the platform's registry: a private address the agent is given (controlPlane.addresses), the filler not
      registry: outside('registry', NET.registryAddress),
      node: outside('node', node.address),
    };
    this.nodeOf.set(key(m.host), 'host').set(key(m.public), 'host').set(key(m.registry), 'host').set(key(m.node), node.name);
    this.models = Object.values(m);
    const t = (name: string, kind: Kind, addr: string, to: Pod, port: number): Target => ({ attempt: { name, kind, addr }, to, probe: { protocol: kind === 'dns-udp' ? 'UDP' : 'TCP', port } });
    this.targets = [
      t('egress proxy tcp/3128', 'tcp', `${m.proxyOther.ip}:3128`, m.proxyOther, 3128),
      // its metrics and health ports: network.metricsPeers only
      t('egress proxy metrics tcp/9090', 'tcp', `${m.proxyOther.ip}:9090`, m.proxyOther, 9090),
      t('egress proxy health tcp/8081', 'tcp', `${m.proxyOther.ip}:8081`, m.proxyOther, 8081),
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
      t('registry (private, not the API) tcp/443', 'tcp', `${NET.registryAddress}:443`, m.registry, 443),
      // a private address that is neither the API nor the control plane: the client pod listens on 443
      t('a pod elsewhere tcp/443', 'tcp', `${m.client.ip}:443`, m.client, 443),
      t(`the node (kubelet) tcp/${KUBELET_PORT}`, 'tcp', `${node.address}:${KUBELET_PORT}`, m.node, KUBELET_PORT),
    ];
    this.sources = [
      { pod: m.eval, podName: evalB.metadata.name },
      { pod: m.filler, podName: filler.metadata.name },
      { pod: m.proxy, podName: proxy.metadata.name },
      { pod: m.agent, podName: agent.metadata.name },
      { pod: m.client, podName: client.metadata.name },
    ];
  }

  /** ns/name@node of a model pod, for the printed rows. */
  where(p: Pod): string {
    return `${key(p)}@${this.nodeOf.get(key(p)) ?? '?'}`;
  }

  /**
   * Runs the attempts in a new ephemeral container of `source`'s pod (its network
   * namespace, its policies) and returns name → got through.
   */
  async attemptFrom(source: Source, attempts: Attempt[]): Promise<Map<string, boolean>> {
    const name = `attempts-${++this.seq}`;
    const container = {
      name,
      image: this.image,
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

  /**
   * Runs every attempt from every source and compares the outcome with the
   * intended matrix (`scenario`, or "everything" with no policies) and with
   * cyclonus on the live policies. Returns the cells that disagree.
   */
  async run(label: string, scenario: Scenario | 'no policies'): Promise<string[]> {
    const probes = [...new Map(this.targets.map((t) => [probeKey(t.probe), t.probe])).values()];
    const predicted = new Map<string, Record<string, Record<string, string>>>();
    if (scenario !== 'no policies') {
      const policies = livePolicies(join(this.work, `policies-${this.seq}.json`));
      for (const p of probes) predicted.set(probeKey(p), simulate(this.work, policies, this.models, p, probes));
    }
    const rows: string[] = [];
    const differences: string[] = [];
    for (const source of this.sources) {
      const seen = await this.attemptFrom(source, this.targets.map((t) => t.attempt));
      for (const t of this.targets) {
        const observed = seen.get(t.attempt.name)!;
        const want = scenario === 'no policies' ? true : intended(scenario, source.pod, t.to, t.probe);
        const cell = predicted.get(probeKey(t.probe))?.[key(source.pod)]?.[key(t.to)];
        const cyclonus = scenario === 'no policies' ? want : cell === '.';
        if (scenario !== 'no policies' && cell !== '.' && cell !== 'X') differences.push(`${key(source.pod)} → ${key(t.to)} ${probeKey(t.probe)}: cyclonus has no cell (${cell})`);
        const predictedMark = scenario === 'no policies' ? '-' : mark(cyclonus);
        rows.push(`${this.where(source.pod).padEnd(36)} ${t.attempt.name.padEnd(40)} ${`@${this.nodeOf.get(key(t.to))}`.padEnd(8)} observed ${mark(observed).padEnd(5)} intended ${mark(want).padEnd(5)} cyclonus ${predictedMark}`);
        if (observed !== want || observed !== cyclonus) {
          differences.push(`${this.where(source.pod)} → ${t.attempt.name} (${t.attempt.addr}@${this.nodeOf.get(key(t.to))}): observed ${mark(observed)}, intended ${mark(want)}, cyclonus ${predictedMark}`);
        }
      }
    }
    this.printed.push(`${label}\n${rows.join('\n')}`);
    return differences;
  }

  /** Waits until the enforcer has applied a change: one attempt from `from` (ns/name of a source) gives `want`. */
  async applied(what: string, from: string, target: string, want: boolean): Promise<void> {
    const t = this.targets.find((x) => x.attempt.name === target)!;
    const source = this.sources.find((x) => key(x.pod) === from)!;
    await until(what, async () => ((await this.attemptFrom(source, [t.attempt])).get(t.attempt.name) === want ? true : undefined), { timeoutMs: 90_000, intervalMs: 1000 });
  }
}

export const isCoreDns = (p: Pod): boolean => p.ns === 'kube-system' && p.labels['k8s-app'] === 'kube-dns';
export const proxyReaches = (p: Pod): boolean => p.ip === NET.publicAddress;
// the API's ports lead to its addresses only, which the install read from the cluster: the kubernetes
// EndpointSlice's (test/cluster/addons.ts) and the Service's ClusterIP, which the model folds into the host
export const isApiServer = (p: Pod): boolean => p.ip === NET.hostAddress;
// the agent's TCP 443: public addresses (none in the lab) and controlPlane.addresses, which the harness
// sets to the lab's control plane and its registry (CONTROL_PLANE_ADDRESSES in harness.ts)
export const controlPlaneReaches = (p: Pod): boolean => p.ip === NET.hostAddress || p.ip === NET.registryAddress;

/** The resolver that is not a DNS peer by default, on ports 53 and 5353; on `nodeName` when given. */
export function dnsServerObjects(corednsImage: string, nodeName?: string): object[] {
  const corefile = '.:53 {\n  whoami\n}\n.:5353 {\n  whoami\n}\n';
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: OTHER_DNS_NS } },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'corefile', namespace: OTHER_DNS_NS }, data: { Corefile: corefile } },
    {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'dns', namespace: OTHER_DNS_NS, labels: OTHER_DNS_LABELS },
      spec: {
        ...(nodeName ? { nodeName } : {}),
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

/** A pod in a namespace of its own, which no policy of the chart selects, listening on TCP 443; on `nodeName` when given. */
export function clientObjects(image: string, nodeName?: string): object[] {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ELSEWHERE } },
    {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'client', namespace: ELSEWHERE, labels: { role: 'client' } },
      spec: {
        ...(nodeName ? { nodeName } : {}),
        securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' }, sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '443' }] },
        containers: [{
          name: 'main', image, imagePullPolicy: 'IfNotPresent', env: [{ name: 'TEST_DURATION', value: '2h' }, { name: 'TEST_LISTEN', value: '443' }],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
        }],
      },
    },
  ];
}
