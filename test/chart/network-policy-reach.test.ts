// No NetworkPolicy of either chart opens 443 or 6443 (or every port) to every
// address: rendered for every ci/*-values.yaml scenario (each also with GPU
// discovery on), the corporate-proxy scenario, the defaults with
// network.apiServerAddresses, and a private control plane, every egress rule on
// those ports names its destinations, and none of them is all addresses. A render
// that cannot read the cluster and is not given the API's addresses is refused,
// naming the value and rlmesh preflight. The same for rlmesh-observability:
// Prometheus reaches only the metrics port of the runtime's labelled pods, the API
// at its addresses and remote write at public addresses; Grafana admits only
// grafana.ingressFrom.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHART, OFFLINE_API_SERVER, render, scenarios, template, TOKEN, type K8sObject } from './chart.ts';
import * as obs from '../observability/chart.ts';

const token = ['--set', `joinToken=${TOKEN}`];
const WATCHED = [443, 6443];

type Peer = { ipBlock?: { cidr: string; except?: string[] }; namespaceSelector?: unknown; podSelector?: unknown };
type Rule = { to?: Peer[]; from?: Peer[]; ports?: { protocol?: string; port?: number | string }[] };
type Policy = K8sObject & { spec: { egress?: Rule[]; ingress?: Rule[] } };

const everywhere = (p: Peer) => (p.ipBlock?.cidr === '0.0.0.0/0' || p.ipBlock?.cidr === '::/0') && !p.ipBlock.except?.length;

/** Each egress rule that opens TCP 443 or 6443 (a rule without ports opens them all) to every address: no `to`, an empty one, or an ipBlock of everything. */
export function openToEverywhere(objects: Iterable<K8sObject>): string[] {
  const problems: string[] = [];
  for (const o of objects) {
    if (o.kind !== 'NetworkPolicy') continue;
    (o as Policy).spec.egress?.forEach((rule, i) => {
      const ports = rule.ports?.length ? rule.ports.filter((p) => (p.protocol ?? 'TCP') === 'TCP' && WATCHED.includes(Number(p.port))).map((p) => p.port) : ['every port'];
      if (!ports.length) return;
      if (!rule.to?.length || rule.to.some(everywhere)) problems.push(`${o.metadata.namespace}/${o.metadata.name} egress[${i}] opens ${ports.join(', ')} to every address: ${JSON.stringify(rule)}`);
    });
  }
  return problems;
}

const RUNTIME_RENDERS: { name: string; args: string[] }[] = [
  { name: 'the defaults with network.apiServerAddresses', args: [...token, ...OFFLINE_API_SERVER] },
  { name: 'a private control plane (controlPlane.addresses)', args: [...token, '--set', 'controlPlane.addresses={10.20.30.40/32}'] },
  { name: 'ci/corporate-proxy-values.yaml', args: ['-f', join(CHART, 'ci/corporate-proxy-values.yaml')] },
  ...scenarios().flatMap((s) => [
    { name: `ci/${s}`, args: ['-f', join(CHART, 'ci', s)] },
    { name: `ci/${s} + gpuFeatureDiscovery.enabled=true`, args: ['-f', join(CHART, 'ci', s), '--set', 'gpuFeatureDiscovery.enabled=true'] },
  ]),
];

describe.each(RUNTIME_RENDERS)('rlmesh-runtime NetworkPolicies, $name', ({ args }) => {
  it('no egress rule opens 443 or 6443 to every address', () => {
    const objects = render(args);
    expect([...objects.values()].filter((o) => o.kind === 'NetworkPolicy').length).toBeGreaterThanOrEqual(7);
    expect(openToEverywhere(objects.values())).toEqual([]);
  });
});

const egressOf = (objects: Map<string, K8sObject>, ns: string, name: string): Rule[] => (objects.get(`NetworkPolicy/${ns}/${name}`) as Policy | undefined)?.spec.egress ?? [];
const cidrs = (rule: Rule | undefined) => (rule?.to ?? []).map((p) => p.ipBlock?.cidr);
const on = (rules: Rule[], port: number) => rules.filter((r) => r.ports?.some((p) => p.port === port));

describe('rlmesh-runtime: where the API\'s and the control plane\'s ports lead', () => {
  it('the API\'s ports lead to network.apiServerAddresses only, for every pod that reads the API (the cache filler among them)', () => {
    const objects = render([...token, '--set', 'network.apiServerAddresses={172.18.0.2/32,fd00::1/128}', '--set', 'gpuFeatureDiscovery.enabled=true']);
    for (const [ns, name] of [['rlmesh-runs', 'rlmesh-artifact-cache-filler'], ['rlmesh-system', 'rlmesh-cluster-agent'], ['rlmesh-system', 'rlmesh-cluster-controller'], ['rlmesh-system', 'rlmesh-gpu-feature-discovery'], ['rlmesh-system', 'rlmesh-crd-upgrade']] as const) {
      const api = on(egressOf(objects, ns, name), 6443);
      expect(api, `${ns}/${name}`).toHaveLength(1);
      expect(cidrs(api[0]), `${ns}/${name}`).toEqual(['172.18.0.2/32', 'fd00::1/128']);
    }
  });

  it('the agent without a proxy: 443 to the public blocks (the egress proxy\'s except lists) and controlPlane.addresses, nothing else', () => {
    const objects = render([...token, ...OFFLINE_API_SERVER, '--set', 'controlPlane.addresses={10.20.30.40/32}']);
    const agent = egressOf(objects, 'rlmesh-system', 'rlmesh-cluster-agent');
    const controlPlane = agent.filter((r) => r.ports?.length === 1 && r.ports[0]!.port === 443);
    expect(controlPlane).toHaveLength(1);
    const proxyPublic = egressOf(objects, 'rlmesh-system', 'rlmesh-egress-proxy').find((r) => r.to?.some((p) => p.ipBlock?.cidr === '0.0.0.0/0'));
    expect(controlPlane[0]!.to).toEqual([...proxyPublic!.to!, { ipBlock: { cidr: '10.20.30.40/32' } }]);
    expect(controlPlane[0]!.to!.find((p) => p.ipBlock?.cidr === '0.0.0.0/0')!.ipBlock!.except).toEqual(expect.arrayContaining(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10']));
  });

  it('the agent behind controlPlane.proxy: 443 nowhere but the API and controlPlane.addresses', () => {
    const objects = render(['-f', join(CHART, 'ci/corporate-proxy-values.yaml'), '--set', 'controlPlane.addresses={10.20.30.40/32}']);
    const agent = egressOf(objects, 'rlmesh-system', 'rlmesh-cluster-agent');
    expect(on(agent, 443).map(cidrs)).toEqual([cidrs(on(agent, 6443)[0]), ['10.20.30.40/32']]);
    expect(JSON.stringify(agent)).not.toContain('0.0.0.0/0');
  });

  it('refuses a render that cannot read the cluster without network.apiServerAddresses, naming the value and rlmesh preflight', () => {
    const r = template(token, { allowFail: true, offlineApiServer: false });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('network.apiServerAddresses: is empty and the Kubernetes API\'s addresses could not be read from the cluster');
    expect(r.stderr).toContain('Run rlmesh preflight against the cluster, which prints the --set network.apiServerAddresses={…} line to add');
  });

  it('the check itself catches a rule without `to`, one to 0.0.0.0/0, and one without ports', () => {
    const policy = (egress: Rule[]): K8sObject => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'p', namespace: 'n' }, spec: { egress } });
    expect(openToEverywhere([policy([{ ports: [{ protocol: 'TCP', port: 443 }] }])])).toHaveLength(1);
    expect(openToEverywhere([policy([{ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }], ports: [{ port: 6443 }] }])])).toHaveLength(1);
    expect(openToEverywhere([policy([{ to: [] }])])).toHaveLength(1);
    expect(openToEverywhere([policy([{ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8'] } }], ports: [{ port: 443 }] }, { ports: [{ protocol: 'UDP', port: 53 }] }])])).toEqual([]);
  });
});

const CLUSTER_ID = obs.CLUSTER;
const OBS_BASE = ['--set', `prometheus.clusterLabel=${CLUSTER_ID}`];
const OBS_RENDERS: { name: string; args: string[] }[] = [
  { name: 'remote write to the platform', args: [...OBS_BASE, '--set', `prometheus.remoteWrite[0].url=https://api.rlmesh.dev/v1/cells/${CLUSTER_ID}/metrics`] },
  ...obs.scenarios().map((s) => ({ name: `ci/${s}`, args: ['-f', join(obs.CHART, 'ci', s)] })),
];

describe.each(OBS_RENDERS)('rlmesh-observability NetworkPolicies, $name', ({ args }) => {
  it('no egress rule opens 443 or 6443 to every address', () => {
    const objects = obs.render(args);
    expect(objects.has('NetworkPolicy/rlmesh-system/rlmesh-prometheus')).toBe(true);
    expect(openToEverywhere(objects.values())).toEqual([]);
  });
});

describe('rlmesh-observability: what Prometheus and Grafana may reach', () => {
  const url = `https://relay.staging.example:8443/v1/cells/${CLUSTER_ID}/metrics`;

  it('Prometheus: the metrics port of the runtime\'s labelled pods, the API at its addresses, remote write at public addresses and remoteWriteAddresses on the URL\'s port', () => {
    const objects = obs.render([...OBS_BASE, '--set', `prometheus.remoteWrite[0].url=${url}`, '--set', 'prometheus.remoteWriteAddresses={10.20.30.40/32}', '--set', 'prometheus.metricsPort=9191', '--set', 'network.apiServerAddresses={172.18.0.2/32}']);
    const egress = egressOf(objects, 'rlmesh-system', 'rlmesh-prometheus');
    const scrape = egress.find((r) => JSON.stringify(r.to ?? []).includes('rlmesh.dev/metrics'));
    expect(scrape).toEqual({
      to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'rlmesh-system' } }, podSelector: { matchLabels: { 'app.kubernetes.io/part-of': 'rlmesh-runtime', 'rlmesh.dev/metrics': 'true' } } }],
      ports: [{ protocol: 'TCP', port: 9191 }],
    });
    expect(cidrs(on(egress, 6443)[0])).toEqual(['172.18.0.2/32']);
    const remote = on(egress, 8443);
    expect(remote).toHaveLength(1);
    expect(remote[0]!.ports).toEqual([{ protocol: 'TCP', port: 8443 }]);
    expect(cidrs(remote[0])).toEqual(['0.0.0.0/0', '2000::/3', '10.20.30.40/32']);
  });

  it('Prometheus without remote write reaches no address outside the cluster but the API\'s', () => {
    const egress = egressOf(obs.render(OBS_BASE), 'rlmesh-system', 'rlmesh-prometheus');
    expect(egress.flatMap((r) => r.to ?? []).filter((p) => p.ipBlock).map((p) => p.ipBlock!.cidr)).toEqual(['10.96.0.1/32', '192.0.2.10/32']);
  });

  it('Grafana admits only grafana.ingressFrom; none given, nothing', () => {
    const grafana = ['-f', join(obs.CHART, 'ci/grafana-secret-values.yaml')];
    const closed = obs.render(grafana).get('NetworkPolicy/rlmesh-system/rlmesh-grafana') as Policy;
    expect(closed.spec.ingress).toEqual([]);
    const peer = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } };
    const open = obs.render([...grafana, '--set-json', `grafana.ingressFrom=${JSON.stringify([peer])}`]).get('NetworkPolicy/rlmesh-system/rlmesh-grafana') as Policy;
    expect(open.spec.ingress).toEqual([{ from: [peer], ports: [{ protocol: 'TCP', port: 3000 }] }]);
  });

  it('refuses a render that cannot read the cluster without network.apiServerAddresses, naming the value and rlmesh preflight', () => {
    const r = obs.template(OBS_BASE, { allowFail: true, offlineApiServer: false });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('network.apiServerAddresses: is empty and the Kubernetes API\'s addresses could not be read from the cluster');
    expect(r.stderr).toContain('rlmesh preflight');
  });
});
