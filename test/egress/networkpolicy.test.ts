// The chart's NetworkPolicies, proven offline with a third-party simulator:
// render them with helm, hand them to cyclonus (`analyze --mode probe`) with a
// model of pods in rlmesh-runs, rlmesh-system (the chart's pods, the CRD
// upgrade hook's, and a pod of someone else's that only the default-deny
// covers), kube-system (CoreDNS), the other resolvers and outside addresses, and
// compare its truth table, port by port, with the intended matrix written out below.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cyclonus, intended, key, renderPolicies, simulate, writePolicies, type Pod, type Probe, type Scenario } from './network-model.ts';
import { tempDir } from '../support/temp.ts';

const ROOT = join(import.meta.dirname, '../..');
const JOIN_TOKEN = 'rlm_jt_ci0123456789abcdefghijklmnop';
// the chart under test; RLMESH_CHART_DIR points at another copy (e.g. a release's)
const CHART = process.env.RLMESH_CHART_DIR ?? join(ROOT, 'charts/rlmesh-runtime');

const PODS: Pod[] = [
  { ns: 'rlmesh-runs', name: 'eval', labels: { 'rlmesh.dev/evaluation': 'e1' }, ip: '10.244.1.10' },
  { ns: 'rlmesh-runs', name: 'filler', labels: { 'app.kubernetes.io/name': 'rlmesh-artifact-cache-filler', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.11' },
  { ns: 'rlmesh-system', name: 'proxy', labels: { 'app.kubernetes.io/name': 'rlmesh-egress-proxy', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.20' },
  { ns: 'rlmesh-system', name: 'agent', labels: { 'app.kubernetes.io/name': 'rlmesh-cluster-agent', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.21' },
  { ns: 'rlmesh-system', name: 'controller', labels: { 'app.kubernetes.io/name': 'rlmesh-cluster-controller', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.22' },
  { ns: 'rlmesh-system', name: 'gpu-discovery', labels: { 'app.kubernetes.io/name': 'rlmesh-gpu-feature-discovery', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.23' },
  { ns: 'rlmesh-system', name: 'crd-upgrade', labels: { 'app.kubernetes.io/name': 'rlmesh-crd-upgrade', 'app.kubernetes.io/instance': 'rlmesh' }, ip: '10.244.1.24' },
  { ns: 'rlmesh-system', name: 'unrelated', labels: { app: 'someone-elses' }, ip: '10.244.1.25' },
  { ns: 'kube-system', name: 'coredns', labels: { 'k8s-app': 'kube-dns' }, ip: '10.244.0.10' },
  { ns: 'kube-system', name: 'other', labels: { 'k8s-app': 'metrics-server' }, ip: '10.244.0.11' },
  { ns: 'monitoring', name: 'prometheus', labels: { 'app.kubernetes.io/name': 'prometheus' }, ip: '10.244.2.10' },
  { ns: 'monitoring', name: 'grafana', labels: { 'app.kubernetes.io/name': 'grafana' }, ip: '10.244.2.11' },
  { ns: 'node-local', name: 'dns', labels: { 'k8s-app': 'node-local-dns' }, ip: '169.254.20.10' },
  { ns: 'openshift-dns', name: 'dns', labels: { 'dns.operator.openshift.io/daemonset-dns': 'default' }, ip: '10.128.0.10' },
  { ns: 'outside', name: 'public', labels: { role: 'internet' }, ip: '93.184.216.34' },
  { ns: 'outside', name: 'public6', labels: { role: 'internet6' }, ip: '2606:2800:220:1::1' },
  { ns: 'outside', name: 'private', labels: { role: 'in-cluster-minio' }, ip: '10.20.30.40' },
  { ns: 'outside', name: 'metadata', labels: { role: 'metadata' }, ip: '169.254.169.254' },
  { ns: 'outside', name: 'apiserver', labels: { role: 'apiserver' }, ip: '172.18.0.2' },
];

const PROBES: Probe[] = [
  { protocol: 'TCP', port: 3128 }, { protocol: 'TCP', port: 443 }, { protocol: 'TCP', port: 80 },
  { protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }, { protocol: 'UDP', port: 5353 }, { protocol: 'TCP', port: 5353 },
  { protocol: 'TCP', port: 6443 }, { protocol: 'TCP', port: 9090 }, { protocol: 'TCP', port: 8081 },
];

const PUBLIC = new Set(['93.184.216.34', '2606:2800:220:1::1']);
const proxyReaches = (p: Pod) => PUBLIC.has(p.ip);
// the agent's TCP 443: public addresses only, and controlPlane.addresses
const publicOnly = (p: Pod) => PUBLIC.has(p.ip);
// the API's ports lead to its addresses only: an offline render is given them (an install reads them from the cluster)
const APISERVER = '172.18.0.2';
const API_PINNED = ['--set', `network.apiServerAddresses={${APISERVER}/32}`];
const isApiServer = (p: Pod) => p.ip === APISERVER;
const isCoreDns = (p: Pod) => p.ns === 'kube-system' && p.labels['k8s-app'] === 'kube-dns';

const SCENARIOS: Scenario[] = [
  { name: 'default (CoreDNS)', values: [], isDnsPeer: isCoreDns, dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches: publicOnly },
  {
    name: 'GKE NodeLocal DNSCache (ipBlock)', values: ['-f', join(CHART, 'ci/gke-nodelocal-dns-values.yaml')],
    isDnsPeer: (p) => p.ip === '169.254.20.10', dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches: publicOnly,
  },
  {
    name: 'OpenShift DNS (namespace + pod selector, port 5353)', values: ['-f', join(CHART, 'ci/openshift-dns-values.yaml')],
    isDnsPeer: (p) => p.ns === 'openshift-dns' && p.labels['dns.operator.openshift.io/daemonset-dns'] === 'default', dnsPorts: [53, 5353], proxyReaches, isApiServer, controlPlaneReaches: publicOnly,
  },
  {
    name: 'a control plane at a private address (controlPlane.addresses)', values: ['--set', 'controlPlane.addresses={10.20.30.40/32}'],
    isDnsPeer: isCoreDns, dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches: (p) => PUBLIC.has(p.ip) || p.ip === '10.20.30.40',
  },
  {
    name: 'metrics peers of your own (network.metricsPeers: a namespace, and a podSelector alone for the release namespace)',
    values: ['--set-json', 'network.metricsPeers=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}}},{"podSelector":{"matchLabels":{"app":"someone-elses"}}}]'],
    isDnsPeer: isCoreDns, dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches: publicOnly,
    isMetricsPeer: (p) => p.ns === 'kube-system' || (p.ns === 'rlmesh-system' && p.labels.app === 'someone-elses'),
  },
  { name: 'no metrics peers (network.metricsPeers=[])', values: ['--set-json', 'network.metricsPeers=[]'], isDnsPeer: isCoreDns, dnsPorts: [53], proxyReaches, isApiServer, controlPlaneReaches: publicOnly, isMetricsPeer: () => false },
];

let work: string;
beforeAll(() => {
  work = tempDir('egress-netpol-');
  cyclonus();
});

describe.each(SCENARIOS)('NetworkPolicies, $name', (scenario) => {
  let file: string;
  beforeAll(() => {
    const values = ['--set', `joinToken=${JOIN_TOKEN}`, '--set', 'gpuFeatureDiscovery.enabled=true', ...API_PINNED, ...scenario.values];
    file = writePolicies(join(work, `policies-${scenario.values.join('_').replace(/[^a-z0-9]+/gi, '-')}.json`), renderPolicies(CHART, values));
  });

  it('the chart renders the policies cyclonus parses', () => {
    const parsed = execFileSync(cyclonus(), ['analyze', '--mode', 'parse', '--policy-path', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    for (const name of [
      'rlmesh-runs/rlmesh-runs-default-deny', 'rlmesh-runs/rlmesh-runs-egress', 'rlmesh-system/rlmesh-default-deny', 'rlmesh-system/rlmesh-egress-proxy',
      'rlmesh-system/rlmesh-cluster-agent', 'rlmesh-system/rlmesh-cluster-controller', 'rlmesh-system/rlmesh-gpu-feature-discovery', 'rlmesh-system/rlmesh-crd-upgrade',
      'rlmesh-runs/rlmesh-artifact-cache-filler',
    ]) {
      expect(parsed).toContain(name);
    }
  });

  it.each(PROBES)('cyclonus truth table equals the intended matrix on $protocol/$port', (probe) => {
    const table = simulate(work, file, PODS, probe, PROBES);
    const differences: string[] = [];
    for (const from of PODS) {
      for (const to of PODS) {
        const cell = table[key(from)]?.[key(to)];
        expect(cell, `cyclonus has a cell for ${key(from)} → ${key(to)}`).toMatch(/^[.X]$/);
        const want = intended(scenario, from, to, probe) ? '.' : 'X';
        if (cell !== want) differences.push(`${key(from)} → ${key(to)}: cyclonus ${cell === '.' ? 'allows' : 'denies'}, intended ${want === '.' ? 'allow' : 'deny'}`);
      }
    }
    expect(differences).toEqual([]);
  });
});
