// The corporate proxy path against Debian's Squid (basic auth) and the
// reference control plane, both on loopback: CONNECT tunnels for undici
// requests and for HTTP/2, the access log naming each, and what a wrong
// password or an unreachable proxy says.
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect as http2Connect } from 'node:http2';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../test/support/control-plane.ts';
import { closedPort, freePort } from '../test/support/free-port.ts';
import { startSquid, type Squid } from '../test/support/squid.ts';
import { OutboundProxy, ProxyTunnelError } from './outbound-proxy.ts';
import { outboundVerdict, probeTls } from './preflight/checks/outbound.ts';
import { tempDir } from '../test/support/temp.ts';
import { until } from '../test/support/until.ts';

// a name only Squid's hosts file knows: nothing here reaches it but through the proxy
const CP_HOST = 'api.corporate-proxy.test';

let cp: TestControlPlane;
let squid: Squid;
let credentialsDir: string;
let port: number;

beforeAll(async () => {
  const dir = tempDir('rlmesh-proxy-');
  cp = await startTestControlPlane({ dir, tlsHosts: [CP_HOST] });
  port = cp.port;
  squid = await startSquid({ listen: { host: '127.0.0.1', port: await freePort() }, hosts: { [CP_HOST]: '127.0.0.1' } });
  credentialsDir = join(dir, 'proxy-credentials');
  mkdirSync(credentialsDir);
  writeCredentials(squid.password);
}, 60_000);

afterAll(async () => {
  await squid?.stop();
  await cp?.close();
});

function writeCredentials(password: string) {
  writeFileSync(join(credentialsDir, 'username'), `${squid.username}\n`);
  writeFileSync(join(credentialsDir, 'password'), password);
}

const proxy = (o: { noProxy?: string[]; withCredentials?: boolean } = {}) =>
  new OutboundProxy({ url: squid.url, noProxy: o.noProxy ?? [], ...(o.withCredentials === false ? {} : { credentialsDir, credentialsSecret: 'corp-proxy' }) });

describe('through Squid', () => {
  it('carries an undici request in a CONNECT tunnel, authenticated, and the access log shows it', async () => {
    const before = squid.accessLog().length;
    const dispatcher = new Agent({ connect: proxy().undiciConnector({ ca: cp.ca }) });
    const res = await request(`https://${CP_HOST}:${port}/v1/info`, { dispatcher });
    expect(res.statusCode).toBe(200);
    expect(((await res.body.json()) as { grpc: { tls: boolean } }).grpc.tls).toBe(true);
    await dispatcher.close();
    // squid logs a tunnel once it has seen it close, a moment after the client did
    const tunnel = (l: string) => l.includes(`CONNECT ${CP_HOST}:${port}`) && l.includes(squid.username) && /TCP_TUNNEL\/200/.test(l);
    await until('the tunnel in squid\'s access log', () => squid.accessLog().slice(before).some(tunnel) || undefined, { timeoutMs: 10_000 });
  });

  it('carries HTTP/2 over TLS for the gRPC session', async () => {
    const p = proxy();
    const session = http2Connect(`https://${CP_HOST}:${port}`, { createConnection: () => p.tlsThroughTunnel(CP_HOST, port, { ca: cp.ca, ALPNProtocols: ['h2'] }) });
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const req = session.request({ ':path': '/v1/info' });
        req.once('response', (h) => resolve(Number(h[':status'])));
        req.once('error', reject);
        req.end();
      });
      expect(status).toBe(200);
    } finally {
      session.close();
    }
  });

  it('a wrong password: one error that names the proxy, the answer and the Secret; the next tunnel reads the fixed one', async () => {
    writeCredentials('not-the-password');
    try {
      const err = await proxy().tunnel(CP_HOST, port).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ProxyTunnelError);
      expect((err as ProxyTunnelError).status).toBe(407);
      expect((err as Error).message).toBe(
        `the corporate proxy ${squid.url} answered 407 Proxy Authentication Required to CONNECT ${CP_HOST}:${port}: it does not accept the username and password in Secret corp-proxy; put the right ones in its keys username and password (read again at the next attempt)`,
      );
      expect((err as Error).message).not.toContain('not-the-password');
    } finally {
      writeCredentials(squid.password);
    }
    const socket = await proxy().tunnel(CP_HOST, port);
    socket.destroy();
  });

  it('no credentials where the proxy wants them: says which value to set', async () => {
    const err = (await proxy({ withCredentials: false }).tunnel(CP_HOST, port).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/answered 407 .*wants credentials; create a Secret with keys username and password and name it in controlPlane\.proxy\.existingSecret$/);
  });

  it('a proxy nobody listens on: names it and the values to check', async () => {
    const dead = new OutboundProxy({ url: `http://127.0.0.1:${await closedPort()}`, noProxy: [] });
    const err = (await dead.tunnel(CP_HOST, port).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/^cannot reach the corporate proxy http:\/\/127\.0\.0\.1:\d+ for CONNECT api\.corporate-proxy\.test:\d+ \(.*ECONNREFUSED.*\): check controlPlane\.proxy\.url/);
  });
});

describe("preflight's outbound check", () => {
  it('goes through the proxy, and a refusal says what the proxy answered', async () => {
    const ok = await probeTls(CP_HOST, port, cp.ca, 5000, proxy());
    expect(ok).toMatchObject({ ok: true, proxy: squid.url });
    expect(outboundVerdict([ok], 'agent')).toMatchObject({ verdict: 'pass', found: expect.stringContaining(`TLS ok in ${ok.ms} ms through the corporate proxy ${squid.url}`) });
    writeCredentials('not-the-password');
    try {
      const refused = await probeTls(CP_HOST, port, cp.ca, 5000, proxy());
      expect(refused.ok).toBe(false);
      expect(refused.error).toContain(`the corporate proxy ${squid.url} answered 407 Proxy Authentication Required`);
      expect(outboundVerdict([refused], 'agent')).toMatchObject({ verdict: 'fail', fix: expect.stringContaining('Fix what the corporate proxy said above') });
    } finally {
      writeCredentials(squid.password);
    }
  });
});

describe('noProxy', () => {
  const p = new OutboundProxy({ url: 'http://proxy.corp.example:3128', noProxy: ['internal.example', '.svc', '10.0.0.0/8', '192.0.2.7', 'fd00::/8'] });
  it.each([
    ['api.rlmesh.dev', true],
    ['internal.example', false],
    ['store.internal.example', false],
    ['notinternal.example', true],
    ['rlmesh-egress-proxy.rlmesh-system.svc', false],
    ['10.2.3.4', false],
    ['11.2.3.4', true],
    ['192.0.2.7', false],
    ['[fd00::1]', false],
    ['2001:db8::1', true],
    ['API.RLMESH.DEV.', true],
  ])('%s through the proxy: %s', (host, through) => expect(p.appliesTo(host)).toBe(through));

  it('* sends everything direct', () => expect(new OutboundProxy({ url: 'http://p:1', noProxy: ['*'] }).appliesTo('api.rlmesh.dev')).toBe(false));

  it('refuses credentials in the URL and schemes other than http and https', () => {
    expect(() => new OutboundProxy({ url: 'http://user:secret@proxy:3128', noProxy: [] })).toThrow(/carries credentials: put them in the Secret/);
    expect(() => new OutboundProxy({ url: 'socks5://proxy:1080', noProxy: [] })).toThrow(/is not http: or https:/);
  });
});
