// The probe pod's command and the two network measurements, against servers
// on loopback.
import { spawn, spawnSync } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measureSkew, skewVerdict } from './checks/clock-skew.ts';
import { probeTls } from './checks/outbound.ts';

const here = dirname(fileURLToPath(import.meta.url));
let open: Server;
let openPort = 0;
let closedPort = 0;

beforeAll(async () => {
  open = createServer((s) => s.end());
  await new Promise<void>((r) => open.listen(0, '127.0.0.1', r));
  openPort = (open.address() as AddressInfo).port;
  const tmp = createServer();
  await new Promise<void>((r) => tmp.listen(0, '127.0.0.1', r));
  closedPort = (tmp.address() as AddressInfo).port;
  await new Promise((r) => tmp.close(r));
});
afterAll(() => open.close());

function netprobe(forbidden: string, allowed: string, grace = '2'): { status: number | null; stdout: string } {
  const r = spawnSync(process.execPath, [join(here, 'netprobe.ts'), forbidden, allowed, grace], { encoding: 'utf8', timeout: 15_000 });
  return { status: r.status, stdout: r.stdout };
}

describe('netprobe.ts (the probe pod command)', () => {
  it('exits 0 when the forbidden target is blocked and the allowed one reachable', () => {
    const r = netprobe(`127.0.0.1:${closedPort}`, `127.0.0.1:${openPort}`);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`forbidden 127.0.0.1:${closedPort}: blocked; allowed 127.0.0.1:${openPort}: connected\n`);
  });
  it('exits 10 when the forbidden target is reachable', () => {
    expect(netprobe(`127.0.0.1:${openPort}`, `127.0.0.1:${openPort}`).status).toBe(10);
  });
  it('a forbidden target that stops answering within the grace period counts as enforced, late (an enforcer that programs rules after the pod starts)', async () => {
    const late = createServer((sock) => sock.end());
    await new Promise<void>((r) => late.listen(0, '127.0.0.1', r));
    const port = (late.address() as AddressInfo).port;
    const child = spawn(process.execPath, [join(here, 'netprobe.ts'), `127.0.0.1:${port}`, `127.0.0.1:${openPort}`, '5'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    setTimeout(() => late.close(), 1500);
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    expect(code).toBe(0);
    expect(out).toMatch(new RegExp(`^forbidden 127.0.0.1:${port}: blocked \\(enforced after [1-5] s\\); allowed 127.0.0.1:${openPort}: connected\n$`));
  });
  it('exits 11 when the allowed target is unreachable', () => {
    expect(netprobe(`127.0.0.1:${closedPort}`, `127.0.0.1:${closedPort}`).status).toBe(11);
  });
  it('exits 2 with usage when targets are missing', () => {
    expect(netprobe('', '').status).toBe(2);
  });
});

describe('outbound TLS probe', () => {
  it('names a refused connection and a server that is not TLS', async () => {
    expect(await probeTls('127.0.0.1', closedPort, undefined, 2000)).toMatchObject({ ok: false, error: 'connection refused' });
    const notTls = await probeTls('127.0.0.1', openPort, undefined, 2000);
    expect(notTls.ok).toBe(false);
    expect(notTls.error).toBeTruthy();
  });
});

describe('clock skew measurement', () => {
  it('reads the Date header and judges the difference', async () => {
    let offsetMs = 0;
    const server = createHttpServer((_req, res) => {
      res.setHeader('Date', new Date(Date.now() + offsetMs).toUTCString());
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/info`;
    try {
      expect(Math.abs(await measureSkew(url, undefined))).toBeLessThan(1500);
      offsetMs = 60_000;
      const ahead = await measureSkew(url, undefined);
      expect(ahead).toBeGreaterThan(58_000);
      expect(skewVerdict(ahead, url).verdict).toBe('warn');
      offsetMs = -10 * 60_000;
      expect(skewVerdict(await measureSkew(url, undefined), url)).toMatchObject({ verdict: 'fail', found: expect.stringContaining('ahead of') });
    } finally {
      server.close();
    }
  });
});
