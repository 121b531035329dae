// The chart's egress proxy on the real node refuses the cluster's own public
// addresses and domain fronting, tried from a pod in rlmesh-runs as an
// evaluation would (its NetworkPolicy lets it reach the proxy Service only).
//
// - A Service's load balancer ingress IP and its externalIPs become the
//   cluster's own: the agent watches Services and writes them to ConfigMap
//   rlmesh-cluster-ranges, and the proxy refuses a name that resolves there
//   (rule cluster-range) until the Service is gone. The address used is the
//   harness's "public" server (198.18.0.1 on the host's bridge, let through
//   by egress.allowRanges as its /24: an allow-range inside a cluster range would
//   re-open it as an in-cluster route), on a Service port (9) nothing uses, so kube-proxy's
//   rules for it touch no traffic of the tests, and nothing leaves the machine.
// - The API server's endpoints (EndpointSlice default/kubernetes) are there too.
// - CONNECT to an allowed host with a TLS ClientHello naming another host is
//   cut with a TLS alert and logged as refused (rule sni-mismatch); the same
//   CONNECT naming the host itself gets its TLS session and its answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NET } from '../cluster/real-node.ts';
import { kubectl } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { NS, RUNS, Runtime, cleanSlate, controlPlane, releasedChart, runInstallCommand, waitConnected } from './harness.ts';
import { startPublicServer, type PublicServer } from './public-server.ts';

const LB_NS = 'rlmesh-e2e-cluster-addresses';
const PROBER = 'cluster-addresses-prober';
const ALLOWED = 'inputs.public.test';
const rt = new Runtime();
let cp: ControlPlane;
let publicServer: PublicServer;

type Outcome = { seq: number; name: string; status?: number; refused?: string; body?: string; tls?: 'ok' | 'error'; answer?: string; error?: string };

// Runs in the runtime image's Node: every 2 s, each target of TARGETS once: CONNECT through
// the proxy Service, then (with sni) a TLS handshake naming sni and a GET; one JSON line each.
const PROBE_SCRIPT = `
const net = require('node:net'), tls = require('node:tls');
const targets = JSON.parse(process.env.TARGETS);
let seq = 0;
const once = (t) => new Promise((done) => {
  const out = { seq: ++seq, name: t.name };
  const finish = (more) => { clearTimeout(timer); done(Object.assign(out, more)); };
  const timer = setTimeout(() => finish({ error: 'timeout' }), 8000);
  const s = net.connect(Number(process.env.PROXY_PORT), process.env.PROXY_HOST);
  s.on('error', (e) => finish({ error: e.code || e.message }));
  s.write('CONNECT ' + t.connect + ' HTTP/1.1\\r\\nHost: ' + t.connect + '\\r\\n\\r\\n');
  let head = Buffer.alloc(0);
  const onData = (d) => {
    head = Buffer.concat([head, d]);
    const text = head.toString('latin1');
    const end = text.indexOf('\\r\\n\\r\\n');
    if (end < 0) return;
    const status = Number(text.split(' ')[1]);
    const refused = (/x-rlmesh-egress-refused: *(\\S+)/i.exec(text.slice(0, end)) || [])[1];
    if (status !== 200) { s.destroy(); return finish({ status, refused, body: text.slice(end + 4, end + 600) }); }
    s.off('data', onData);
    s.pause();
    if (!t.sni) { s.destroy(); return finish({ status }); }
    const secure = tls.connect({ socket: s, servername: t.sni, rejectUnauthorized: false });
    secure.on('error', (e) => finish({ status, tls: 'error', error: e.code || e.message }));
    secure.on('secureConnect', () => {
      secure.write('GET /probe HTTP/1.1\\r\\nHost: ' + t.sni + '\\r\\nConnection: close\\r\\n\\r\\n');
      let answer = '';
      secure.on('data', (d) => (answer += d));
      secure.on('end', () => finish({ status, tls: 'ok', answer: answer.split('\\r\\n')[0] }));
    });
  };
  s.on('data', onData);
});
(async () => { for (;;) { for (const t of targets) console.log(JSON.stringify(await once(t))); await new Promise((r) => setTimeout(r, 2000)); } })();
`;

/** The prober pod in rlmesh-runs, with the runtime image the chart runs, restricted like an evaluation pod. */
function startProber(targets: { name: string; connect: string; sni?: string }[]): void {
  const image = kubectl(['-n', NS, 'get', 'deployment', 'rlmesh-egress-proxy', '-o', 'jsonpath={.spec.template.spec.containers[0].image}']).stdout.trim();
  const proxyHost = kubectl(['-n', NS, 'get', 'service', 'rlmesh-egress-proxy', '-o', 'jsonpath={.spec.clusterIP}']).stdout.trim();
  kubectl(['-n', RUNS, 'delete', 'pod', PROBER, '--ignore-not-found', '--grace-period=0', '--force'], { allowFail: true });
  const pod = {
    apiVersion: 'v1', kind: 'Pod', metadata: { name: PROBER, namespace: RUNS },
    spec: {
      automountServiceAccountToken: false, restartPolicy: 'Never', imagePullSecrets: [{ name: 'rlmesh-registry-pull' }],
      securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{
        name: 'prober', image, command: ['/usr/local/bin/node', '-e', PROBE_SCRIPT],
        env: [{ name: 'TARGETS', value: JSON.stringify(targets) }, { name: 'PROXY_HOST', value: proxyHost }, { name: 'PROXY_PORT', value: '3128' }],
        resources: { requests: { cpu: '10m', memory: '32Mi', 'ephemeral-storage': '10Mi' }, limits: { cpu: '200m', memory: '96Mi', 'ephemeral-storage': '10Mi' } },
        securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
      }],
    },
  };
  kubectl(['apply', '-f', '-'], { input: JSON.stringify(pod) });
}

function outcomes(): Outcome[] {
  return kubectl(['-n', RUNS, 'logs', PROBER], { allowFail: true }).stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Outcome);
}

/** Waits until the last three attempts at `name` all pass `ok` (two proxy replicas may see a ConfigMap change apart). */
async function settled(what: string, name: string, ok: (o: Outcome) => boolean): Promise<Outcome> {
  console.log(`${new Date().toISOString()} waiting for ${what}`);
  return until(what, () => {
    const mine = outcomes().filter((o) => o.name === name).slice(-3);
    return mine.length === 3 && mine.every(ok) ? mine[2] : undefined;
  }, {
    timeoutMs: 240_000, intervalMs: 2000,
    context: () => `the prober's last attempts: ${JSON.stringify(outcomes().filter((o) => o.name === name).slice(-3))}\nConfigMap rlmesh-cluster-ranges: ${ranges().join(' ')}`,
  });
}

const ranges = (): string[] => kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-cluster-ranges', '-o', 'jsonpath={.data.ranges}'], { allowFail: true }).stdout.split('\n');
const allowed = (o: Outcome) => o.status === 200;
const clusterRange = (o: Outcome) => o.status === 403 && o.refused === 'cluster-range';

beforeAll(async () => {
  cleanSlate();
  kubectl(['delete', 'namespace', LB_NS, '--ignore-not-found', '--timeout=120s'], { allowFail: true });
  const chart = releasedChart();
  cp = await controlPlane(chart);
  publicServer = await startPublicServer();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'cluster-addresses' });
  runInstallCommand(cp, `${created.body.installCommand} --set 'egress.extraDomains={${ALLOWED}}' --set 'egress.allowRanges={${NET.publicSubnet}}'`);
  await waitConnected(cp, created.body.clusterId);
  await rt.ready('egress');
  kubectl(['create', 'namespace', LB_NS]);
  startProber([
    { name: 'plain', connect: `${ALLOWED}:443` },
    { name: 'fronted', connect: `${ALLOWED}:443`, sni: 'not-allowed.example' },
    { name: 'own-name', connect: `${ALLOWED}:443`, sni: ALLOWED },
  ]);
}, 600_000);

afterAll(async () => {
  kubectl(['-n', RUNS, 'delete', 'pod', PROBER, '--ignore-not-found', '--grace-period=0', '--force'], { allowFail: true });
  kubectl(['delete', 'namespace', LB_NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
  await publicServer?.close();
  await cp?.stop();
  cleanSlate();
});

describe("the egress proxy refuses the cluster's own public addresses", () => {
  it("a Service's load balancer ingress IP and its externalIPs: refused as the cluster's own while the Service has them, reachable again once it is gone; the API server's endpoints are among them", async () => {
    await settled(`CONNECT ${ALLOWED}:443 to pass before any Service has its address`, 'plain', allowed);
    // the API server's own addresses, from its EndpointSlice
    const apiServer = JSON.parse(kubectl(['-n', 'default', 'get', 'endpointslice', 'kubernetes', '-o', 'json']).stdout) as { endpoints: { addresses: string[] }[] };
    const apiAddresses = apiServer.endpoints.flatMap((e) => e.addresses).map((a) => `${a}/${a.includes(':') ? 128 : 32}`);
    expect(apiAddresses.length).toBeGreaterThan(0);
    expect(ranges()).toEqual(expect.arrayContaining(apiAddresses));

    const service = (name: string, spec: Record<string, unknown>) => ({
      apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: LB_NS }, spec: { ports: [{ port: 9, protocol: 'TCP' }], ...spec },
    });
    // a LoadBalancer whose cloud gave it the public server's address (no cloud controller here: the test writes the status)
    kubectl(['apply', '-f', '-'], { input: JSON.stringify(service('lb', { type: 'LoadBalancer', allocateLoadBalancerNodePorts: false })) });
    kubectl(['-n', LB_NS, 'patch', 'service', 'lb', '--subresource', 'status', '--type', 'merge', '-p', JSON.stringify({ status: { loadBalancer: { ingress: [{ ip: NET.publicAddress }] } } })]);
    const refused = await settled('the load balancer address to be refused', 'plain', clusterRange);
    expect(refused.body).toContain(`${NET.publicAddress} is in ${NET.publicAddress}/32, one of the cluster's own ranges`);
    expect(ranges()).toContain(`${NET.publicAddress}/32`);

    kubectl(['-n', LB_NS, 'delete', 'service', 'lb']);
    await until("the agent to drop the load balancer's address", () => (ranges().includes(`${NET.publicAddress}/32`) ? undefined : true), { timeoutMs: 30_000 });
    await settled('the address to pass again once the load balancer is gone', 'plain', allowed);

    // the same address as a Service's externalIPs
    kubectl(['apply', '-f', '-'], { input: JSON.stringify(service('external', { externalIPs: [NET.publicAddress] })) });
    await settled('the external IP to be refused', 'plain', clusterRange);
    expect(ranges()).toContain(`${NET.publicAddress}/32`);
    kubectl(['-n', LB_NS, 'delete', 'service', 'external']);
    await until("the agent to drop the external IP", () => (ranges().includes(`${NET.publicAddress}/32`) ? undefined : true), { timeoutMs: 30_000 });
    await settled('the address to pass again once no Service has it', 'plain', allowed);
  }, 1_200_000);
});

describe('the egress proxy refuses domain fronting', () => {
  it('CONNECT to an allowed host with a ClientHello naming another host is cut with a TLS alert and logged refused (sni-mismatch); naming the host itself, TLS goes through', async () => {
    const own = await settled('a tunnel whose ClientHello names the CONNECT host to get its answer', 'own-name', (o) => o.tls === 'ok');
    expect(own.answer).toBe('HTTP/1.1 200 OK');
    const fronted = await settled('a tunnel whose ClientHello names another host to be cut', 'fronted', (o) => o.status === 200 && o.tls === 'error');
    expect(fronted.error).toMatch(/UNRECOGNIZED_NAME/);
    const lines = rt.log('egress').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    const refusal = lines.find((l) => l.rule === 'sni-mismatch');
    expect(refusal).toMatchObject({
      decision: 'refused', host: ALLOWED, port: 443, method: 'CONNECT',
      reason: `the tunnel was opened to '${ALLOWED}', but its ClientHello names 'not-allowed.example' (domain fronting); CONNECT to the host the client means to reach`,
    });
    // nothing of the fronted tunnels reached the server: every request it saw named the allowed host
    expect(publicServer.requests.length).toBeGreaterThan(0);
    expect(publicServer.requests.every((r) => r.host === ALLOWED)).toBe(true);
  });
});
