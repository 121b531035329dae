// The chart's NetworkPolicies, proven offline with a third-party simulator:
// render them with helm, hand them to cyclonus (`analyze --mode probe`) with a
// model of pods in rlmesh-runs, rlmesh-system (the chart's pods, the CRD
// upgrade hook's, and a pod of someone else's that only the default-deny
// covers), kube-system (CoreDNS), the other resolvers and outside addresses, and
// compare its truth table, port by port, with the intended matrix written out below.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { clusterInfo } from '../support/cluster.ts';

const ROOT = join(import.meta.dirname, '../..');
const CYCLONUS_VERSION = 'v0.5.6';
const CYCLONUS_DIR = join(homedir(), '.cache/rlmesh-testbin', `cyclonus-${CYCLONUS_VERSION}`);
const JOIN_TOKEN = 'rlm_jt_ci0123456789abcdefghijklmnop';
// the chart under test; RLMESH_CHART_DIR points at another copy (e.g. a release's)
const CHART = process.env.RLMESH_CHART_DIR ?? join(ROOT, 'charts/rlmesh-runtime');

/** cyclonus from the Go module proxy, built once into the test binary cache. */
function cyclonus(): string {
  const bin = join(CYCLONUS_DIR, 'cyclonus');
  if (!existsSync(bin)) {
    mkdirSync(CYCLONUS_DIR, { recursive: true });
    const go = existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go';
    execFileSync(go, ['install', `github.com/mattfenwick/cyclonus/cmd/cyclonus@${CYCLONUS_VERSION}`], {
      env: { ...process.env, GOBIN: CYCLONUS_DIR, GOFLAGS: '-mod=mod' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  }
  return bin;
}

type Pod = { ns: string; name: string; labels: Record<string, string>; ip: string };

const PODS: Pod[] = [
  { ns: 'rlmesh-runs', name: 'eval', labels: { 'rlmesh.dev/evaluation': 'e1' }, ip: '10.244.1.10' },
  { ns: 'rlmesh-system', name: 'proxy', labels: { 'app.kubernetes.io/name': 'rlmesh-egress-proxy', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.20' },
  { ns: 'rlmesh-system', name: 'agent', labels: { 'app.kubernetes.io/name': 'rlmesh-cluster-agent', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.21' },
  { ns: 'rlmesh-system', name: 'controller', labels: { 'app.kubernetes.io/name': 'rlmesh-cluster-controller', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.22' },
  { ns: 'rlmesh-system', name: 'gpu-discovery', labels: { 'app.kubernetes.io/name': 'rlmesh-gpu-feature-discovery', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.23' },
  { ns: 'rlmesh-system', name: 'crd-upgrade', labels: { 'app.kubernetes.io/name': 'rlmesh-crd-upgrade', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.24' },
  { ns: 'rlmesh-system', name: 'unrelated', labels: { app: 'someone-elses' }, ip: '10.244.1.25' },
  { ns: 'kube-system', name: 'coredns', labels: { 'k8s-app': 'kube-dns' }, ip: '10.244.0.10' },
  { ns: 'kube-system', name: 'other', labels: { 'k8s-app': 'metrics-server' }, ip: '10.244.0.11' },
  { ns: 'node-local', name: 'dns', labels: { 'k8s-app': 'node-local-dns' }, ip: '169.254.20.10' },
  { ns: 'openshift-dns', name: 'dns', labels: { 'dns.operator.openshift.io/daemonset-dns': 'default' }, ip: '10.128.0.10' },
  { ns: 'outside', name: 'public', labels: { role: 'internet' }, ip: '93.184.216.34' },
  { ns: 'outside', name: 'public6', labels: { role: 'internet6' }, ip: '2606:2800:220:1::1' },
  { ns: 'outside', name: 'private', labels: { role: 'in-cluster-minio' }, ip: '10.20.30.40' },
  { ns: 'outside', name: 'metadata', labels: { role: 'metadata' }, ip: '169.254.169.254' },
  { ns: 'outside', name: 'apiserver', labels: { role: 'apiserver' }, ip: '172.18.0.2' },
];

type Probe = { protocol: 'TCP' | 'UDP'; port: number };
const PROBES: Probe[] = [
  { protocol: 'TCP', port: 3128 }, { protocol: 'TCP', port: 443 }, { protocol: 'TCP', port: 80 },
  { protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }, { protocol: 'UDP', port: 5353 }, { protocol: 'TCP', port: 5353 },
  { protocol: 'TCP', port: 6443 }, { protocol: 'TCP', port: 9090 }, { protocol: 'TCP', port: 8081 },
];

interface Scenario {
  name: string;
  values: string[];
  isDnsPeer: (p: Pod) => boolean;
  dnsPorts: number[];
}

const SCENARIOS: Scenario[] = [
  { name: 'default (CoreDNS)', values: [], isDnsPeer: (p) => p.ns === 'kube-system' && p.labels['k8s-app'] === 'kube-dns', dnsPorts: [53] },
  {
    name: 'GKE NodeLocal DNSCache (ipBlock)', values: ['-f', join(CHART, 'ci/gke-nodelocal-dns-values.yaml')],
    isDnsPeer: (p) => p.ip === '169.254.20.10', dnsPorts: [53],
  },
  {
    name: 'OpenShift DNS (namespace + pod selector, port 5353)', values: ['-f', join(CHART, 'ci/openshift-dns-values.yaml')],
    isDnsPeer: (p) => p.ns === 'openshift-dns' && p.labels['dns.operator.openshift.io/daemonset-dns'] === 'default', dnsPorts: [53, 5353],
  },
];

const is = (p: Pod, name: string) => `${p.ns}/${p.name}` === name;
const PUBLIC = new Set(['93.184.216.34', '2606:2800:220:1::1']);
const PROXY_PORT = 3128;
const PROXY_ALLOWED_PORTS = [443];
const API_PORTS = [443, 6443];
const OPS_PORTS = [9090, 8081];

/** The intended matrix: may `from` open `probe` to `to`? */
function intended(s: Scenario, from: Pod, to: Pod, probe: Probe): boolean {
  const dns = s.isDnsPeer(to) && s.dnsPorts.includes(probe.port);
  const tcp = probe.protocol === 'TCP';
  let egress = true;
  if (is(from, 'rlmesh-runs/eval')) egress = (is(to, 'rlmesh-system/proxy') && tcp && probe.port === PROXY_PORT) || dns;
  else if (is(from, 'rlmesh-system/proxy')) egress = dns || (PUBLIC.has(to.ip) && tcp && PROXY_ALLOWED_PORTS.includes(probe.port));
  else if (is(from, 'rlmesh-system/agent') || is(from, 'rlmesh-system/controller')) egress = dns || (tcp && API_PORTS.includes(probe.port));
  // the Kubernetes API only (network.apiServerPorts, by default the same ports)
  else if (is(from, 'rlmesh-system/gpu-discovery') || is(from, 'rlmesh-system/crd-upgrade')) egress = dns || (tcp && API_PORTS.includes(probe.port));
  // the release namespace's default-deny: a pod no policy of the chart allows reaches nothing
  else if (from.ns === 'rlmesh-system') egress = false;
  let ingress = true;
  if (is(to, 'rlmesh-runs/eval')) ingress = false;
  else if (is(to, 'rlmesh-system/proxy')) ingress = tcp && ((from.ns === 'rlmesh-runs' && probe.port === PROXY_PORT) || OPS_PORTS.includes(probe.port));
  else if (is(to, 'rlmesh-system/agent') || is(to, 'rlmesh-system/controller')) ingress = tcp && OPS_PORTS.includes(probe.port);
  // GPU discovery, the hook and anyone else's pod there: nothing comes in
  else if (to.ns === 'rlmesh-system') ingress = false;
  return egress && ingress;
}

/** Renders the chart's NetworkPolicies as one NetworkPolicyList (cyclonus reads one object per file). */
function renderPolicies(dir: string, values: string[]): string {
  const helm = process.env.HELM ?? join(clusterInfo().bin, 'helm');
  const out = execFileSync(helm, [
    'template', 'rlmesh', CHART, '-n', 'rlmesh-system', '--kube-version', '1.35.4',
    '--set', `joinToken=${JOIN_TOKEN}`, '--set', 'gpuFeatureDiscovery.enabled=true', '--show-only', 'templates/networkpolicies.yaml', ...values,
  ], { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 });
  const items = parseAllDocuments(out).map((d) => d.toJSON()).filter((o) => o?.kind === 'NetworkPolicy');
  const file = join(dir, `policies-${values.join('_').replace(/[^a-z0-9]+/gi, '-')}.json`);
  writeFileSync(file, JSON.stringify({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicyList', items }));
  return file;
}

/** Runs cyclonus for one probe and returns its combined truth table: allowed[from][to]. */
function simulate(dir: string, policies: string, probe: Probe): Record<string, Record<string, string>> {
  const model = join(dir, `model-${probe.protocol}-${probe.port}.json`);
  const containers = PROBES.map((p) => ({ Name: `${p.protocol.toLowerCase()}-${p.port}`, Port: p.port, Protocol: p.protocol }));
  writeFileSync(model, JSON.stringify({
    Probes: [{ Protocol: probe.protocol, Port: probe.port }],
    Resources: {
      Namespaces: Object.fromEntries([...new Set(PODS.map((p) => p.ns))].map((ns) => [ns, { 'kubernetes.io/metadata.name': ns }])),
      Pods: PODS.map((p) => ({ Namespace: p.ns, Name: p.name, Labels: p.labels, IP: p.ip, Containers: containers })),
    },
  }));
  const stdout = execFileSync(cyclonus(), ['analyze', '--mode', 'probe', '--policy-path', policies, '--probe-path', model], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
  });
  // the first Combined table is the model's; cyclonus then prints an empty one for live pods
  const combined = stdout.slice(stdout.indexOf('Combined:'), stdout.indexOf('\n\n', stdout.indexOf('Combined:')));
  const rows = combined.split('\n').filter((l) => l.startsWith('|')).map((l) => l.split('|').slice(1, -1).map((c) => c.trim()));
  const [header, ...body] = rows;
  const columns = header!.slice(1).map((c) => c.toLowerCase());
  const table: Record<string, Record<string, string>> = {};
  for (const row of body) table[row[0]!] = Object.fromEntries(columns.map((c, i) => [c, row[i + 1]!]));
  return table;
}

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'egress-netpol-'));
  cyclonus();
});

describe.each(SCENARIOS)('NetworkPolicies, $name', (scenario) => {
  let file: string;
  beforeAll(() => {
    file = renderPolicies(work, scenario.values);
  });

  it('the chart renders the policies cyclonus parses', () => {
    const parsed = execFileSync(cyclonus(), ['analyze', '--mode', 'parse', '--policy-path', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    for (const name of [
      'rlmesh-runs/rlmesh-runs-default-deny', 'rlmesh-runs/rlmesh-runs-egress', 'rlmesh-system/rlmesh-default-deny', 'rlmesh-system/rlmesh-egress-proxy',
      'rlmesh-system/rlmesh-cluster-agent', 'rlmesh-system/rlmesh-cluster-controller', 'rlmesh-system/rlmesh-gpu-feature-discovery', 'rlmesh-system/rlmesh-crd-upgrade',
    ]) {
      expect(parsed).toContain(name);
    }
  });

  it.each(PROBES)('cyclonus truth table equals the intended matrix on $protocol/$port', (probe) => {
    const table = simulate(work, file, probe);
    const differences: string[] = [];
    for (const from of PODS) {
      for (const to of PODS) {
        const key = (p: Pod) => `${p.ns}/${p.name}`;
        const cell = table[key(from)]?.[key(to)];
        expect(cell, `cyclonus has a cell for ${key(from)} → ${key(to)}`).toMatch(/^[.X]$/);
        const want = intended(scenario, from, to, probe) ? '.' : 'X';
        if (cell !== want) differences.push(`${key(from)} → ${key(to)}: cyclonus ${cell === '.' ? 'allows' : 'denies'}, intended ${want === '.' ? 'allow' : 'deny'}`);
      }
    }
    expect(differences).toEqual([]);
  });
});
