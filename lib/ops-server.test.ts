import { afterEach, describe, expect, it, vi } from 'vitest';
import { Registry, Counter } from 'prom-client';
import { OpsServer, STALL_LIMIT_MS } from './ops-server.ts';

const open: OpsServer[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.splice(0).map((s) => s.close()));
});

function server(notReady: () => string | undefined = () => undefined): { ops: OpsServer; registry: Registry } {
  const registry = new Registry();
  new Counter({ name: 'ops_test_total', help: 'a counter', registers: [registry] }).inc(3);
  const ops = new OpsServer({ registry, notReady });
  open.push(ops);
  return { ops, registry };
}

const get = async (port: number, path: string) => {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, body: await r.text() };
};

describe('OpsServer', () => {
  it('serves health on the health port and metrics on the metrics port, and nothing else on either', async () => {
    const { ops } = server();
    const ports = await ops.listen({ host: '127.0.0.1', port: 0 }, { host: '127.0.0.1', port: 0 });
    expect(ports.health).not.toBe(ports.metrics);
    expect(await get(ports.health, '/healthz')).toEqual({ status: 200, body: 'ok\n' });
    expect(await get(ports.health, '/readyz?verbose')).toEqual({ status: 200, body: 'ready\n' });
    expect((await get(ports.metrics, '/metrics')).body).toContain('ops_test_total 3');
    const wrong = await get(ports.metrics, '/healthz');
    expect(wrong.status).toBe(404);
    expect(wrong.body).toBe('not found: /healthz; this port serves /metrics\n');
    expect((await get(ports.health, '/metrics')).status).toBe(404);
  });

  it('serves all three on one port when health and metrics share an address', async () => {
    const probe = new OpsServer({ registry: new Registry(), notReady: () => undefined });
    const { health: free } = await probe.listen({ host: '127.0.0.1', port: 0 }, { host: '127.0.0.1', port: 0 });
    await probe.close();
    const { ops } = server();
    const ports = await ops.listen({ host: '127.0.0.1', port: free }, { host: '127.0.0.1', port: free });
    expect(ports).toEqual({ health: free, metrics: free });
    for (const path of ['/healthz', '/readyz', '/metrics']) expect((await get(free, path)).status).toBe(200);
  });

  it('says why it is not ready', async () => {
    let why: string | undefined = 'no live session to the control plane';
    const { ops } = server(() => why);
    const { health } = await ops.listen({ host: '127.0.0.1', port: 0 }, { host: '127.0.0.1', port: 0 });
    expect(await get(health, '/readyz')).toEqual({ status: 503, body: 'not ready: no live session to the control plane\n' });
    why = undefined;
    expect((await get(health, '/readyz')).status).toBe(200);
  });

  it('fails /healthz once the event loop has not turned for the stall limit', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { ops } = server();
    const { health } = await ops.listen({ host: '127.0.0.1', port: 0 }, { host: '127.0.0.1', port: 0 });
    expect((await get(health, '/healthz')).status).toBe(200);
    vi.setSystemTime(Date.now() + STALL_LIMIT_MS + 5_000);
    const stalled = await get(health, '/healthz');
    expect(stalled.status).toBe(503);
    expect(stalled.body).toMatch(/^event loop stalled for \d+ ms\n$/);
  });

  it('names the address and what to do when the port is taken', async () => {
    const { ops: first } = server();
    const { health } = await first.listen({ host: '127.0.0.1', port: 0 }, { host: '127.0.0.1', port: 0 });
    const { ops: second } = server();
    await expect(second.listen({ host: '127.0.0.1', port: health }, { host: '127.0.0.1', port: 0 })).rejects.toThrow(
      `cannot listen for /healthz, /readyz on 127.0.0.1:${health}: listen EADDRINUSE: address already in use 127.0.0.1:${health}; choose another port (or stop what holds it)`,
    );
  });
});
