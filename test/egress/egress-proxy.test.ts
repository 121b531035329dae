// End to end through the real proxy process (`node egress/main.ts` with flags,
// the documented command) with real clients (curl -x, undici ProxyAgent, raw
// sockets) against upstream servers in a network namespace this file creates,
// addressed from the benchmarking ranges, which --allow-range re-opens for
// this proxy only. A DNS server on 127.0.0.1 serves private, mixed and
// rebinding answers.
//
// Why a process and not the chart's pod: the DNS answers (private, mixed,
// rebinding) must come from a resolver the test controls, and the clients sit
// beside it; the chart's proxy pods run on the real node in test/e2e, where
// network-policies.test.ts and spec.test.ts go through them.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { Agent, ProxyAgent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type TestDnsServer } from './dns-server.ts';
import { createNetns, type Netns } from './netns.ts';
import { until } from '../support/until.ts';
import { tempDir } from '../support/temp.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const PROXY_PORT = 23128;
const HEALTH_PORT = 23129;
const METRICS_PORT = 23130;
const PROXY = `http://127.0.0.1:${PROXY_PORT}`;

let ns: Netns;
let dns: TestDnsServer;
let proxy: ChildProcess;
let exited: Promise<number | null>;
const logLines: Record<string, unknown>[] = [];
let ca: string;
let certDir: string;
const rangesFile = () => join(certDir, 'cluster-ranges');

async function startProxy(extra: string[] = []): Promise<void> {
  proxy = spawn(process.execPath, [
    join(ROOT, 'egress/main.ts'),
    '--port', String(PROXY_PORT),
    '--health-port', String(HEALTH_PORT),
    '--metrics-port', String(METRICS_PORT),
    '--allow', 'ok.egress.test', '--allow', 'OK6.Egress.Test.', '--allow', '*.wild.egress.test',
    '--allow', 'priv.egress.test', '--allow', 'mixed.egress.test', '--allow', 'rebind.egress.test',
    '--allow', 'mapped.egress.test', '--allow', 'nat64.egress.test', '--allow', 'nx.egress.test',
    '--allow', 'servfail.egress.test', '--allow', 'dark.egress.test', '--allow', 'self.egress.test',
    '--allow', 'bücher.egress.test', '--allow', 'localhost', '--allow', 'incluster.egress.test', '--allow', 'followed.egress.test',
    '--ports', '443,80,7001,7002,7003,9',
    '--allow-range', '198.18.0.0/15', '--allow-range', '2001:2::/48',
    // inside the allow-ranges, the cluster's own ranges stay refused: half of the
    // namespace's dark /24 (routed into it and dropped there) and part of its
    // on-link /64 where nothing answers, so nothing would leave this machine
    '--cluster-range', '198.18.110.128/25', '--cluster-range', '2001:2:0:a:c::/80',
    // more of them as the agent writes them (ConfigMap rlmesh-cluster-ranges)
    '--cluster-ranges-file', rangesFile(),
    '--dns', dns.address,
    '--connect-timeout-ms', '1500',
    '--idle-timeout-ms', '3000',
    '--header-timeout-ms', '1500',
    '--max-header-bytes', '4096',
    '--max-tunnels', '5',
    '--max-tunnels-per-client', '3',
    '--max-connections', '9',
    '--max-connections-per-client', '5',
    '--drain-timeout-ms', '8000',
    ...extra,
  ], { env: { ...process.env, RLMESH_LISTEN_HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'inherit'] });
  exited = once(proxy, 'exit').then(([code]) => code as number | null);
  const lines = createInterface({ input: proxy.stdout! });
  lines.on('line', (l) => {
    try {
      logLines.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      logLines.push({ raw: l });
    }
  });
  await until(
    'the egress proxy to start',
    () => {
      if (proxy.exitCode !== null) throw new Error(`the egress proxy exited with ${proxy.exitCode}`);
      return logLines.some((l) => l.msg === 'egress proxy ready');
    },
    { timeoutMs: 15_000, intervalMs: 50, context: () => JSON.stringify(logLines) },
  );
}

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  socket: net.Socket;
}

/** Sends a raw CONNECT and reads the proxy's answer; on 200 the socket is the open tunnel, paused until the caller resumes it. */
async function rawConnect(target: string, opts: { localAddress?: string; extraHeaders?: string; keep?: boolean } = {}): Promise<RawAnswer> {
  const socket = net.connect({ host: '127.0.0.1', port: PROXY_PORT, localAddress: opts.localAddress });
  await once(socket, 'connect');
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${opts.extraHeaders ?? ''}\r\n`);
  let data = Buffer.alloc(0);
  return new Promise((resolve, reject) => {
    const parse = () => {
      const text = data.toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return false;
      const [statusLine, ...headerLines] = text.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(headerLines.map((h) => [h.slice(0, h.indexOf(':')).toLowerCase(), h.slice(h.indexOf(':') + 1).trim()]));
      const status = Number(statusLine!.split(' ')[1]);
      const length = Number(headers['content-length'] ?? 0);
      const body = data.subarray(Buffer.byteLength(text.slice(0, end + 4)));
      if (status !== 200 && body.length < length) return false;
      socket.off('data', onData);
      // bytes after a 200 belong to the tunnel: keep them (and anything later)
      // for the caller, who attaches its reader and then calls resume()
      socket.pause();
      if (status === 200 && body.length > 0) socket.unshift(body);
      if (!opts.keep) socket.destroy();
      resolve({ status, headers, body: status === 200 ? '' : body.toString('utf8'), socket });
      return true;
    };
    const onData = (d: Buffer) => {
      data = Buffer.concat([data, d]);
      parse();
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('close', () => {
      if (!parse()) reject(new Error(`proxy closed without an answer: ${data.toString()}`));
    });
  });
}

async function curl(url: string, extra: string[] = []): Promise<{ code: string; body: string }> {
  const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--cacert', ca, '-x', PROXY, '-w', '\n%{http_code}', ...extra, url])
    .catch((err: { stdout: string; stderr: string }) => ({ stdout: `${err.stdout}`, stderr: err.stderr }));
  const lines = stdout.split('\n');
  return { code: lines.pop()!, body: lines.join('\n').trimEnd() };
}

/** The proxy logs a tunnel when it closes, a moment after the client has gone. */
function waitForLog(match: (l: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  return until('a matching proxy log line', () => logLines.findLast(match), { timeoutMs: 5_000, intervalMs: 50, context: () => `last proxy log lines: ${JSON.stringify(logLines.slice(-5))}` });
}

async function metrics(): Promise<string> {
  return (await fetch(`http://127.0.0.1:${METRICS_PORT}/metrics`)).text();
}

beforeAll(async () => {
  certDir = tempDir('egress-test-');
  await run('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', '/CN=ok.egress.test',
    '-addext', 'subjectAltName=DNS:ok.egress.test,DNS:ok6.egress.test,DNS:*.wild.egress.test,DNS:a.b.wild.egress.test,DNS:mixed.egress.test,DNS:rebind.egress.test,DNS:xn--bcher-kva.egress.test',
    '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem'),
  ]);
  ca = join(certDir, 'cert.pem');
  ns = createNetns('egt', 10);
  await ns.spawnNode(join(ROOT, 'test/egress/upstream-server.ts'), [ns.nsAddress, ns.nsAddress6, ca, join(certDir, 'key.pem')]);
  dns = await startDnsServer({
    'ok.egress.test': { A: [ns.nsAddress] },
    'ok6.egress.test': { AAAA: [ns.nsAddress6] },
    'a.wild.egress.test': { A: [ns.nsAddress] },
    'a.b.wild.egress.test': { A: [ns.nsAddress] },
    'wild.egress.test': { A: [ns.nsAddress] },
    'priv.egress.test': { A: ['10.0.0.7'], AAAA: ['fd00::7'] },
    'mixed.egress.test': { A: ['10.0.0.7', ns.nsAddress], AAAA: ['::ffff:10.0.0.7'] },
    'rebind.egress.test': (asked) => ({ A: [asked === 0 ? ns.nsAddress : '127.0.0.1'] }),
    'mapped.egress.test': { AAAA: ['::ffff:169.254.169.254'] },
    'nat64.egress.test': { AAAA: ['64:ff9b::a9fe:a9fe'] },
    'servfail.egress.test': { servfail: true },
    'dark.egress.test': { A: [ns.darkAddress] },
    'self.egress.test': { A: [ns.hostAddress] },
    'xn--bcher-kva.egress.test': { A: [ns.nsAddress] },
    'localhost': { A: ['127.0.0.1'], AAAA: ['::1'] },
    'notlisted.egress.test': { A: [ns.nsAddress] },
    'incluster.egress.test': { A: ['198.18.110.200'], AAAA: ['2001:2:0:a:c::7'] },
    'followed.egress.test': { A: [ns.nsAddress] },
  });
  // as the agent writes it (ConfigMap rlmesh-cluster-ranges): a range of the cluster's that no test address is in
  writeFileSync(rangesFile(), '10.244.0.0/16\n');
  await startProxy();
});

afterAll(async () => {
  if (proxy && proxy.exitCode === null) proxy.kill('SIGKILL');
  await dns?.close();
  ns?.destroy();
});

describe('allowed destinations', () => {
  it('tunnels HTTPS with curl -x to the checked address, TLS untouched', async () => {
    const r = await curl('https://ok.egress.test/hello');
    expect(r).toEqual({ code: '200', body: `upstream ${ns.nsAddress} ok.egress.test /hello` });
  });

  it('tunnels HTTPS with undici ProxyAgent, over IPv6 when the name has only AAAA', async () => {
    const dispatcher = new ProxyAgent({ uri: PROXY, requestTls: { ca: readFileSync(ca) } });
    const res = await fetch('https://ok6.egress.test/v6', { dispatcher });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(`upstream ${ns.nsAddress6} ok6.egress.test /v6\n`);
    await dispatcher.close();
  });

  it('forwards absolute-form plain HTTP and sets Host from the URL', async () => {
    const r = await curl('http://ok.egress.test/plain?x=1', ['-H', 'Host: elsewhere.example']);
    expect(r).toEqual({ code: '200', body: `upstream ${ns.nsAddress} ok.egress.test /plain?x=1` });
  });

  it('matches names case-insensitively, without the trailing dot, wildcards one or more labels deep but not the suffix', async () => {
    expect((await rawConnect('OK.EGRESS.TEST.:443')).status).toBe(200);
    expect((await curl('https://a.wild.egress.test/')).code).toBe('200');
    expect((await curl('https://a.b.wild.egress.test/')).code).toBe('200');
    const bare = await rawConnect('wild.egress.test:443');
    expect(bare.status).toBe(403);
    expect(bare.headers['x-rlmesh-egress-refused']).toBe('not-allowed');
  });

  it('compares internationalised names in punycode', async () => {
    expect((await rawConnect('xn--bcher-kva.egress.test:443')).status).toBe(200);
    expect(await curl('https://BÜCHER.egress.test/idn')).toEqual({ code: '200', body: `upstream ${ns.nsAddress} xn--bcher-kva.egress.test /idn` });
    // raw UTF-8 in the request line is not HTTP; Node's parser rejects it before any decision
    expect((await rawConnect('bücher.egress.test:443')).status).toBe(400);
  });

  it('refuses domain fronting: a ClientHello naming another host than the CONNECT (curl --connect-to) is cut with a TLS alert, logged and counted with its rule; the destination gets no byte of it', async () => {
    // curl sends CONNECT ok.egress.test:443, then a ClientHello naming notlisted.egress.test, a name the allow-list does not have
    const fronted = await curl('https://notlisted.egress.test/fronted', ['--connect-to', 'notlisted.egress.test:443:ok.egress.test:443']);
    expect(fronted.code).toBe('000');
    const line = await waitForLog((l) => l.rule === 'sni-mismatch');
    expect(line).toMatchObject({
      host: 'ok.egress.test', port: 443, method: 'CONNECT', decision: 'refused', status: 200, bytesUp: 0,
      reason: "the tunnel was opened to 'ok.egress.test', but its ClientHello names 'notlisted.egress.test' (domain fronting); CONNECT to the host the client means to reach",
    });
    expect(await metrics()).toMatch(/rlmesh_egress_decisions_total\{outcome="refused",rule="sni-mismatch"\} [1-9]/);
    // the tunnel's own name passes, through the same curl path
    expect(await curl('https://ok.egress.test/own', ['--connect-to', 'ok.egress.test:443:ok.egress.test:443'])).toEqual({ code: '200', body: `upstream ${ns.nsAddress} ok.egress.test /own` });
  });

  it('relays bytes both ways unchanged', async () => {
    const { status, socket } = await rawConnect('ok.egress.test:7001', { keep: true });
    expect(status).toBe(200);
    const payload = Buffer.alloc(2 * 1024 * 1024);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) & 0xff;
    const received: Buffer[] = [];
    let n = 0;
    const done = new Promise<void>((resolve) => socket.on('data', (d: Buffer) => {
      received.push(d);
      n += d.length;
      if (n >= payload.length) resolve();
    }));
    socket.resume();
    socket.write(payload);
    await done;
    expect(Buffer.concat(received).equals(payload)).toBe(true);
    socket.destroy();
  });
});

describe('tunnel lifecycle', () => {
  async function readAll(socket: net.Socket): Promise<string> {
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.resume();
    await once(socket, 'end');
    return Buffer.concat(chunks).toString();
  }

  it('ends the tunnel after the last byte when the destination closes', async () => {
    const { status, socket } = await rawConnect('ok.egress.test:80', { keep: true });
    expect(status).toBe(200);
    socket.write('GET /bye HTTP/1.0\r\nHost: ok.egress.test\r\n\r\n');
    const response = await readAll(socket);
    expect(response).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(response).toContain(`upstream ${ns.nsAddress} ok.egress.test /bye`);
    socket.destroy();
  });

  it('delivers what a destination says first after the 200, in order', async () => {
    const { status, socket } = await rawConnect('ok.egress.test:7002', { keep: true });
    expect(status).toBe(200);
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString();
    });
    socket.resume();
    socket.write('ping\n');
    await until('the echo of ping', () => text.includes('ping'), { timeoutMs: 5_000, intervalMs: 20, context: () => `received: ${JSON.stringify(text)}` });
    expect(text).toBe(`banner from ${ns.nsAddress}\nping\n`);
    socket.destroy();
  });

  it('relays a large download intact through pooled buffers while other tunnels run', async () => {
    const a = await rawConnect('ok.egress.test:7001', { keep: true });
    const b = await rawConnect('ok.egress.test:7001', { keep: true });
    const payload = (seed: number) => {
      const p = Buffer.alloc(8 * 1024 * 1024);
      for (let i = 0; i < p.length; i++) p[i] = (i * seed + (i >> 12)) & 0xff;
      return p;
    };
    const roundTrip = (socket: net.Socket, data: Buffer) => new Promise<Buffer>((resolve) => {
      const got: Buffer[] = [];
      let n = 0;
      socket.on('data', (d: Buffer) => {
        got.push(d);
        n += d.length;
        if (n >= data.length) resolve(Buffer.concat(got));
      });
      socket.resume();
      socket.write(data);
    });
    const [pa, pb] = [payload(7), payload(13)];
    const [ra, rb] = await Promise.all([roundTrip(a.socket, pa), roundTrip(b.socket, pb)]);
    expect(ra.equals(pa)).toBe(true);
    expect(rb.equals(pb)).toBe(true);
    a.socket.destroy();
    b.socket.destroy();
  });
});

describe('hostile DNS answers', () => {
  it('refuses a name that resolves only to private addresses, naming host, address and rule', async () => {
    const r = await rawConnect('priv.egress.test:443');
    expect(r.status).toBe(403);
    expect(r.headers['x-rlmesh-egress-refused']).toBe('private-use');
    expect(r.body.split('\n').filter(Boolean)).toHaveLength(1);
    expect(r.body).toMatch(/^egress to 'priv\.egress\.test' refused: 10\.0\.0\.7 is private \(RFC 1918\); fd00::7 is unique-local/);
    const viaCurl = await curl('http://priv.egress.test/');
    expect(viaCurl.code).toBe('403');
    expect(viaCurl.body).toContain("egress to 'priv.egress.test' refused: 10.0.0.7 is private (RFC 1918)");
  });

  it('with mixed answers connects only to the address that passed', async () => {
    const r = await curl('https://mixed.egress.test/m');
    expect(r).toEqual({ code: '200', body: `upstream ${ns.nsAddress} mixed.egress.test /m` });
    const line = await waitForLog((l) => l.host === 'mixed.egress.test');
    expect(line).toMatchObject({ decision: 'allowed', address: ns.nsAddress });
  });

  it('resolves once per request and connects to what it checked: a rebinding answer cannot slip through', async () => {
    const first = await curl('https://rebind.egress.test/r1');
    expect(first).toEqual({ code: '200', body: `upstream ${ns.nsAddress} rebind.egress.test /r1` });
    expect(dns.queries('rebind.egress.test', 'A')).toBe(1);
    expect(dns.queries('rebind.egress.test', 'AAAA')).toBe(1);
    const second = await rawConnect('rebind.egress.test:443');
    expect(second.status).toBe(403);
    expect(second.headers['x-rlmesh-egress-refused']).toBe('loopback');
    expect(second.body).toContain('127.0.0.1 is loopback');
    expect(dns.queries('rebind.egress.test', 'A')).toBe(2);
  });

  it('refuses IPv4-mapped and NAT64 answers that hide the metadata address', async () => {
    const mapped = await rawConnect('mapped.egress.test:443');
    expect(mapped.status).toBe(403);
    expect(mapped.headers['x-rlmesh-egress-refused']).toBe('ipv4-mapped');
    expect(mapped.body).toContain('169.254.169.254, which is the instance metadata service of AWS');
    const nat64 = await rawConnect('nat64.egress.test:443');
    expect(nat64.headers['x-rlmesh-egress-refused']).toBe('nat64');
    expect(nat64.body).toContain('169.254.169.254, which is the instance metadata service of AWS');
  });

  it('refuses localhost even when listed', async () => {
    const r = await rawConnect('localhost:443');
    expect(r.status).toBe(403);
    expect(r.headers['x-rlmesh-egress-refused']).toBe('loopback');
  });

  it('refuses a name that resolves into the cluster\'s own ranges, whatever the allow-ranges say', async () => {
    const r = await rawConnect('incluster.egress.test:443');
    expect(r.status).toBe(403);
    expect(r.headers['x-rlmesh-egress-refused']).toBe('cluster-range');
    expect(r.body).toBe("egress to 'incluster.egress.test' refused: " +
      "198.18.110.200 is in 198.18.110.128/25, one of the cluster's own ranges (its pods, Services or nodes; --cluster-range), which the proxy never connects to, public or not; " +
      "2001:2:0:a:c::7 is in 2001:2:0:a:c::/80, one of the cluster's own ranges (its pods, Services or nodes; --cluster-range), which the proxy never connects to, public or not; " +
      'in-cluster services need an in-cluster route, not the egress proxy\n');
    expect(await waitForLog((l) => l.host === 'incluster.egress.test')).toMatchObject({ decision: 'refused', rule: 'cluster-range', status: 403 });
  });

  it('follows the cluster ranges file the agent keeps: gone or empty, every destination is refused and the proxy not ready; a range written there is refused without a restart, and reachable again once removed', async () => {
    const attempt = async () => {
      const r = await rawConnect('followed.egress.test:443');
      r.socket.destroy();
      return r;
    };
    const answered = (what: string, ok: (r: RawAnswer) => boolean) =>
      until(
        what,
        async () => {
          const r = await attempt();
          if (!ok(r)) throw new Error(`still ${r.status} ${r.body}`);
          return r;
        },
        { timeoutMs: 20_000 },
      );
    expect((await attempt()).status).toBe(200);
    // the file gone (the ConfigMap deleted): the proxy is not ready and refuses every destination, saying why
    rmSync(rangesFile());
    const missing = await answered('the proxy to refuse while the ranges are unknown', (r) => r.status === 403);
    expect(missing.headers['x-rlmesh-egress-refused']).toBe('cluster-ranges-unknown');
    expect(missing.body).toMatch(/the cluster ranges file .* is missing: ConfigMap rlmesh-cluster-ranges holds no ranges yet/);
    const notReady = await fetch(`http://127.0.0.1:${HEALTH_PORT}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.text()).toContain('is missing');
    writeFileSync(rangesFile(), '10.244.0.0/16\n');
    await answered('the proxy to know the cluster ranges again', (r) => r.status === 200);
    expect((await fetch(`http://127.0.0.1:${HEALTH_PORT}/readyz`)).status).toBe(200);
    writeFileSync(rangesFile(), `${ns.nsAddress}/32\nnot-a-range\n`);
    await answered('the range from the file to be refused', (r) => r.status === 403 && r.headers['x-rlmesh-egress-refused'] === 'cluster-range');
    expect((await attempt()).body).toContain(`${ns.nsAddress} is in ${ns.nsAddress}/32, one of the cluster's own ranges`);
    expect(await waitForLog((l) => l.msg === 'skipped lines of the cluster ranges file that are not ranges')).toMatchObject({ path: rangesFile() });
    // emptied: not usable, so the ranges in use stay (still refused)
    writeFileSync(rangesFile(), '');
    expect(await waitForLog((l) => typeof l.msg === 'string' && /holds no ranges \(every cluster/.test(l.msg))).toBeDefined();
    expect((await attempt()).headers['x-rlmesh-egress-refused']).toBe('cluster-ranges-unknown');
    writeFileSync(rangesFile(), '10.244.0.0/16\n');
    await answered('the address to be reachable again', (r) => r.status === 200);
  });

  it('refuses connections to itself, whatever the allow-ranges say', async () => {
    const r = await rawConnect('self.egress.test:443');
    expect(r.status).toBe(403);
    expect(r.headers['x-rlmesh-egress-refused']).toBe('proxy-itself');
    expect(r.body).toContain(`${ns.hostAddress} is an address of the egress proxy itself`);
  });
});

describe('refused requests', () => {
  it.each([
    ['notlisted.egress.test:443', 'not-allowed'],
    ['ok.egress.test:8443', 'port-not-allowed'],
    ['ok.egress.test', 'missing-port'],
    ['ok.egress.test:99999', 'invalid-port'],
    ['user:pw@ok.egress.test:443', 'userinfo'],
    ['ok_x.egress.test:443', 'invalid-name'],
    ['ok.egress.test%2f:443', 'invalid-name'],
    ['198.18.10.2:443', 'ip-literal'],
    ['0x7f.1:443', 'ip-literal'],
    ['2130706433:443', 'ip-literal'],
    ['[::ffff:127.0.0.1]:443', 'ip-literal'],
  ])('CONNECT %s → 403 %s', async (target, rule) => {
    const r = await rawConnect(target);
    expect(r.status).toBe(403);
    expect(r.headers['x-rlmesh-egress-refused']).toBe(rule);
    expect(r.body).toMatch(/^egress to '.*' refused: .+\n$/);
  });

  it('refuses protocol upgrades over plain HTTP', async () => {
    const r = await curl('http://ok.egress.test/ws', ['-H', 'Upgrade: websocket', '-H', 'Connection: Upgrade']);
    expect(r.code).toBe('403');
    expect(r.body).toContain('protocol upgrades over plain HTTP are not proxied');
  });

  it('answers 502 for DNS failures and refused connections, 504 for a connect timeout', async () => {
    const nx = await rawConnect('nx.egress.test:443');
    expect([nx.status, nx.headers['x-rlmesh-egress-error']]).toEqual([502, 'dns-enotfound']);
    expect(nx.body).toContain('does not exist');
    const servfail = await rawConnect('servfail.egress.test:443');
    expect([servfail.status, servfail.headers['x-rlmesh-egress-error']]).toEqual([502, 'dns-eservfail']);
    const closed = await rawConnect('ok.egress.test:9');
    expect([closed.status, closed.headers['x-rlmesh-egress-error']]).toEqual([502, 'connect-econnrefused']);
    const started = Date.now();
    const dark = await rawConnect('dark.egress.test:443');
    expect([dark.status, dark.headers['x-rlmesh-egress-error']]).toEqual([504, 'connect-timeout']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
  });
});

describe('plain-HTTP request framing (request smuggling)', () => {
  /** What the recording upstream (port 7003) has received so far, one string per connection. */
  async function recorded(): Promise<string[]> {
    const res = await fetch(`http://${ns.nsAddress}:7004/`);
    return ((await res.json()) as string[]).map((b) => Buffer.from(b, 'base64').toString('latin1'));
  }

  /** Sends raw bytes to the proxy and reads one answer (framed by Content-Length) or whatever came before it closed. */
  async function rawRequest(bytes: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
    const socket = net.connect({ host: '127.0.0.1', port: PROXY_PORT });
    await once(socket, 'connect');
    let text = '';
    const answer = () => {
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return undefined;
      const [statusLine, ...headerLines] = text.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(headerLines.map((h) => [h.slice(0, h.indexOf(':')).toLowerCase(), h.slice(h.indexOf(':') + 1).trim()]));
      const body = text.slice(end + 4);
      return { status: Number(statusLine?.split(' ')[1]), headers, body, complete: body.length >= Number(headers['content-length'] ?? Infinity) };
    };
    const done = new Promise<void>((resolve) => {
      socket.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        if (answer()?.complete) resolve();
      });
      socket.once('close', () => resolve());
      setTimeout(resolve, 5_000);
    });
    socket.on('error', () => socket.destroy());
    socket.write(bytes);
    await done;
    socket.destroy();
    const { complete: _, ...got } = answer() ?? { status: 0, headers: {}, body: text, complete: false };
    return got;
  }

  /** Splits what one upstream connection received into requests by their own framing; throws on bytes that do not parse. */
  function requests(bytes: string): { head: string; body: string }[] {
    const out: { head: string; body: string }[] = [];
    let rest = bytes;
    while (rest.length > 0) {
      const end = rest.indexOf('\r\n\r\n');
      if (end < 0) throw new Error(`bytes after the last request: ${JSON.stringify(rest)}`);
      const head = rest.slice(0, end);
      rest = rest.slice(end + 4);
      const length = /\r\ncontent-length: *(\d+)/i.exec(head);
      let body = '';
      if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
        for (;;) {
          const lineEnd = rest.indexOf('\r\n');
          const size = parseInt(rest.slice(0, lineEnd), 16);
          body += rest.slice(lineEnd + 2, lineEnd + 2 + size);
          rest = rest.slice(lineEnd + 2 + size + 2);
          if (size === 0) break;
        }
      } else if (length) {
        body = rest.slice(0, Number(length[1]));
        rest = rest.slice(Number(length[1]));
      }
      out.push({ head, body });
    }
    return out;
  }

  const hidden = 'GET /smuggled HTTP/1.1\r\nHost: ok.egress.test\r\n\r\n';
  const chunked = (body: string) => `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;

  it.each([
    ['GET with a chunked body', `GET http://ok.egress.test:7003/first HTTP/1.1\r\nHost: ok.egress.test:7003\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(hidden)}`, /a GET request with a chunked body is refused/],
    ['DELETE with a chunked body', `DELETE http://ok.egress.test:7003/first HTTP/1.1\r\nHost: ok.egress.test:7003\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(hidden)}`, /a DELETE request with a chunked body/],
    ['Connection naming content-length', `GET http://ok.egress.test:7003/first HTTP/1.1\r\nHost: ok.egress.test:7003\r\nContent-Length: ${hidden.length}\r\nConnection: keep-alive, Content-Length\r\n\r\n${hidden}`, /its Connection header names content-length, which frames the request/],
    ['POST with Connection naming content-length', `POST http://ok.egress.test:7003/first HTTP/1.1\r\nHost: ok.egress.test:7003\r\nContent-Length: ${hidden.length}\r\nConnection: content-length\r\n\r\n${hidden}`, /names content-length/],
    ['Connection naming transfer-encoding', `POST http://ok.egress.test:7003/first HTTP/1.1\r\nHost: ok.egress.test:7003\r\nTransfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n\r\n${chunked(hidden)}`, /names transfer-encoding/],
    ['a coding besides chunked', `POST http://ok.egress.test:7003/first HTTP/1.1\r\nHost: ok.egress.test:7003\r\nTransfer-Encoding: gzip, chunked\r\n\r\n${chunked(hidden)}`, /Transfer-Encoding 'gzip, chunked' is not plain chunked/],
    ['HTTP/1.0 with Transfer-Encoding', `POST http://ok.egress.test:7003/first HTTP/1.0\r\nHost: ok.egress.test:7003\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(hidden)}`, /HTTP\/1\.0 request cannot carry Transfer-Encoding/],
  ])('refuses %s with 400 before it reaches the destination', async (_what, bytes, why) => {
    const before = (await recorded()).length;
    const r = await rawRequest(bytes);
    const received = (await recorded()).slice(before);
    expect(received.join('')).not.toContain('/smuggled');
    expect(received).toEqual([]);
    expect(r.status).toBe(400);
    expect(r.headers['x-rlmesh-egress-refused']).toBe('ambiguous-framing');
    expect(r.headers.connection).toBe('close');
    expect(r.body).toMatch(/^egress to 'ok\.egress\.test' refused: .+\n$/);
    expect(r.body).toMatch(why);
    expect(await waitForLog((l) => l.rule === 'ambiguous-framing' && l.method === bytes.split(' ')[0])).toMatchObject({
      host: 'ok.egress.test', port: 7003, client: '127.0.0.1', decision: 'refused', status: 400,
    });
  });

  it('relays a chunked POST chunked and a Content-Length body with its length: the destination reads exactly one request each', async () => {
    const before = (await recorded()).length;
    const post = await rawRequest(`POST http://ok.egress.test:7003/upload HTTP/1.1\r\nHost: ok.egress.test:7003\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(hidden)}`);
    expect([post.status, post.body]).toEqual([200, 'recorded\n']);
    const get = await rawRequest(`GET http://ok.egress.test:7003/with-length HTTP/1.1\r\nHost: ok.egress.test:7003\r\nContent-Length: ${hidden.length}\r\n\r\n${hidden}`);
    expect([get.status, get.body]).toEqual([200, 'recorded\n']);
    const [first, second, ...more] = (await recorded()).slice(before);
    expect(more).toEqual([]);
    const upload = requests(first!);
    expect(upload).toHaveLength(1);
    expect(upload[0]!.head).toMatch(/^POST \/upload HTTP\/1\.1\r\n/);
    expect(upload[0]!.head.toLowerCase()).toContain('\r\ntransfer-encoding: chunked');
    expect(upload[0]!.body).toBe(hidden);
    const withLength = requests(second!);
    expect(withLength).toHaveLength(1);
    expect(withLength[0]!.head).toMatch(/^GET \/with-length HTTP\/1\.1\r\n/);
    expect(withLength[0]!.head.toLowerCase()).toContain(`\r\ncontent-length: ${hidden.length}`);
    expect(withLength[0]!.body).toBe(hidden);
  });
});

describe('limits', () => {
  it('caps tunnels per client (429) and in total (503), with Retry-After', async () => {
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const r = await rawConnect('ok.egress.test:7001', { keep: true });
        expect(r.status).toBe(200);
        held.push(r.socket);
      }
      const perClient = await rawConnect('ok.egress.test:7001');
      expect(perClient.status).toBe(429);
      expect(perClient.headers['retry-after']).toBe('5');
      expect(perClient.headers['x-rlmesh-egress-error']).toBe('max-tunnels-per-client');
      for (let i = 0; i < 2; i++) {
        const r = await rawConnect('ok.egress.test:7001', { localAddress: '127.0.0.2', keep: true });
        expect(r.status).toBe(200);
        held.push(r.socket);
      }
      const total = await rawConnect('ok.egress.test:7001', { localAddress: '127.0.0.3' });
      expect(total.status).toBe(503);
      expect(total.headers['retry-after']).toBe('5');
      expect(total.headers['x-rlmesh-egress-error']).toBe('max-tunnels');
    } finally {
      for (const s of held) s.destroy();
    }
    await new Promise((r) => setTimeout(r, 200));
    expect((await rawConnect('ok.egress.test:443')).status).toBe(200);
  });

  it('caps connections from accept, before any header is read: in total (503) and per client (429), other clients unaffected, the header timeout still closing idle ones', async () => {
    const openGauge = async () => Number(/^rlmesh_egress_open_connections (\d+)$/m.exec(await metrics())?.[1]);
    const settle = () =>
      until(
        'every connection to close',
        async () => {
          const open = await openGauge();
          if (open !== 0) throw new Error(`connections still open: ${open}`);
          return true;
        },
        { timeoutMs: 5_000, intervalMs: 50 },
      );
    const idle = async (localAddress: string) => {
      const s = net.connect({ host: '127.0.0.1', port: PROXY_PORT, localAddress });
      s.on('error', () => s.destroy());
      await once(s, 'connect');
      return s;
    };
    /** A connection the proxy turns away at accept: it answers without being asked and closes. */
    const turnedAway = async (localAddress: string) => {
      const s = await idle(localAddress);
      const chunks: Buffer[] = [];
      s.on('data', (d: Buffer) => chunks.push(d));
      await once(s, 'close');
      return Buffer.concat(chunks).toString();
    };
    const held: net.Socket[] = [];
    try {
      await settle();
      // in total: 5 + 4 idle connections fill --max-connections 9
      for (let i = 0; i < 5; i++) held.push(await idle('127.0.0.5'));
      for (let i = 0; i < 4; i++) held.push(await idle('127.0.0.6'));
      const total = await turnedAway('127.0.0.7');
      expect(total).toMatch(/^HTTP\/1\.1 503 /);
      expect(total).toMatch(/\r\nx-rlmesh-egress-error: max-connections\r\n/i);
      expect(total).toMatch(/\r\nretry-after: 5\r\n/i);
      expect(total).toContain('the egress proxy already has 9 client connections open (its total connection limit, counted before any request is read)');
      for (const s of held.splice(0)) s.destroy();
      await settle();

      // per client: the sixth idle connection from one address is closed at once
      const opened = Date.now();
      for (let i = 0; i < 5; i++) held.push(await idle('127.0.0.4'));
      const closedAt = held.map((s) => once(s, 'close').then(() => Date.now()));
      const answers = held.map((s) => {
        let text = '';
        s.on('data', (d: Buffer) => (text += d.toString()));
        return once(s, 'close').then(() => text);
      });
      const perClient = await turnedAway('127.0.0.4');
      expect(perClient).toMatch(/^HTTP\/1\.1 429 /);
      expect(perClient).toMatch(/\r\nx-rlmesh-egress-error: max-connections-per-client\r\n/i);
      expect(perClient).toContain('127.0.0.4 already has 5 connections open to the egress proxy (the per-client connection limit');
      // another client is served meanwhile
      const other = await rawConnect('ok.egress.test:7001', { localAddress: '127.0.0.5' });
      expect(other.status).toBe(200);
      // the five sent nothing: the header timeout (1.5 s) closes them with 408
      expect((await Promise.all(answers)).every((a) => a.startsWith('HTTP/1.1 408'))).toBe(true);
      expect(Math.max(...await Promise.all(closedAt)) - opened).toBeLessThan(4_000);
      // once the proxy has seen them close, the address has its share again
      await settle();
      expect((await rawConnect('ok.egress.test:7001', { localAddress: '127.0.0.4' })).status).toBe(200);
      const line = await waitForLog((l) => l.rule === 'max-connections-per-client');
      expect(line).toMatchObject({ client: '127.0.0.4', decision: 'limited', status: 429 });
      expect(await metrics()).toMatch(/rlmesh_egress_decisions_total\{outcome="limited",rule="max-connections"\} [1-9]/);
    } finally {
      for (const s of held) s.destroy();
    }
  });

  it('closes an idle tunnel after the idle timeout', async () => {
    const { socket } = await rawConnect('ok.egress.test:7001', { keep: true });
    const started = Date.now();
    await once(socket, 'close');
    expect(Date.now() - started).toBeGreaterThanOrEqual(2500);
  });

  it('refuses oversized headers (431) and slow headers (408)', async () => {
    const big = await rawConnect('ok.egress.test:443', { extraHeaders: `X-Pad: ${'a'.repeat(8192)}\r\n` });
    expect(big.status).toBe(431);
    const slow = net.connect({ host: '127.0.0.1', port: PROXY_PORT });
    await once(slow, 'connect');
    slow.write('CONNECT ok.egress.test:443 HTTP/1.1\r\n');
    const chunks: Buffer[] = [];
    slow.on('data', (d: Buffer) => chunks.push(d));
    // when the 408 comes, against --header-timeout-ms, is test/bench/egress-timeouts.ts's to measure
    await once(slow, 'close');
    expect(Buffer.concat(chunks).toString()).toMatch(/^HTTP\/1\.1 408/);
  });
});

describe('observability', () => {
  it('logs one line per decision with host, port, client, decision, rule, bytes and duration', async () => {
    const refused = logLines.find((l) => l.host === 'priv.egress.test' && l.method === 'CONNECT');
    expect(refused).toMatchObject({ host: 'priv.egress.test', port: 443, client: '127.0.0.1', decision: 'refused', rule: 'private-use' });
    expect(typeof refused!.durationMs).toBe('number');
    const allowed = await waitForLog((l) => l.host === 'ok.egress.test' && l.decision === 'allowed' && l.port === 7001 && Number(l.bytesUp) > 0);
    expect(allowed).toMatchObject({ rule: 'allow-range', address: ns.nsAddress });
    expect(allowed!.bytesUp).toBeGreaterThanOrEqual(2 * 1024 * 1024);
    expect(allowed!.bytesDown).toBeGreaterThanOrEqual(2 * 1024 * 1024);
  });

  it('exports rlmesh_egress_* metrics by decision and rule, never by host', async () => {
    const text = await metrics();
    expect(text).toMatch(/rlmesh_egress_decisions_total\{outcome="refused",rule="private-use"\} [1-9]/);
    expect(text).toMatch(/rlmesh_egress_decisions_total\{outcome="allowed",rule="allow-range"\} [1-9]/);
    expect(text).toMatch(/rlmesh_egress_decisions_total\{outcome="limited",rule="max-tunnels-per-client"\} [1-9]/);
    expect(text).toMatch(/rlmesh_egress_bytes_total\{direction="downstream"\} [1-9]/);
    expect(text).toMatch(/rlmesh_egress_upstream_connect_seconds_count [1-9]/);
    expect(text).toMatch(/^rlmesh_egress_active_tunnels \d+$/m);
    expect(text).not.toContain('egress.test');
  });

  it('serves /healthz and /readyz on the health port', async () => {
    expect((await fetch(`http://127.0.0.1:${HEALTH_PORT}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${HEALTH_PORT}/readyz`)).status).toBe(200);
  });
});

describe('shutdown', () => {
  it('on SIGTERM turns not-ready, stops accepting, lets an open tunnel finish, then exits 0', async () => {
    const { socket } = await rawConnect('ok.egress.test:7001', { keep: true });
    proxy.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    const direct = new Agent();
    expect((await fetch(`http://127.0.0.1:${HEALTH_PORT}/readyz`, { dispatcher: direct })).status).toBe(503);
    await expect(rawConnect('ok.egress.test:7001')).rejects.toThrow(/ECONNREFUSED/);
    socket.write('still here');
    const echoed = once(socket, 'data');
    socket.resume();
    const [echo] = await echoed as [Buffer];
    expect(echo.toString()).toBe('still here');
    socket.end();
    expect(await exited).toBe(0);
    await direct.close();
  });
});
