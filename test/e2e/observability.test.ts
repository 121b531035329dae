// The rlmesh-observability chart installed for real, from the local OCI registry,
// beside the runtime (installed with observability.enabled=true so the join claims
// the relay credential): Prometheus runs as a pod on the real node under its
// NetworkPolicies (the runtime's default deny holds in rlmesh-system), discovers
// and scrapes the runtime's pods, resolves the control plane's name through the
// DNS peers and ports of the runtime's network values, and remote-writes to the
// reference control plane with the relay credential. A rotation of that
// credential reaches Prometheus without a restart: after the old value's overlap
// has ended (the control plane's test clock), samples still arrive.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { helm, kubectl } from '../support/cluster.ts';
import { releaseInfo } from '../support/release.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { NET, realNodes } from '../cluster/real-node.ts';
import { CONTROL_PLANE_HOST, NS, PLUMBING, cleanSlate, controlPlane, notReady, releasedChart, runInstallCommand, waitConnected } from './harness.ts';

type RelayView = { requests: number; samples: number; matching: { labels: Record<string, string>; samples: number }[] };
type Pod = { metadata: { name: string; labels: Record<string, string> }; spec: { nodeName?: string }; status: { phase?: string; containerStatuses?: { restartCount: number; ready: boolean }[] } };
type NetworkPolicy = { spec: { egress: { to?: unknown[]; ports?: { protocol: string; port: number }[] }[] } };

let cp: ControlPlane;
let clusterId = '';
const RELEASE = 'rlmesh-observability';
const DNS_PEERS = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }];

async function relay(match: Record<string, string> = {}): Promise<RelayView> {
  const r = await api(cp, 'GET', `/v1/clusters/${clusterId}/metrics?${new URLSearchParams(match).toString()}`);
  if (r.status !== 200) throw new Error(`GET /v1/clusters/${clusterId}/metrics: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as unknown as RelayView;
}

function prometheusPod(): Pod {
  const pods = (JSON.parse(kubectl(['-n', NS, 'get', 'pods', '-l', 'app.kubernetes.io/name=rlmesh-prometheus', '-o', 'json']).stdout) as { items: Pod[] }).items;
  expect(pods, 'one Prometheus pod').toHaveLength(1);
  return pods[0]!;
}

/** The relay Secret's value, kept in memory only (never logged or asserted on as text). */
const relaySecret = (): string => Buffer.from(kubectl(['-n', NS, 'get', 'secret', 'rlmesh-cluster-relay-secret', '-o', 'jsonpath={.data.relay-secret}']).stdout, 'base64').toString('utf8');

/** The status the metrics relay answers a remote write presenting `credential`. */
async function relayStatus(credential: string): Promise<number> {
  const dispatcher = new Agent({ connect: { ca: readFileSync(cp.caFile, 'utf8') } });
  try {
    const res = await request(`${cp.url}/v1/cells/${clusterId}/metrics`, { method: 'POST', dispatcher, body: '', headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/x-protobuf', 'content-encoding': 'snappy' } });
    await res.body.dump();
    return res.statusCode;
  } finally {
    await dispatcher.close();
  }
}

/** SHA-256 of the relay Secret's value in the cluster (the value itself never leaves this function). */
const relaySecretHash = (): string =>
  createHash('sha256').update(Buffer.from(kubectl(['-n', NS, 'get', 'secret', 'rlmesh-cluster-relay-secret', '-o', 'jsonpath={.data.relay-secret}']).stdout, 'base64')).digest('hex');

beforeAll(async () => {
  cleanSlate();
  helm(['uninstall', RELEASE, '-n', NS, '--wait'], { allowFail: true });
  cp = await controlPlane(releasedChart(), undefined, ['--test-clock']);
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'observability' });
  clusterId = created.body.clusterId;
  // the join also claims the relay credential: the agent writes rlmesh-cluster-relay-secret
  runInstallCommand(cp, `${created.body.installCommand} --set observability.enabled=true`);
  await waitConnected(cp, clusterId);
  await until('the relay Secret', () => (kubectl(['-n', NS, 'get', 'secret', 'rlmesh-cluster-relay-secret'], { allowFail: true }).status === 0 ? true : undefined), { timeoutMs: 60_000 });
}, 600_000);

afterAll(async () => {
  helm(['uninstall', RELEASE, '-n', NS, '--wait'], { allowFail: true });
  await cp?.stop();
  cleanSlate();
}, 300_000);

describe('the observability chart on the real node', () => {
  it('installs from the registry; Prometheus runs on the real node under its NetworkPolicy, DNS only to the runtime\'s peers and ports', () => {
    const chart = releaseInfo().charts[RELEASE]!;
    const r = helm([
      'install', RELEASE, chart.ref, '--version', chart.version, '-n', NS,
      '--set', 'imagePullSecrets[0].name=rlmesh-registry-pull',
      '--set', `prometheus.clusterLabel=${clusterId}`,
      '--set', `prometheus.remoteWrite[0].url=https://${CONTROL_PLANE_HOST}/v1/cells/${clusterId}/metrics`,
      '--set-file', `prometheus.caBundle=${cp.caFile}`,
      // the lab's control plane is at a private address: remote write may reach it only when named
      '--set', `prometheus.remoteWriteAddresses={${NET.hostAddress}/32}`,
      // the runtime's own network values (its defaults here, CoreDNS on 53): the same for both charts
      '--set-json', `network.dnsPeers=${JSON.stringify(DNS_PEERS)}`,
      '--set-json', 'network.dnsPorts=[53]',
      '--set', 'prometheus.scrapeInterval=5s',
      ...PLUMBING,
    ], { allowFail: true });
    if (r.status !== 0) throw new Error(`helm install ${RELEASE} failed: ${r.stderr}\n${notReady()}`);
    const pod = prometheusPod();
    expect(realNodes().map((n) => n.name)).toContain(pod.spec.nodeName);
    expect(pod.status.phase).toBe('Running');
    const np = JSON.parse(kubectl(['-n', NS, 'get', 'networkpolicy', 'rlmesh-prometheus', '-o', 'json']).stdout) as NetworkPolicy;
    const dns = np.spec.egress.find((e) => e.ports?.some((p) => p.protocol === 'UDP'));
    expect(dns?.to).toEqual(DNS_PEERS);
    expect(dns?.ports).toEqual([{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }]);
    // the runtime's default deny also holds for this chart's pods: no rule opens UDP to anywhere
    expect(np.spec.egress.filter((e) => e.ports?.some((p) => p.protocol === 'UDP') && !e.to)).toEqual([]);
  });

  it('scrapes the runtime\'s pods and remote-writes them to the control plane with the relay credential', async () => {
    for (const component of ['rlmesh-cluster-agent', 'rlmesh-cluster-controller', 'rlmesh-egress-proxy']) {
      await until(`${component}'s series at the control plane`, async () => ((await relay({ __name__: 'up', component })).matching.some((s) => s.samples > 0) ? true : undefined), { timeoutMs: 150_000 });
    }
    const connected = await relay({ __name__: 'rlmesh_agent_session_state', state: 'connected' });
    expect(connected.matching[0]?.labels).toMatchObject({ cluster: clusterId, namespace: NS, component: 'rlmesh-cluster-agent' });
  }, 400_000);

  it('follows a rotation of the relay credential without a restart', async () => {
    const before = relaySecretHash();
    const old = relaySecret();
    const rotated = await api(cp, 'POST', `/v1/clusters/${clusterId}/credentials/relay/rotate`);
    expect(rotated.status).toBe(200);
    const newHash = createHash('sha256').update(String(rotated.body.value)).digest('hex');
    // the agent writes the rotated value into the Secret; the kubelet updates the mounted file
    await until('the agent to store the rotated relay credential', () => (relaySecretHash() === newHash ? true : undefined), { timeoutMs: 60_000 });
    expect(newHash).not.toBe(before);
    // end the old value's 24-hour overlap: from here on only the new one is accepted
    const advanced = await api(cp, 'POST', '/v1/test/clock/advance', { ms: 25 * 3600 * 1000 });
    expect(advanced.status).toBe(200);
    // the value Prometheus started with is refused from now on: what arrives next came with the rotated one
    expect(await relayStatus(old)).toBe(401);
    await new Promise((r) => setTimeout(r, 5_000));
    const start = (await relay()).samples;
    await until('samples accepted with the rotated credential', async () => ((await relay()).samples > start + 100 ? true : undefined), { timeoutMs: 180_000 });
    expect(prometheusPod().status.containerStatuses?.[0]?.restartCount).toBe(0);
  }, 400_000);
});
