// A cluster whose only way out is a corporate proxy, on the real node: Debian's
// Squid on the host's bridge address (10.213.0.1) requiring basic auth and
// refusing private destinations (RFC 1918, link-local), and the reference
// control plane on the host's loopback, which no node or pod namespace can
// reach. Its name exists only in Squid's hosts file (CoreDNS does not know
// it), so the agent's discovery, join and gRPC session go through Squid by
// name. The egress proxy instead asks Squid for the address it checked: the
// S3 server's name resolves in the cluster to the harness's "public" address
// (198.18.0.1, let through by egress.allowRanges), where the S3 server
// listens, while Squid's hosts file sends the name to loopback, where a trap
// counts what reaches it; the filler's download reaches only the checked
// address. A name only Squid knows is refused by the egress proxy, and never
// reaches Squid. The chart is installed with controlPlane.proxy only (the
// credentials in a Secret), joins, connects, runs an evaluation with an
// artifact and follows a rotation; Squid's access log shows each connection.
// The agent's preflight asks Squid for the kubernetes Service's ClusterIP and
// is refused. Then a wrong proxy password: one line that names the proxy;
// fixed in the Secret, the agent connects again.
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HARNESS_HOSTS, setClusterHosts } from '../cluster/addons.ts';
import { NET } from '../cluster/real-node.ts';
import { startS3Server, type S3Server } from '../controller/s3-server.ts';
import { clusterInfo, kubectl } from '../support/cluster.ts';
import { outboundProxy } from '../../lib/outbound-proxy.ts';
import { api, startControlPlane, type ControlPlane } from '../support/runtime.ts';
import { startSquid, type Squid } from '../support/squid.ts';
import { until } from '../support/until.ts';
import {
  NS, PLUMBING, RUNS, Runtime, cleanSlate, evaluationImage, releasedChart, runPrinted, smallEvaluation, submit, waitConnected, waitFinished, type Chart,
} from './harness.ts';
import { tempDir } from '../support/temp.ts';

const API_HOST = 'api.corporate-proxy.test';
const S3_HOST = 's3.corporate-proxy.test';
const S3_PORT = 9443;
// on the allow-list and in Squid's hosts file, unknown to the cluster's DNS
const ONLY_SQUID_HOST = 'only-squid.corporate-proxy.test';
// what a corporate proxy's rules refuse: private and link-local destinations
const SQUID_REFUSES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'];
const SQUID_PORT = 3128;
const PROXY_SECRET = 'corporate-proxy';

let chart: Chart;
let cp: ControlPlane;
let squid: Squid;
let s3: S3Server;
// on loopback, where Squid's hosts file sends the S3 server's name and ONLY_SQUID_HOST
let trap: Server;
let trapped = 0;
let image = '';
let clusterId = '';
const rt = new Runtime();
const object = randomBytes(192 * 1024);
const sha256 = createHash('sha256').update(object).digest('hex');

const tunnelsTo = (host: string, port: number) => squid.accessLog().filter((l) => l.includes(`CONNECT ${host}:${port}`) && l.includes(squid.username) && l.includes('TCP_TUNNEL/200'));
const egressLines = () => rt.log('egress').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

/** The proxy's Secret as the platform team creates it: username and password, nowhere else. */
function proxySecret(password: string): void {
  const manifest = kubectl(['-n', NS, 'create', 'secret', 'generic', PROXY_SECRET, `--from-literal=username=${squid.username}`, `--from-literal=password=${password}`, '--dry-run=client', '-o', 'yaml']).stdout;
  kubectl(['apply', '-f', '-'], { input: manifest });
}

beforeAll(async () => {
  cleanSlate();
  for (const name of [API_HOST, S3_HOST, ONLY_SQUID_HOST]) expect(HARNESS_HOSTS[name], `${name} must not resolve in the cluster`).toBeUndefined();
  // the cluster's DNS gives the S3 server's name the "public" address; Squid's gives it loopback
  setClusterHosts({ [S3_HOST]: NET.publicAddress });
  chart = releasedChart();
  trap = createServer((socket) => {
    trapped++;
    socket.destroy();
  });
  await new Promise<void>((ok, fail) => trap.once('error', fail).listen(S3_PORT, '127.0.0.1', ok));
  squid = await startSquid({
    listen: { host: NET.hostAddress, port: SQUID_PORT }, hosts: { [API_HOST]: '127.0.0.1', [S3_HOST]: '127.0.0.1', [ONLY_SQUID_HOST]: '127.0.0.1' }, refuse: SQUID_REFUSES,
  });
  cp = await startControlPlane({
    listen: '127.0.0.1:443',
    args: ['--tls-host', API_HOST, '--advertise-host', API_HOST, '--ping-interval', '2', '--silence-timeout', '20', '--chart-ref', chart.ref, '--chart-version', chart.version,
      '--registry-stores-dir', clusterInfo().registryStores],
  });
  s3 = await startS3Server({ host: NET.publicAddress, port: S3_PORT, tls: { hosts: [S3_HOST] } });
  await s3.put('inputs', 'weights.bin', object);
  image = await evaluationImage();
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  await s3?.close();
  await squid?.stop();
  trap?.close();
  setClusterHosts();
  cleanSlate();
});

describe('behind a corporate proxy (Squid, basic auth), on the real node', () => {
  it('installs from the printed command with controlPlane.proxy, joins and connects through Squid', async () => {
    kubectl(['create', 'namespace', NS], { allowFail: true });
    proxySecret(squid.password);
    const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'behind-a-proxy' });
    clusterId = created.body.clusterId;
    const bundle = join(tempDir('ca-'), 'bundle.pem');
    writeFileSync(bundle, `${readFileSync(cp.caFile, 'utf8').trim()}\n${s3.ca!.trim()}\n`);
    const values = [
      '--set', `controlPlane.apiHost=${API_HOST}`, '--set-file', `controlPlane.caBundle=${bundle}`,
      '--set', `controlPlane.proxy.url=http://${NET.hostAddress}:${SQUID_PORT}`, '--set', `controlPlane.proxy.existingSecret=${PROXY_SECRET}`,
      '--set', `egress.extraDomains={${S3_HOST},${ONLY_SQUID_HOST}}`, '--set', `egress.allowedPorts={443,${S3_PORT}}`, '--set', `egress.allowRanges={${NET.publicAddress}/32}`,
    ];
    runPrinted(`${created.body.installCommand} ${[...values, ...PLUMBING].map((a) => `'${a}'`).join(' ')}`);
    await waitConnected(cp, clusterId, 120);
    await until('Squid logs the agent\'s tunnels to the control plane', () => tunnelsTo(API_HOST, 443).length > 0 || undefined, { timeoutMs: 60_000 });
    // with a proxy, nothing of the chart may open TCP 443 to every address: the agent's only way out is Squid
    const agentPolicy = kubectl(['-n', NS, 'get', 'networkpolicy', 'rlmesh-cluster-agent', '-o', 'json']).stdout;
    expect(agentPolicy).toContain(`${NET.hostAddress}/32`);
    expect(agentPolicy).not.toContain('0.0.0.0/0');
    // no NetworkPolicy of the install opens the API's or the control plane's ports (or every port) without naming where to
    for (const ns of [NS, RUNS]) {
      type Rule = { to?: { ipBlock?: { cidr: string; except?: string[] } }[]; ports?: { port?: number | string }[] };
      const policies = JSON.parse(kubectl(['-n', ns, 'get', 'networkpolicies', '-o', 'json']).stdout) as { items: { metadata: { name: string }; spec: { egress?: Rule[] } }[] };
      expect(policies.items.length, ns).toBeGreaterThan(0);
      for (const p of policies.items) {
        for (const rule of p.spec.egress ?? []) {
          if (rule.ports && !rule.ports.some((x) => x.port === undefined || [443, 6443].includes(Number(x.port)))) continue;
          expect(rule.to ?? [], `${ns}/${p.metadata.name}: an egress rule on 443/6443 with no to`).not.toHaveLength(0);
          const everywhere = (rule.to ?? []).filter((peer) => ['0.0.0.0/0', '::/0'].includes(peer.ipBlock?.cidr ?? '') && !(peer.ipBlock?.except?.length));
          expect(everywhere, `${ns}/${p.metadata.name}: an egress rule on 443/6443 to every address`).toEqual([]);
        }
      }
    }
  });

  it('runs an evaluation whose artifact the filler fetches through the egress proxy chained to Squid, which is asked for the checked address only', async () => {
    const id = await submit(cp, clusterId, {
      ...smallEvaluation(image, { TEST_ARTIFACT: '/artifacts/weights.bin', TEST_DURATION: '1s' }),
      artifacts: [{
        name: 'weights.bin', sha256, sizeBytes: String(object.length),
        source: { s3: { endpoint: `https://${S3_HOST}:${S3_PORT}`, region: 'us-east-1', bucket: 'inputs', key: 'weights.bin', accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } },
      }],
    });
    const e = await waitFinished(cp, id, 300);
    expect(e.phase, JSON.stringify(e.updates)).toBe('Succeeded');
    const pod = kubectl(['-n', RUNS, 'get', 'pods', '-l', 'rlmesh.dev/evaluation', '-o', 'name']).stdout.split('\n').find((p) => p.includes(id))!;
    const out = kubectl(['-n', RUNS, 'logs', pod]).stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(out.find((l) => l.step === 'artifact')).toMatchObject({ sha256, size: object.length });
    // Squid was asked for the address the cluster's DNS gave and the egress proxy checked, never the name it would send to loopback
    await until('Squid logs the egress proxy\'s tunnel to the S3 server\'s checked address', () => tunnelsTo(NET.publicAddress, S3_PORT).length > 0 || undefined, { timeoutMs: 60_000 });
    expect(squid.accessLog().filter((l) => l.includes(`${S3_HOST}:`))).toEqual([]);
    expect(trapped).toBe(0);
    const line = egressLines().find((l) => l.host === S3_HOST && l.decision === 'allowed');
    expect(line, rt.log('egress')).toMatchObject({ method: 'CONNECT', address: NET.publicAddress, parent: `http://${NET.hostAddress}:${SQUID_PORT}`, rule: 'allow-range' });
  });

  it('refuses a name the cluster\'s DNS cannot resolve, naming the rule and the value; Squid never sees it', async () => {
    const id = await submit(cp, clusterId, smallEvaluation(image, { TEST_PROBE_URL: `https://${ONLY_SQUID_HOST}:${S3_PORT}/probe`, TEST_DURATION: '1s' }));
    expect((await waitFinished(cp, id, 240)).phase).toBe('Succeeded');
    const pod = kubectl(['-n', RUNS, 'get', 'pods', '-l', 'rlmesh.dev/evaluation', '-o', 'name']).stdout.split('\n').find((p) => p.includes(id))!;
    const out = kubectl(['-n', RUNS, 'logs', pod]).stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(String(out.find((l) => l.step === 'probe' && l.via === 'proxy')?.error), JSON.stringify(out)).toMatch(/Forbidden|403/);
    const refused = await until('the egress proxy\'s refusal', () => egressLines().find((l) => l.host === ONLY_SQUID_HOST && l.decision === 'refused'), { timeoutMs: 30_000 });
    expect(refused).toMatchObject({ rule: 'unresolved-name', status: 403 });
    // a tunnel Squid logs after the refusal: it has logged anything it was asked before
    const marker = await outboundProxy({ url: squid.url, noProxy: [] })!.tunnel(NET.publicAddress, S3_PORT).catch((err: Error) => err);
    if (!(marker instanceof Error)) marker.destroy();
    await until('Squid logs the marker', () => squid.accessLog().some((l) => l.includes(`CONNECT ${NET.publicAddress}:${S3_PORT}`) && l.includes('TCP_DENIED/407')) || undefined, { timeoutMs: 30_000 });
    expect(squid.accessLog().filter((l) => l.includes(ONLY_SQUID_HOST))).toEqual([]);
    expect(trapped).toBe(0);
  });

  it('the agent\'s preflight asks Squid for the kubernetes Service\'s ClusterIP, and Squid refuses it', async () => {
    const clusterIp = kubectl(['-n', 'default', 'get', 'service', 'kubernetes', '-o', 'jsonpath={.spec.clusterIP}']).stdout.trim();
    const check = await until('the agent\'s preflight report', () => {
      const raw = kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-preflight', '-o', 'jsonpath={.data.report\\.json}'], { allowFail: true }).stdout;
      return raw ? (JSON.parse(raw) as { checks: { id: string; verdict: string; found: string }[] }).checks.find((c) => c.id === 'private-via-proxy') : undefined;
    }, { timeoutMs: 120_000, intervalMs: 2000 });
    expect(check).toMatchObject({ verdict: 'pass', found: `asked the corporate proxy http://${NET.hostAddress}:${SQUID_PORT} for CONNECT ${clusterIp}:443 (the kubernetes Service's ClusterIP, a private address inside this cluster): it refused (403)` });
    expect(squid.accessLog().some((l) => l.includes(`CONNECT ${clusterIp}:443`) && l.includes('TCP_DENIED/403'))).toBe(true);
  });

  it('follows a rotation of the control credential through Squid', async () => {
    const reauthentications = () => rt.log('agent').split('\n').filter((l) => /re-?authenticat|credential (changed|rotated)/i.test(l)).length;
    const before = tunnelsTo(API_HOST, 443).length;
    const reauthenticatedBefore = reauthentications();
    const rotated = await api<{ value: string }>(cp, 'POST', `/v1/clusters/${clusterId}/credentials/control/rotate`);
    expect(rotated.status).toBe(200);
    kubectl(['-n', NS, 'patch', 'secret', 'rlmesh-cluster-control', '--type', 'merge', '-p', JSON.stringify({ stringData: { control: rotated.body.value } })]);
    await until('the agent to re-authenticate', () => reauthentications() > reauthenticatedBefore || undefined, { timeoutMs: 90_000 });
    await waitConnected(cp, clusterId, 60);
    // the session opened with the old credential ends, and Squid logs its tunnel when it closes
    await until('Squid logs the re-authenticated session\'s predecessor', () => tunnelsTo(API_HOST, 443).length > before || undefined, { timeoutMs: 60_000 });
  });

  it('a wrong proxy password: the agent says so in one line naming the proxy, and connects once the Secret is fixed', async () => {
    proxySecret('not-the-password');
    // a new agent pod (the old one's session stays open until it goes): it cannot open its session
    kubectl(['-n', NS, 'delete', 'pod', rt.pod('agent').metadata.name, '--wait=true']);
    const line = await until('the agent to log the 407', () => rt.log('agent').split('\n').find((l) => l.includes('answered 407')), { timeoutMs: 120_000 });
    expect(line).toContain(`the corporate proxy http://${NET.hostAddress}:${SQUID_PORT} answered 407 Proxy Authentication Required to CONNECT ${API_HOST}:443`);
    expect(line).toContain(`Secret ${PROXY_SECRET}`);
    expect(rt.log('agent')).not.toContain('not-the-password');
    await until('the control plane to see the cluster away', async () => (await api<{ clusters: { id: string; status: string }[] }>(cp, 'GET', '/v1/clusters')).body.clusters.find((c) => c.id === clusterId && c.status !== 'Connected'), { timeoutMs: 60_000 });
    proxySecret(squid.password);
    // the kubelet refreshes the mounted Secret; the agent reads it at its next attempt (backoff at most 30 s)
    await until('the agent to connect again', async () => (await api<{ clusters: { id: string; status: string }[] }>(cp, 'GET', '/v1/clusters')).body.clusters.find((c) => c.id === clusterId && c.status === 'Connected'), { timeoutMs: 240_000, intervalMs: 2000 });
    await rt.ready('agent', 120);
  }, 600_000);
});
