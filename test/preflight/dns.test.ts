// network.dnsPeers evaluated against the live cluster: a resolver Deployment
// (kwok runs its pods; they get pod IPs) in a namespace of the test's own,
// and peers that match it, match nothing, or match it on the wrong port.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkDnsPeers } from '../../lib/preflight/checks/dns-peers.ts';
import { kubectl } from '../support/cluster.ts';
import { agentKubeConfig, apply, context, setUpNamespaces, tearDownNamespaces } from './support.ts';
import { until } from '../support/until.ts';

const DNS_NS = 'rlmesh-pf-dns';
const resolverPeer = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': DNS_NS } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } };
let podIp = '';
let podName = '';

beforeAll(async () => {
  setUpNamespaces();
  apply(`
apiVersion: v1
kind: Namespace
metadata: { name: ${DNS_NS}, labels: { rlmesh.dev/preflight-dns: resolver } }
---
apiVersion: apps/v1
kind: Deployment
metadata: { name: coredns, namespace: ${DNS_NS} }
spec:
  replicas: 1
  selector: { matchLabels: { k8s-app: kube-dns } }
  template:
    metadata: { labels: { k8s-app: kube-dns } }
    spec:
      nodeSelector: { type: kwok }
      tolerations: [{ key: kwok.x-k8s.io/node, operator: Equal, value: fake, effect: NoSchedule }]
      containers:
        - name: coredns
          image: registry.k8s.io/coredns/coredns:v1.12.0
          ports:
            - { name: dns, containerPort: 53, protocol: UDP }
            - { name: dns-tcp, containerPort: 53, protocol: TCP }
            - { name: metrics, containerPort: 9153, protocol: TCP }
`);
  [podName, podIp] = await until('the resolver pod Running with an IP', () => {
    const out = kubectl(['get', 'pods', '-n', DNS_NS, '-l', 'k8s-app=kube-dns', '-o', 'jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name} {.status.podIP}{"\\n"}{end}']).stdout.trim();
    const [name, ip] = out.split('\n')[0]?.split(' ') ?? [];
    return name && ip ? [name, ip] : undefined;
  });
});

afterAll(() => {
  kubectl(['delete', 'namespace', DNS_NS, '--wait=false', '--ignore-not-found']);
  tearDownNamespaces();
});

describe('dns-peers', () => {
  it('passes when the peers select the running resolver pods on the DNS port (CLI and agent rights)', async () => {
    const r = await checkDnsPeers(context({ dnsPeers: [resolverPeer] }));
    expect(r.verdict).toBe('pass');
    expect(r.found).toBe(`peer 1 (namespaces {kubernetes.io/metadata.name=${DNS_NS}} pods {k8s-app=kube-dns}) matches resolver pod(s) ${DNS_NS}/${podName} on port 53`);
    const asAgent = await checkDnsPeers(context({ dnsPeers: [resolverPeer] }, 'agent', await agentKubeConfig()));
    expect(asAgent.verdict).toBe('pass');
  });

  it('matches namespaces by their labels, as the CNI does', async () => {
    const byLabel = { namespaceSelector: { matchLabels: { 'rlmesh.dev/preflight-dns': 'resolver' } }, podSelector: { matchExpressions: [{ key: 'k8s-app', operator: 'In', values: ['kube-dns', 'coredns'] }] } };
    expect((await checkDnsPeers(context({ dnsPeers: [byLabel] }, 'agent', await agentKubeConfig()))).verdict).toBe('pass');
  });

  it('fails on dnsPeers that match nothing, and suggests the resolver it found', async () => {
    const r = await checkDnsPeers(context({ dnsPeers: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'openshift-dns' } } }] }));
    expect(r.verdict).toBe('fail');
    expect(r.found).toMatch(/^peer 1 \(namespaces \{kubernetes\.io\/metadata\.name=openshift-dns\}\) matches no running pod; resolver pods in the cluster: /);
    expect(r.found).toContain(`${DNS_NS}/${podName}`);
    expect(r.fix).toMatch(/^Set network\.dnsPeers to your resolver's peers, e\.g\. \[\{ namespaceSelector: \{ matchLabels: \{ kubernetes\.io\/metadata\.name: .+ \} \}, podSelector: \{ matchLabels: \{ k8s-app: kube-dns \} \} \}\]/);
  });

  it('fails on the chart default where the cluster runs no CoreDNS in kube-system', async () => {
    const coreDns = kubectl(['get', 'pods', '-n', 'kube-system', '-l', 'k8s-app=kube-dns', '-o', 'name']).stdout.trim();
    const r = await checkDnsPeers(context());
    if (coreDns === '') {
      expect(r.verdict).toBe('fail');
      expect(r.found).toContain('peer 1 (namespaces {kubernetes.io/metadata.name=kube-system} pods {k8s-app=kube-dns}) matches no running pod');
    } else {
      expect(r.verdict).toBe('pass');
    }
  });

  it('fails when the resolver listens on a port outside dnsPorts, naming the port to set', async () => {
    const r = await checkDnsPeers(context({ dnsPeers: [resolverPeer], dnsPorts: [5353] }));
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain('which listen on 53, not network.dnsPorts 5353');
    expect(r.fix).toBe('Set network.dnsPorts=[53], the ports the resolver pods listen on (NetworkPolicy sees the port after the Service translates it).');
  });

  it('checks ipBlock peers against resolver pod addresses', async () => {
    expect((await checkDnsPeers(context({ dnsPeers: [{ ipBlock: { cidr: `${podIp}/32` } }] }))).verdict).toBe('pass');
    const r = await checkDnsPeers(context({ dnsPeers: [{ ipBlock: { cidr: '192.0.2.0/24' } }] }));
    expect(r.verdict).toBe('fail');
    expect(r.found).toMatch(/^peer 1 \(ipBlock 192\.0\.2\.0\/24\) contains no resolver address/);
  });
});
