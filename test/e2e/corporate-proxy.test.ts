// A cluster whose only way out is a corporate proxy, on the real node: Debian's
// Squid on the host's bridge address (10.213.0.1) requiring basic auth, and the
// reference control plane and an S3 server on the host's loopback, which no
// node or pod namespace can reach. Their names exist only in Squid's hosts
// file (CoreDNS does not know them), so every connection to them goes through
// Squid, by name: the agent's discovery, join and gRPC session, and the egress
// proxy's upstream for the artifact cache filler. The chart is installed with
// controlPlane.proxy only (the credentials in a Secret), joins, connects, runs
// an evaluation with an artifact and follows a rotation; Squid's access log
// shows each connection. Then a wrong proxy password: one line that names
// the proxy; fixed in the Secret, the agent connects again.
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HARNESS_HOSTS } from '../cluster/addons.ts';
import { NET } from '../cluster/real-node.ts';
import { startS3Server, type S3Server } from '../controller/s3-server.ts';
import { clusterInfo, kubectl } from '../support/cluster.ts';
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
const SQUID_PORT = 3128;
const PROXY_SECRET = 'corporate-proxy';

let chart: Chart;
let cp: ControlPlane;
let squid: Squid;
let s3: S3Server;
let image = '';
let clusterId = '';
const rt = new Runtime();
const object = randomBytes(192 * 1024);
const sha256 = createHash('sha256').update(object).digest('hex');

const tunnelsTo = (host: string, port: number) => squid.accessLog().filter((l) => l.includes(`CONNECT ${host}:${port}`) && l.includes(squid.username) && l.includes('TCP_TUNNEL/200'));

/** The proxy's Secret as the platform team creates it: username and password, nowhere else. */
function proxySecret(password: string): void {
  const manifest = kubectl(['-n', NS, 'create', 'secret', 'generic', PROXY_SECRET, `--from-literal=username=${squid.username}`, `--from-literal=password=${password}`, '--dry-run=client', '-o', 'yaml']).stdout;
  kubectl(['apply', '-f', '-'], { input: manifest });
}

beforeAll(async () => {
  cleanSlate();
  for (const name of [API_HOST, S3_HOST]) expect(HARNESS_HOSTS[name], `${name} must not resolve in the cluster`).toBeUndefined();
  chart = releasedChart();
  squid = await startSquid({ listen: { host: NET.hostAddress, port: SQUID_PORT }, hosts: { [API_HOST]: '127.0.0.1', [S3_HOST]: '127.0.0.1' } });
  cp = await startControlPlane({
    listen: '127.0.0.1:443',
    args: ['--tls-host', API_HOST, '--advertise-host', API_HOST, '--ping-interval', '2', '--silence-timeout', '20', '--chart-ref', chart.ref, '--chart-version', chart.version,
      '--registry-stores-dir', clusterInfo().registryStores],
  });
  s3 = await startS3Server({ host: '127.0.0.1', port: S3_PORT, tls: { hosts: [S3_HOST] } });
  await s3.put('inputs', 'weights.bin', object);
  image = await evaluationImage();
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  await s3?.close();
  await squid?.stop();
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
      '--set', `egress.extraDomains={${S3_HOST}}`, '--set', `egress.allowedPorts={443,${S3_PORT}}`,
    ];
    runPrinted(`${created.body.installCommand} ${[...values, ...PLUMBING].map((a) => `'${a}'`).join(' ')}`);
    await waitConnected(cp, clusterId, 120);
    await until('Squid logs the agent\'s tunnels to the control plane', () => tunnelsTo(API_HOST, 443).length > 0 || undefined, { timeoutMs: 60_000 });
    // with a proxy, nothing of the chart may open TCP 443 to every address: the agent's only way out is Squid
    const agentPolicy = kubectl(['-n', NS, 'get', 'networkpolicy', 'rlmesh-cluster-agent', '-o', 'json']).stdout;
    expect(agentPolicy).toContain(`${NET.hostAddress}/32`);
    expect(agentPolicy).not.toContain('0.0.0.0/0');
  });

  it('runs an evaluation whose artifact the filler fetches through the egress proxy chained to Squid', async () => {
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
    await until('Squid logs the egress proxy\'s tunnel to the S3 server', () => tunnelsTo(S3_HOST, S3_PORT).length > 0 || undefined, { timeoutMs: 60_000 });
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
