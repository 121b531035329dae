// The egress proxy behind a corporate proxy: the real proxy in the test's
// process, with its real resolver asking a test DNS server, and Debian's Squid
// (basic auth, names from its own hosts file) as the parent, all on loopback.
// What the egress proxy refuses never reaches Squid; what it lets through
// reaches Squid as the address the egress proxy checked, CONNECT <address>:port
// for tunnels (the client's TLS, SNI included, passes inside) and absolute-form
// GET http://<address>:port/ for plain HTTP;
// a name the cluster's DNS cannot resolve is refused unless the operator lets
// the parent resolve it; a wrong password is one 502 that names Squid and
// never the password.
//
// The test DNS server answers 198.18.0.1 (benchmarking space, re-opened with
// --allow-range) for the public names, and the resolver the proxy is given
// hands 127.0.0.1, where the destinations listen, in its place (as
// startLoopbackProxy's resolver does for every name): the address checked and
// connected to. Squid's own hosts file sends the same names elsewhere,
// 127.0.0.2, a trap that counts what reaches it: what a parent resolving the
// name again would connect to.
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../lib/logger.ts';
import { outboundProxy } from '../lib/outbound-proxy.ts';
import { rawRequest } from '../test/egress/loopback-proxy.ts';
import { startDnsServer, type TestDnsServer } from '../test/egress/dns-server.ts';
import { closedPort, freePort } from '../test/support/free-port.ts';
import { startSquid, type Squid } from '../test/support/squid.ts';
import { until } from '../test/support/until.ts';
import { AllowList } from './allow-list.ts';
import { parseAllowRange } from './classify-address.ts';
import { parseConfig } from './config.ts';
import { createMetrics, type EgressMetrics } from './metrics.ts';
import { authority } from './parent-proxy.ts';
import { createProxy } from './proxy.ts';
import { DestinationResolver } from './resolve-destination.ts';
import { tempDir } from '../test/support/temp.ts';

const STAND_IN = '198.18.0.1';
// on the allow-list, resolved by the egress proxy's DNS server, and in Squid's hosts file
const FILES = 'files.test';
// on the allow-list and in Squid's hosts file, but the egress proxy's DNS server says NXDOMAIN
const ONLY_PARENT = 'only-parent.test';
// in Squid's hosts file, not on the allow-list
const OTHER = 'other.test';
// on the allow-list and in noProxy: reached directly
const DIRECT = 'direct.test';
// on the allow-list, one of its addresses private
const MIXED = 'mixed.test';
// where Squid's hosts file sends the names: a parent that resolves them again connects here
const TRAP = '127.0.0.2';

let dns: TestDnsServer;
let squid: Squid;
let credentialsDir: string;
let cert: string;
let tlsServer: https.Server;
let tlsPort: number;
let httpServer: http.Server;
let httpPort: number;
const seenByDestination: http.IncomingHttpHeaders[] = [];
let trapped = 0;
const traps: net.Server[] = [];
let egressPort: number;
let egress: ReturnType<typeof createProxy>;
let metrics: EgressMetrics;
let logText = '';

function selfSigned(dir: string): { key: string; cert: string } {
  const names = [FILES, ONLY_PARENT, DIRECT, MIXED].map((n) => `DNS:${n}`).join(',');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', `/CN=${FILES}`,
    '-addext', `subjectAltName=${names}`, '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ], { stdio: 'ignore' });
  return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
}

function writePassword(password: string): void {
  writeFileSync(join(credentialsDir, 'username'), `${squid.username}\n`);
  writeFileSync(join(credentialsDir, 'password'), password);
}

beforeAll(async () => {
  const dir = tempDir('rlmesh-parent-proxy-');
  const pair = selfSigned(dir);
  cert = pair.cert;
  tlsServer = https.createServer({ key: pair.key, cert: pair.cert }, (req, res) => res.end(`hello from ${req.headers.host}\n`));
  tlsServer.listen(0, '127.0.0.1');
  httpServer = http.createServer((req, res) => {
    seenByDestination.push(req.headers);
    res.end(`plain ${req.url}\n`);
  });
  httpServer.listen(0, '127.0.0.1');
  await Promise.all([once(tlsServer, 'listening'), once(httpServer, 'listening')]);
  tlsPort = (tlsServer.address() as AddressInfo).port;
  httpPort = (httpServer.address() as AddressInfo).port;
  for (const port of [tlsPort, httpPort]) {
    const trap = net.createServer((s) => {
      trapped++;
      s.destroy();
    });
    trap.listen(port, TRAP);
    await once(trap, 'listening');
    traps.push(trap);
  }

  dns = await startDnsServer({
    [FILES]: { A: [STAND_IN] },
    [DIRECT]: { A: [STAND_IN] },
    [MIXED]: { A: [STAND_IN, '10.0.0.7'] },
  });
  squid = await startSquid({
    listen: { host: '127.0.0.1', port: await freePort() },
    hosts: { [FILES]: TRAP, [ONLY_PARENT]: '127.0.0.1', [OTHER]: '127.0.0.1', [MIXED]: TRAP },
  });
  credentialsDir = join(dir, 'credentials');
  execFileSync('mkdir', [credentialsDir]);
  writePassword(squid.password);

  ({ proxy: egress, port: egressPort, metrics } = await startEgress());
}, 60_000);

/** The egress proxy in front of Squid, with its real resolver behind the stand-in mapping (top of file), logging to logText. */
async function startEgress(...more: string[]): Promise<{ proxy: ReturnType<typeof createProxy>; port: number; metrics: EgressMetrics }> {
  const config = parseConfig([
    '--port', '0', '--health-port', '0', '--metrics-port', '0',
    '--allow', FILES, '--allow', ONLY_PARENT, '--allow', DIRECT, '--allow', MIXED, '--allow', '10.0.0.7',
    '--ports', `${tlsPort},${httpPort}`, '--allow-range', '198.18.0.0/15', '--dns', dns.address, '--connect-timeout-ms', '5000',
    '--parent-proxy', squid.url, '--parent-proxy-credentials', credentialsDir, '--no-proxy', DIRECT, ...more,
  ], { RLMESH_LISTEN_HOST: '127.0.0.1' });
  const real = new DestinationResolver({ servers: config.dns, timeoutMs: 2_000, allowRanges: config.allowRanges.map(parseAllowRange), self: new Set() });
  const resolver = {
    resolve: async (...args: Parameters<DestinationResolver['resolve']>) => {
      const r = await real.resolve(...args);
      return r.outcome === 'addresses' ? { ...r, addresses: r.addresses.map((a) => (a === STAND_IN ? '127.0.0.1' : a)) } : r;
    },
  } as unknown as DestinationResolver;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logText += chunk.toString('utf8');
      done();
    },
  });
  const metrics = createMetrics();
  const proxy = createProxy({
    config, resolver, metrics, logger: createLogger('egress', 'info', sink),
    allowList: new AllowList({ entries: config.allow, ports: config.ports }), parent: outboundProxy(config.parentProxy)!,
  });
  proxy.server.listen(0, '127.0.0.1');
  await once(proxy.server, 'listening');
  return { proxy, port: (proxy.server.address() as AddressInfo).port, metrics };
}

afterAll(async () => {
  await egress?.drain(0);
  for (const trap of traps) trap.close();
  await squid?.stop();
  await dns?.close();
  tlsServer?.close();
  httpServer?.close();
});

/** CONNECT through the egress proxy, then TLS to the destination inside and one GET; the answer's body, or the proxy's refusal. */
async function httpsThroughEgress(host: string, port = tlsPort, through = egressPort): Promise<{ status: number; text: string; headers: Record<string, string> }> {
  const socket = net.connect({ host: '127.0.0.1', port: through });
  socket.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
  // the proxy's answer up to its blank line; a 200 is followed by the destination's TLS
  const head = await new Promise<string>((resolve, reject) => {
    let got = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.pause();
      if (got.length > end + 4) socket.unshift(got.subarray(end + 4));
      resolve(got.subarray(0, end + 4).toString('latin1'));
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
  const status = Number(head.split(' ')[1]);
  if (status !== 200) {
    const rest = await new Promise<string>((resolve) => {
      let more = '';
      socket.on('data', (d: Buffer) => (more += d.toString()));
      socket.once('close', () => resolve(more));
      socket.resume();
    });
    const text = head + rest;
    const headers = Object.fromEntries(text.slice(0, text.indexOf('\r\n\r\n')).split('\r\n').slice(1).map((h) => [h.slice(0, h.indexOf(':')).toLowerCase(), h.slice(h.indexOf(':') + 1).trim()]));
    return { status, text, headers };
  }
  const secure = tls.connect({ socket, servername: host, ca: cert });
  await once(secure, 'secureConnect');
  // no half-close: Squid closes a tunnel whose client half-closes, racing the answer; the server closes after it
  secure.write(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  let text = '';
  for await (const chunk of secure) text += (chunk as Buffer).toString();
  return { status, text, headers: {} };
}

/** Squid's new access-log lines once one for `marker` has appeared (Squid logs a transaction when it ends). */
async function squidLinesUntil(before: number, marker: string): Promise<string[]> {
  return until(`Squid's access log line for ${marker}`, () => {
    const lines = squid.accessLog().slice(before);
    return lines.some((l) => l.includes(marker)) && lines;
  }, { timeoutMs: 10_000, intervalMs: 50, context: () => squid.accessLog().join('\n') });
}

/** A plain GET through the egress proxy that Squid logs: after it, Squid has logged everything sent to it before. */
async function marker(path: string): Promise<void> {
  const answer = await rawRequest(egressPort, `GET http://${FILES}:${httpPort}${path} HTTP/1.1\r\nHost: ${FILES}:${httpPort}\r\nConnection: close\r\n\r\n`);
  expect(answer.status).toBe(200);
}

/** Once Squid has logged a marker request sent after them, none of its lines from `before` on names `host`. */
async function neverReachedSquid(before: number, host: string, path: string): Promise<void> {
  await marker(path);
  const lines = await squidLinesUntil(before, path);
  expect(lines.filter((l) => l.includes(` ${host}:`) || l.includes(`//${host}:`)), lines.join('\n')).toEqual([]);
}

const logLines = () => logText.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

describe('through the parent proxy', () => {
  it('tunnels CONNECT through Squid to the address it checked, not the name, authenticated; the TLS inside keeps the name', async () => {
    const before = squid.accessLog().length;
    const trappedBefore = trapped;
    const answer = await httpsThroughEgress(FILES);
    expect(answer.status).toBe(200);
    // verified against the name: the client's SNI passed untouched
    expect(answer.text).toContain(`hello from ${FILES}`);
    const lines = await squidLinesUntil(before, `CONNECT 127.0.0.1:${tlsPort}`);
    expect(lines.some((l) => l.includes(`CONNECT 127.0.0.1:${tlsPort}`) && l.includes(squid.username) && /TCP_TUNNEL\/200/.test(l)), lines.join('\n')).toBe(true);
    expect(lines.filter((l) => l.includes(`${FILES}:`)), lines.join('\n')).toEqual([]);
    // Squid's own answer for the name (its hosts file) was never used
    expect(trapped).toBe(trappedBefore);
    await until('the tunnel\'s log line', () => logLines().find((l) => l.host === FILES && l.method === 'CONNECT' && l.decision === 'allowed'), { timeoutMs: 5_000, intervalMs: 20 });
    expect(logLines().find((l) => l.host === FILES && l.method === 'CONNECT' && l.decision === 'allowed')).toMatchObject({ rule: 'allow-range', parent: squid.url, address: '127.0.0.1', status: 200 });
    expect(await metrics.registry.getSingleMetricAsString('rlmesh_egress_parent_connections_total')).toMatch(/rlmesh_egress_parent_connections_total\{target="checked-address"\} [1-9]/);
  });

  it('refuses a name off the allow-list without asking Squid', async () => {
    const before = squid.accessLog().length;
    const answer = await httpsThroughEgress(OTHER);
    expect(answer.status).toBe(403);
    expect(answer.headers['x-rlmesh-egress-refused']).toBe('not-allowed');
    await neverReachedSquid(before, OTHER, '/after-not-allowed');
  });

  it('refuses a private IP literal without asking Squid; a name with one private address goes to Squid at its public one', async () => {
    const before = squid.accessLog().length;
    const trappedBefore = trapped;
    const literal = await httpsThroughEgress('10.0.0.7');
    expect(literal.status).toBe(403);
    expect(literal.headers['x-rlmesh-egress-refused']).toBe('private-use');
    const mixed = await httpsThroughEgress(MIXED);
    expect(mixed.status).toBe(200);
    expect(mixed.text).toContain(`hello from ${MIXED}`);
    await neverReachedSquid(before, '10.0.0.7', '/after-private');
    await neverReachedSquid(before, MIXED, '/after-mixed');
    expect(trapped).toBe(trappedBefore);
  });

  it('refuses a name its resolver cannot resolve, naming the rule and the value, without asking Squid', async () => {
    const before = squid.accessLog().length;
    const answer = await httpsThroughEgress(ONLY_PARENT);
    expect(answer.status).toBe(403);
    expect(answer.headers['x-rlmesh-egress-refused']).toBe('unresolved-name');
    expect(answer.text).toContain(`egress to '${ONLY_PARENT}' refused: '${ONLY_PARENT}' did not resolve: the name does not exist (NXDOMAIN) in the cluster's DNS, so the egress proxy has no address to check`);
    expect(answer.text).toContain('or set controlPlane.proxy.passUnresolvedNames=true to let the corporate proxy resolve such names');
    expect(dns.queries(ONLY_PARENT)).toBeGreaterThan(0);
    await neverReachedSquid(before, ONLY_PARENT, '/after-unresolved');
  });

  it('with --parent-proxy-pass-unresolved-names (controlPlane.proxy.passUnresolvedNames), passes such a name to Squid by name', async () => {
    const optedIn = await startEgress('--parent-proxy-pass-unresolved-names');
    try {
      const before = squid.accessLog().length;
      const answer = await httpsThroughEgress(ONLY_PARENT, tlsPort, optedIn.port);
      expect(answer.status).toBe(200);
      expect(answer.text).toContain(`hello from ${ONLY_PARENT}`);
      await squidLinesUntil(before, `CONNECT ${ONLY_PARENT}:${tlsPort}`);
      await until('the log line', () => logLines().find((l) => l.host === ONLY_PARENT && l.decision === 'allowed'), { timeoutMs: 5_000, intervalMs: 20 });
      const line = logLines().find((l) => l.host === ONLY_PARENT && l.decision === 'allowed')!;
      expect(line).toMatchObject({ rule: 'parent-resolves', parent: squid.url });
      expect(line.address).toBeUndefined();
      expect(await optedIn.metrics.registry.getSingleMetricAsString('rlmesh_egress_parent_connections_total')).toMatch(/rlmesh_egress_parent_connections_total\{target="name"\} 1/);
    } finally {
      await optedIn.proxy.drain(0);
    }
  });

  it('forwards plain HTTP to Squid as an absolute-form request for the checked address, not CONNECT', async () => {
    const before = squid.accessLog().length;
    const trappedBefore = trapped;
    const answer = await rawRequest(egressPort, `GET http://${FILES}:${httpPort}/plain?x=1 HTTP/1.1\r\nHost: ${FILES}:${httpPort}\r\nProxy-Authorization: Basic Y2xpZW50OnNlY3JldA==\r\nConnection: close\r\n\r\n`);
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('plain /plain?x=1');
    const lines = await squidLinesUntil(before, `GET http://127.0.0.1:${httpPort}/plain`);
    const line = lines.find((l) => l.includes(`GET http://127.0.0.1:${httpPort}/plain`))!;
    expect(line).toContain(squid.username);
    expect(lines.some((l) => l.includes('CONNECT') || l.includes(`//${FILES}:`)), lines.join('\n')).toBe(false);
    expect(trapped).toBe(trappedBefore);
    // neither the client's nor the egress proxy's Proxy-Authorization reaches the destination
    expect(seenByDestination.at(-1)?.['proxy-authorization']).toBeUndefined();
    await until('the log line', () => logLines().find((l) => l.host === FILES && l.method === 'GET' && l.decision === 'allowed'), { timeoutMs: 5_000, intervalMs: 20 });
    expect(logLines().find((l) => l.host === FILES && l.method === 'GET' && l.decision === 'allowed')).toMatchObject({ address: '127.0.0.1', parent: squid.url });
  });

  it('connects a noProxy destination directly', async () => {
    const before = squid.accessLog().length;
    const answer = await httpsThroughEgress(DIRECT);
    expect(answer.status).toBe(200);
    expect(answer.text).toContain(`hello from ${DIRECT}`);
    await neverReachedSquid(before, DIRECT, '/after-direct');
    await until('the log line', () => logLines().find((l) => l.host === DIRECT && l.decision === 'allowed'), { timeoutMs: 5_000, intervalMs: 20 });
    const line = logLines().find((l) => l.host === DIRECT && l.decision === 'allowed')!;
    expect(line).toMatchObject({ address: '127.0.0.1', rule: 'allow-range' });
    expect(line.parent).toBeUndefined();
  });

  it('a wrong password: 502 naming Squid and its 407, for CONNECT and for plain HTTP, never the password', async () => {
    const wrong = 'wrong-password-b2f7';
    writePassword(wrong);
    try {
      const tunnel = await httpsThroughEgress(FILES);
      expect(tunnel.status).toBe(502);
      expect(tunnel.headers['x-rlmesh-egress-error']).toBe('parent-proxy-407');
      expect(tunnel.text).toContain(`egress to '${FILES}' failed: the corporate proxy ${squid.url} answered 407 Proxy Authentication Required to CONNECT 127.0.0.1:${tlsPort}`);
      const plain = await rawRequest(egressPort, `GET http://${FILES}:${httpPort}/x HTTP/1.1\r\nHost: ${FILES}:${httpPort}\r\nConnection: close\r\n\r\n`);
      expect(plain.status).toBe(502);
      expect(plain.headers['x-rlmesh-egress-error']).toBe('parent-proxy-407');
      expect(plain.text).toContain(`the corporate proxy ${squid.url} answered 407 Proxy Authentication Required to GET http://127.0.0.1:${httpPort}/: it does not accept the username and password`);
      const secrets = [wrong, squid.password, Buffer.from(`${squid.username}:${wrong}`).toString('base64')];
      const metricsText = await metrics.registry.getSingleMetricAsString('rlmesh_egress_decisions_total');
      expect(metricsText).toMatch(/rlmesh_egress_decisions_total\{outcome="connect-failure",rule="parent-proxy-407"\} 2/);
      for (const text of [tunnel.text, plain.text, logText, metricsText]) for (const secret of secrets) expect(text).not.toContain(secret);
    } finally {
      writePassword(squid.password);
    }
    expect((await httpsThroughEgress(FILES)).status).toBe(200);
  });

  it('a parent nobody listens on: 502 naming it', async () => {
    const dead = `http://127.0.0.1:${await closedPort()}`;
    const config = parseConfig(['--port', '0', '--allow', FILES, '--ports', String(tlsPort), '--parent-proxy', dead], { RLMESH_LISTEN_HOST: '127.0.0.1' });
    const proxy = createProxy({
      config, metrics: createMetrics(), logger: createLogger('egress', 'silent'),
      resolver: { resolve: async () => ({ outcome: 'addresses', addresses: ['203.0.113.1'], rule: 'public' }) } as unknown as DestinationResolver,
      allowList: new AllowList({ entries: config.allow, ports: config.ports }), parent: outboundProxy(config.parentProxy)!,
    });
    proxy.server.listen(0, '127.0.0.1');
    await once(proxy.server, 'listening');
    try {
      const answer = await rawRequest((proxy.server.address() as AddressInfo).port, `CONNECT ${FILES}:${tlsPort} HTTP/1.1\r\nHost: ${FILES}\r\n\r\n`);
      expect(answer.status).toBe(502);
      expect(answer.headers['x-rlmesh-egress-error']).toBe('parent-proxy-unreachable');
      expect(answer.text).toContain(`cannot reach the corporate proxy ${dead} for CONNECT 203.0.113.1:${tlsPort}`);
    } finally {
      await proxy.drain(0);
    }
  });
});

describe('the CONNECT target for a checked address', () => {
  it('writes an IPv6 address in brackets', () => {
    expect(authority('2001:db8::7', 443)).toBe('[2001:db8::7]:443');
    expect(authority('203.0.113.7', 8443)).toBe('203.0.113.7:8443');
  });
});
