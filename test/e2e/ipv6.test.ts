// IPv6-only pods: the real egress proxy and the real agent (`node egress/main.ts`,
// `node agent/main.ts`, no RLMESH_LISTEN_HOST, as the chart starts them) run in
// a network namespace that has IPv6 addresses only (IPv4 on loopback alone), the
// way a pod on an IPv6-only cluster does. From another namespace a client asks
// their probes and metrics over IPv6, as the kubelet and Prometheus do, and goes
// through the proxy as an evaluation pod goes through the proxy Service's IPv6
// ClusterIP: CONNECT and forward to an allowed server in a third namespace, and
// a refusal for a private (unique-local) destination that is up and reachable.
//
//   rlm-v6-client  fd00:726c:6d:1::2 ── fd00:726c:6d:1::1   rlm-v6-pod   2001:2:0:76::1 ── 2001:2:0:76::2  rlm-v6-up
//   (client; a "private"                (proxy, agent)                                  (the allowed server,
//    server on :7001)                                                                   benchmarking range)
//
// Containment: the three namespaces are joined only to each other; none has a
// link to the host or any default route, so nothing leaves them. The allowed
// server sits in the benchmarking range, which --allow-range re-opens for this
// proxy as test/egress/egress-proxy.test.ts does.
//
// The cluster itself is not used (the integration project's global setup starts it regardless).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUSED_HEADER } from '../../lib/egress-headers.ts';
import { until } from '../support/until.ts';
import { tempDir } from '../support/temp.ts';

const ROOT = join(import.meta.dirname, '../..');
const NS = { client: 'rlm-v6-client', pod: 'rlm-v6-pod', up: 'rlm-v6-up' } as const;
const ADDR = {
  client: 'fd00:726c:6d:1::2',
  podToClient: 'fd00:726c:6d:1::1',
  podToUp: '2001:2:0:76::1',
  up: '2001:2:0:76::2',
} as const;
const PORT = { proxy: 3128, health: 8081, metrics: 9090, agentHealth: 18081, agentMetrics: 19090, server: 7001 } as const;
const PROXY = `http://[${ADDR.podToClient}]:${PORT.proxy}`;

const children: ChildProcess[] = [];
const logs: { egress: Record<string, unknown>[]; agent: Record<string, unknown>[] } = { egress: [], agent: [] };
let dir: string;

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function removeNamespaces(): void {
  for (const name of Object.values(NS)) {
    try {
      ip('netns', 'del', name); // its veth ends go with it, and so do their peers
    } catch {
      // not there
    }
  }
}

/** A veth pair from namespace a to namespace b, each end with one IPv6 address on a /64 (nodad: usable at once). */
function link(a: string, aIf: string, aAddr: string, b: string, bIf: string, bAddr: string): void {
  ip('link', 'add', aIf, 'netns', a, 'type', 'veth', 'peer', 'name', bIf, 'netns', b);
  ip('-n', a, '-6', 'addr', 'add', `${aAddr}/64`, 'dev', aIf, 'nodad');
  ip('-n', b, '-6', 'addr', 'add', `${bAddr}/64`, 'dev', bIf, 'nodad');
  ip('-n', a, 'link', 'set', aIf, 'up');
  ip('-n', b, 'link', 'set', bIf, 'up');
}

/** Runs `node args…` in a namespace; resolves once a stdout line passes `ready` (JSON lines go to `log`). */
async function startIn(ns: string, args: string[], env: NodeJS.ProcessEnv, ready: (line: string) => boolean, log?: Record<string, unknown>[]): Promise<ChildProcess> {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  let up = false;
  createInterface({ input: child.stdout! }).on('line', (l) => {
    try {
      log?.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      log?.push({ raw: l });
    }
    if (ready(l)) up = true;
  });
  await until(`${args[0]} in ${ns} to be ready`, () => {
    if (child.exitCode !== null) throw new Error(`${args[0]} in ${ns} exited with ${child.exitCode}: ${stderr}`);
    return up;
  }, { timeoutMs: 20_000, intervalMs: 50, context: () => `${stderr}\n${JSON.stringify(log ?? [])}` });
  return child;
}

/** A plain HTTP server on `address`:7001 in `ns` that says who it is and who asked. */
function server(ns: string, address: string, name: string): Promise<ChildProcess> {
  const script = `require('node:http').createServer((q, s) => s.end('${name} ' + q.socket.remoteAddress + ' ' + q.url + '\\n'))` +
    `.listen(${PORT.server}, '${address}', () => console.log('listening'))`;
  return startIn(ns, ['-e', script], { PATH: process.env.PATH }, (l) => l === 'listening');
}

type Curl = { code: number; status: string; body: string; stderr: string };

/** curl in the client namespace (-g: brackets are an IPv6 literal, not a glob); never throws. */
function curl(args: string[]): Curl {
  try {
    const out = execFileSync('ip', ['netns', 'exec', NS.client, 'curl', '-sS', '-g', '--max-time', '8', '-w', '\n%{http_code} %{http_connect}', ...args], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
    });
    return parse(0, out, '');
  } catch (err) {
    const e = err as { status: number; stdout: string; stderr: string };
    return parse(e.status, e.stdout, e.stderr);
  }
}

function parse(code: number, out: string, stderr: string): Curl {
  const i = out.lastIndexOf('\n');
  // the body without its last newline (the servers here end every answer with one)
  return { code, body: out.slice(0, i).replace(/\n$/, ''), status: out.slice(i + 1), stderr };
}

beforeAll(async () => {
  removeNamespaces(); // a run that died before its cleanup
  for (const name of Object.values(NS)) {
    ip('netns', 'add', name);
    ip('-n', name, 'link', 'set', 'lo', 'up');
  }
  link(NS.client, 'v6c-pod', ADDR.client, NS.pod, 'v6p-client', ADDR.podToClient);
  link(NS.pod, 'v6p-up', ADDR.podToUp, NS.up, 'v6u-pod', ADDR.up);

  dir = tempDir('rlmesh-ipv6-');
  // the agent's kube API: the pod namespace's own loopback, where nothing listens (it only needs to start its ops server)
  writeFileSync(join(dir, 'kubeconfig'), [
    'apiVersion: v1', 'kind: Config', 'current-context: none',
    'clusters: [{name: none, cluster: {server: "https://[::1]:1", insecure-skip-tls-verify: true}}]',
    'users: [{name: none, user: {token: none}}]',
    'contexts: [{name: none, context: {cluster: none, user: none}}]', '',
  ].join('\n'));
  writeFileSync(join(dir, 'agent-config.json'), JSON.stringify({
    namespace: 'rlmesh-system', controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {},
    ports: { health: PORT.agentHealth, metrics: PORT.agentMetrics },
  }));
  // what the chart's pods get: no RLMESH_LISTEN_HOST
  const env = { PATH: process.env.PATH, HOME: dir };

  await server(NS.up, ADDR.up, 'allowed');
  await server(NS.client, ADDR.client, 'private');
  await startIn(NS.pod, [
    join(ROOT, 'egress/main.ts'),
    '--port', String(PORT.proxy), '--health-port', String(PORT.health), '--metrics-port', String(PORT.metrics),
    '--allow', ADDR.up, '--allow', ADDR.client, '--ports', String(PORT.server),
    '--allow-range', '2001:2:0:76::/64',
  ], env, (l) => l.includes('egress proxy ready'), logs.egress);
  await startIn(NS.pod, [join(ROOT, 'agent/main.ts'), `--spool-dir=${join(dir, 'spool')}`], {
    ...env, RLMESH_CONFIG: join(dir, 'agent-config.json'), KUBECONFIG: join(dir, 'kubeconfig'), POD_NAME: 'rlmesh-cluster-agent-0', POD_NAMESPACE: 'rlmesh-system',
  }, (l) => l.includes('agent starting'), logs.agent);
}, 60_000);

afterAll(async () => {
  await Promise.all(children.filter((c) => c.exitCode === null && c.signalCode === null).map((c) => {
    c.kill('SIGKILL');
    return once(c, 'exit');
  }));
  removeNamespaces();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('on an IPv6-only pod network', () => {
  it('the pod namespace has IPv6 only: IPv4 on loopback alone, and no route off the three namespaces', () => {
    expect(ip('-n', NS.pod, '-4', '-o', 'addr', 'show').trim().split('\n').map((l) => l.split(/\s+/)[3])).toEqual(['127.0.0.1/8']);
    expect(ip('-n', NS.pod, '-4', 'route', 'show').trim()).toBe('');
    for (const ns of Object.values(NS)) expect(ip('-n', ns, '-6', 'route', 'show', 'default').trim()).toBe('');
  });

  it("the egress proxy's and the agent's probes and metrics answer over IPv6 from another namespace", () => {
    const at = (port: number, path: string) => curl([`http://[${ADDR.podToClient}]:${port}${path}`]);
    expect(at(PORT.health, '/healthz')).toMatchObject({ code: 0, status: '200 000', body: 'ok' });
    expect(at(PORT.health, '/readyz')).toMatchObject({ code: 0, status: '200 000', body: 'ready' });
    expect(at(PORT.metrics, '/metrics').body).toMatch(/^# HELP /m);
    expect(at(PORT.agentHealth, '/healthz')).toMatchObject({ code: 0, status: '200 000', body: 'ok' });
    // it cannot reach its kube API here, so it is not ready, and says why
    expect(at(PORT.agentHealth, '/readyz')).toMatchObject({ code: 0, status: '503 000' });
    expect(at(PORT.agentHealth, '/readyz').body).toMatch(/^not ready: /);
    expect(at(PORT.agentMetrics, '/metrics').body).toMatch(/^# HELP /m);
  });

  it('the same sockets take IPv4 too (the default bind is dual-stack): the pod\'s own 127.0.0.1', () => {
    const out = execFileSync('ip', ['netns', 'exec', NS.pod, 'curl', '-sS', '--max-time', '5', `http://127.0.0.1:${PORT.health}/healthz`, `http://127.0.0.1:${PORT.agentHealth}/healthz`], { encoding: 'utf8' });
    expect(out).toBe('ok\nok\n');
  });

  it('a client goes through the proxy at its IPv6 address to an allowed IPv6 server, by CONNECT and by forward', async () => {
    const tunnel = curl(['-p', '-x', PROXY, `http://[${ADDR.up}]:${PORT.server}/through-connect`]);
    expect(tunnel).toMatchObject({ code: 0, status: '200 200' });
    // the server sees the proxy's address on its own link, the client sees the server's answer
    expect(tunnel.body).toBe(`allowed ${ADDR.podToUp} /through-connect`);
    const forward = curl(['-x', PROXY, `http://[${ADDR.up}]:${PORT.server}/forwarded`]);
    expect(forward).toMatchObject({ code: 0, status: '200 000', body: `allowed ${ADDR.podToUp} /forwarded` });
    // logged as the tunnel closes, and with the client's IPv6 address as it is
    await until('the proxy to log the allowed tunnel', () => logs.egress.some((l) => l.decision === 'allowed' && l.client === ADDR.client && l.host === ADDR.up), {
      timeoutMs: 5000, context: () => JSON.stringify(logs.egress.filter((l) => 'decision' in l)),
    });
  });

  it('refuses a private (unique-local) IPv6 destination even though it is up and on the allow-list', () => {
    // reachable from the proxy's namespace: the refusal is the proxy's, not the network's
    expect(execFileSync('ip', ['netns', 'exec', NS.pod, 'curl', '-sS', '-g', '--max-time', '5', `http://[${ADDR.client}]:${PORT.server}/direct`], { encoding: 'utf8' }))
      .toBe(`private ${ADDR.podToClient} /direct\n`);
    const tunnel = curl(['-v', '-p', '-x', PROXY, `http://[${ADDR.client}]:${PORT.server}/`]);
    expect(tunnel.status).toBe('000 403');
    expect(tunnel.stderr).toMatch(new RegExp(`< ${REFUSED_HEADER}: unique-local`, 'i'));
    const forward = curl(['-x', PROXY, `http://[${ADDR.client}]:${PORT.server}/`]);
    expect(forward.status).toBe('403 000');
    expect(forward.body).toContain(`egress to '${ADDR.client}' refused: ${ADDR.client} is unique-local (private)`);
  });
});
