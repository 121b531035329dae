import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferBudget, bufferLimits, MiB } from './buffer-budget.ts';
import { checkTunnelStart, sniRefusal, tlsAlert, type TunnelStart } from './client-hello-check.ts';
import type { Destination } from './allow-list.ts';

const name = (host: string): Destination => ({ host, port: 443, kind: 'name' });
const ip = (host: string): Destination => ({ host, port: 443, kind: 'ip' });

describe('which first messages a tunnel lets through', () => {
  it('a ClientHello naming the CONNECT host, or naming none, or another protocol', () => {
    expect(sniRefusal({ state: 'hello', serverName: 'files.example', encryptedClientHello: false }, name('files.example'))).toBeUndefined();
    expect(sniRefusal({ state: 'hello', encryptedClientHello: false }, name('files.example'))).toBeUndefined();
    expect(sniRefusal({ state: 'hello', encryptedClientHello: false }, ip('198.18.0.2'))).toBeUndefined();
    expect(sniRefusal({ state: 'not-tls' }, name('files.example'))).toBeUndefined();
  });

  it('refuses another name than the CONNECT host (domain fronting), and any name on a tunnel to an address', () => {
    expect(sniRefusal({ state: 'hello', serverName: 'evil.example', encryptedClientHello: false }, name('files.example'))).toEqual({
      rule: 'sni-mismatch', alert: 112,
      reason: "the tunnel was opened to 'files.example', but its ClientHello names 'evil.example' (domain fronting); CONNECT to the host the client means to reach",
    });
    expect(sniRefusal({ state: 'hello', serverName: 'evil.example', encryptedClientHello: false }, ip('198.18.0.2'))).toMatchObject({
      rule: 'sni-mismatch', reason: expect.stringContaining("the tunnel was opened to the address 198.18.0.2, but its ClientHello names 'evil.example'") as string,
    });
  });

  it('refuses Encrypted Client Hello, whose real name the proxy cannot see, and a ClientHello it cannot read', () => {
    expect(sniRefusal({ state: 'hello', serverName: 'files.example', encryptedClientHello: true }, name('files.example'))).toMatchObject({ rule: 'tls-encrypted-client-hello' });
    expect(sniRefusal({ state: 'malformed', reason: 'the ClientHello repeats extension 0' }, name('files.example'))).toMatchObject({
      rule: 'tls-client-hello-invalid', reason: expect.stringContaining('(the ClientHello repeats extension 0)') as string,
    });
  });

  it('an alert is a fatal TLS alert record', () => {
    expect([...tlsAlert(112)]).toEqual([21, 3, 3, 0, 2, 2, 112]);
  });
});

describe('reading the first message from the client socket', () => {
  const open: net.Socket[] = [];
  let server: net.Server | undefined;
  afterEach(() => {
    for (const s of open) s.destroy();
    open.length = 0;
    server?.close();
  });

  /** A connected loopback pair: what the test writes to `client` arrives at `proxySide`. */
  async function pair(): Promise<{ client: net.Socket; proxySide: net.Socket }> {
    server = net.createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'connection') as Promise<[net.Socket]>;
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    const [proxySide] = await accepted;
    proxySide.pause();
    open.push(client, proxySide);
    return { client, proxySide };
  }

  const budget = () => new BufferBudget(bufferLimits(64 * MiB));

  it('passes a real ClientHello for the CONNECT host whole, counting it against the client share only while it waits', async () => {
    const { client, proxySide } = await pair();
    const b = budget();
    const holding = b.holding('10.0.0.9');
    const started = checkTunnelStart({ socket: proxySide, head: Buffer.alloc(0), dest: name('files.example'), timeoutMs: 5_000, holding });
    const secure = tls.connect({ socket: client, servername: 'files.example' });
    secure.on('error', () => undefined);
    const start = await started;
    expect(start.ok).toBe(true);
    expect((start as { bytes: Buffer }).bytes[0]).toBe(22);
    expect(b.heldBy('10.0.0.9')).toBe(0);
    expect(proxySide.isPaused()).toBe(true);
    secure.destroy();
  });

  it('refuses a real ClientHello naming another host', async () => {
    const { client, proxySide } = await pair();
    const started = checkTunnelStart({ socket: proxySide, head: Buffer.alloc(0), dest: name('files.example'), timeoutMs: 5_000, holding: budget().holding('c') });
    const secure = tls.connect({ socket: client, servername: 'evil.example' });
    secure.on('error', () => undefined);
    expect(await started).toMatchObject({ ok: false, refusal: { rule: 'sni-mismatch' } });
    secure.destroy();
  });

  it('reads a ClientHello that came partly with the CONNECT request and partly a byte at a time', async () => {
    const { client, proxySide } = await pair();
    // capture a real one first, from a client that talks to nobody
    const capture = await pair();
    const secure = tls.connect({ socket: capture.client, servername: 'files.example' });
    secure.on('error', () => undefined);
    const [hello] = (await once(capture.proxySide.resume(), 'data')) as [Buffer];
    secure.destroy();
    const started = checkTunnelStart({ socket: proxySide, head: hello.subarray(0, 3), dest: name('files.example'), timeoutMs: 10_000, holding: budget().holding('c') });
    for (let i = 3; i < hello.length; i++) client.write(hello.subarray(i, i + 1));
    const start = (await started) as Extract<TunnelStart, { ok: true }>;
    expect(start.ok).toBe(true);
    expect(start.bytes.equals(hello)).toBe(true);
  });

  it('passes another protocol at its first byte, and waits without a deadline while the client sends nothing', async () => {
    const { client, proxySide } = await pair();
    const started = checkTunnelStart({ socket: proxySide, head: Buffer.alloc(0), dest: name('files.example'), timeoutMs: 50, holding: budget().holding('c') });
    await new Promise((r) => setTimeout(r, 300));
    client.write('SSH-2.0-test\r\n');
    const start = (await started) as Extract<TunnelStart, { ok: true }>;
    expect(start.ok).toBe(true);
    expect(start.bytes.toString()).toBe('SSH-2.0-test\r\n');
  });

  it('refuses a ClientHello whose rest does not follow within the timeout', async () => {
    const { client, proxySide } = await pair();
    const started = checkTunnelStart({ socket: proxySide, head: Buffer.alloc(0), dest: name('files.example'), timeoutMs: 200, holding: budget().holding('c') });
    client.write(Buffer.from([22, 3, 1, 0, 200, 1]));
    expect(await started).toMatchObject({
      ok: false, refusal: { rule: 'tls-client-hello-timeout', reason: expect.stringContaining("sent 6 bytes of a TLS ClientHello to 'files.example' but not the rest within 200 ms") as string },
    });
  });

  it('stops reading at the bound: a ClientHello declared larger than 32 KiB is refused at its header', async () => {
    const { client, proxySide } = await pair();
    const started = checkTunnelStart({ socket: proxySide, head: Buffer.alloc(0), dest: name('files.example'), timeoutMs: 5_000, holding: budget().holding('c') });
    client.write(Buffer.from([22, 3, 1, 0x40, 0, 1, 0x01, 0, 0]));
    expect(await started).toMatchObject({ ok: false, refusal: { rule: 'tls-client-hello-invalid', reason: expect.stringContaining('65536 bytes, more than the 32768') as string } });
  });

  it('says the client closed when it ends before its ClientHello is complete', async () => {
    const { client, proxySide } = await pair();
    const started = checkTunnelStart({ socket: proxySide, head: Buffer.alloc(0), dest: name('files.example'), timeoutMs: 5_000, holding: budget().holding('c') });
    client.end(Buffer.from([22, 3, 1]));
    expect(await started).toEqual({ ok: false, closed: true });
  });
});
