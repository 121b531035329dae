import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { scanClientHello, type HelloScan } from './tls-client-hello.ts';

const MAX = 32 * 1024;

/** The first bytes Node's TLS client (OpenSSL) sends, captured by a loopback server that never answers. */
async function realClientHello(servername?: string): Promise<Buffer> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  const got = new Promise<Buffer>((resolve) => {
    server.once('connection', (s) => {
      let bytes = Buffer.alloc(0);
      s.on('data', (d: Buffer) => {
        bytes = Buffer.concat([bytes, d]);
        const scan = scanClientHello(bytes, MAX);
        if (scan.state !== 'more') {
          resolve(bytes);
          s.destroy();
        }
      });
    });
  });
  const client = tls.connect({ host: '127.0.0.1', port, ...(servername ? { servername } : {}) });
  client.on('error', () => undefined);
  const bytes = await got;
  client.destroy();
  server.close();
  return bytes;
}

const u16 = (n: number) => [n >> 8, n & 0xff];
const u24 = (n: number) => [n >> 16, (n >> 8) & 0xff, n & 0xff];
const vec16 = (b: number[]) => [...u16(b.length), ...b];
const ascii = (s: string) => [...Buffer.from(s, 'latin1')];

/** server_name extension data with the given (type, name) entries */
const sni = (...entries: [number, string][]): number[] => vec16(entries.flatMap(([t, n]) => [t, ...vec16(ascii(n))]));

/** A ClientHello handshake message (header included) with the given extensions. */
function handshake(extensions: [number, number[]][] | undefined, opts: { type?: number; extensionsLength?: number } = {}): Buffer {
  const ext = extensions?.flatMap(([t, d]) => [...u16(t), ...vec16(d)]);
  const body = [
    3, 3, ...new Array<number>(32).fill(7), // version, random
    0, // session id
    ...vec16([0x13, 0x01, 0x13, 0x02]), // cipher suites
    1, 0, // compression: null
    ...(ext ? [...u16(opts.extensionsLength ?? ext.length), ...ext] : []),
  ];
  return Buffer.from([opts.type ?? 1, ...u24(body.length), ...body]);
}

/** The handshake message in records carrying `size` bytes each. */
function records(message: Buffer, size = 16_384, type = 22): Buffer {
  const out: number[] = [];
  for (let at = 0; at < message.length; at += size) {
    const part = message.subarray(at, at + size);
    out.push(type, 3, 1, ...u16(part.length), ...part);
  }
  return Buffer.from(out);
}

const hello = (...entries: [number, string][]) => records(handshake([[0, sni(...entries)]]));
const scan = (b: Uint8Array): HelloScan => scanClientHello(b, MAX);

describe('the server name in a TLS ClientHello', () => {
  it('is read from a real ClientHello of Node (OpenSSL), and absent when the client sends none', async () => {
    expect(scan(await realClientHello('files.example.com'))).toEqual({ state: 'hello', serverName: 'files.example.com', encryptedClientHello: false });
    expect(scan(await realClientHello())).toEqual({ state: 'hello', encryptedClientHello: false });
  });

  it('is read however the ClientHello is split into records and the records into reads, each scan saying how many bytes it needs', async () => {
    const message = (await realClientHello('fragmented.example')).subarray(5);
    for (const size of [1, 3, 4, 5, Math.ceil(message.length / 64), 100, 511, message.length]) {
      const bytes = records(message, size);
      if (Math.ceil(message.length / size) > 64) {
        expect(scan(bytes), `records of ${size}`).toMatchObject({ state: 'malformed', reason: 'the ClientHello is split into more than 64 records' });
        continue;
      }
      // fed a byte at a time, as a slow client would: every prefix asks for more, never for more than there is
      let scans = 0;
      let need = 1;
      for (let n = 1; n < bytes.length; n++) {
        if (n < need) continue;
        scans++;
        const s = scan(bytes.subarray(0, n));
        expect(s.state, `records of ${size}, ${n} bytes`).toBe('more');
        need = (s as { need: number }).need;
        expect(need).toBeGreaterThan(n);
        expect(need).toBeLessThanOrEqual(bytes.length);
      }
      expect(scan(bytes), `records of ${size}`).toEqual({ state: 'hello', serverName: 'fragmented.example', encryptedClientHello: false });
      // one scan per record header and one per record body
      expect(scans).toBeLessThanOrEqual(2 * Math.ceil(message.length / size));
    }
  });

  it('is lowercased, without its trailing dot', () => {
    expect(scan(hello([0, 'Files.Example.COM.']))).toMatchObject({ state: 'hello', serverName: 'files.example.com' });
    expect(scan(hello([0, '_dmarc.x-y.example']))).toMatchObject({ state: 'hello', serverName: '_dmarc.x-y.example' });
  });

  it('is absent in a ClientHello without extensions, or with extensions but no server_name', () => {
    expect(scan(records(handshake(undefined)))).toEqual({ state: 'hello', encryptedClientHello: false });
    expect(scan(records(handshake([[10, vec16([0, 29])]])))).toEqual({ state: 'hello', encryptedClientHello: false });
  });

  it('comes with a flag for Encrypted Client Hello, whose outer name is not the real one', () => {
    expect(scan(records(handshake([[0, sni([0, 'public.front.example'])], [0xfe0d, [0, 1, 2]]])))).toEqual({ state: 'hello', serverName: 'public.front.example', encryptedClientHello: true });
  });

  it('is not looked for in another protocol', () => {
    for (const first of ['GET / HTTP/1.1\r\n', 'SSH-2.0-OpenSSH_9.6\r\n', '\x80\x2e\x01\x03\x01']) expect(scan(Buffer.from(first, 'latin1')), first).toEqual({ state: 'not-tls' });
    expect(scan(Buffer.alloc(0))).toEqual({ state: 'more', need: 1 });
  });

  it.each([
    ['two server_name extensions', records(handshake([[0, sni([0, 'a.example'])], [0, sni([0, 'b.example'])]])), 'repeats extension 0'],
    ['two names in one extension', hello([0, 'a.example'], [0, 'b.example']), 'names more than one server'],
    ['a name type other than host_name', hello([1, 'a.example']), 'does not start with a host_name'],
    ['an empty name list', records(handshake([[0, vec16([])]])), 'does not start with a host_name'],
    ['a NUL in the name', hello([0, 'allowed.example\0.evil.example']), 'is not a host name'],
    ['a space in the name', hello([0, 'a b.example']), 'is not a host name'],
    ['an empty label', hello([0, 'a..example']), 'is not a host name'],
    ['an empty name', hello([0, '']), 'is not a host name'],
    ['a name of 300 characters', hello([0, `${'a'.repeat(63)}.`.repeat(4) + 'a'.repeat(44)]), 'is not a host name'],
    ['a server_name list longer than its extension', records(handshake([[0, [0, 40, 0, 0, 1, 97]]])), 'does not add up'],
    ['extensions longer than the ClientHello', records(handshake([[0, sni([0, 'a.example'])]], { extensionsLength: 400 })), 'do not add up'],
    ['extensions shorter than the ClientHello', records(handshake([[0, sni([0, 'a.example'])]], { extensionsLength: 4 })), 'do not add up'],
    ['a ServerHello instead', records(handshake([[0, sni([0, 'a.example'])]], { type: 2 })), 'not a ClientHello'],
    ['an empty handshake record', Buffer.from([22, 3, 1, 0, 0]), '0 bytes'],
    ['a record over 2^14 bytes', Buffer.from([22, 3, 1, 0x40, 0x01]), '16385 bytes'],
    ['a record version that is not TLS', Buffer.from([22, 2, 0, 0, 5]), 'not TLS'],
    ['an application data record inside the ClientHello', Buffer.concat([records(handshake([[0, sni([0, 'a.example'])]]).subarray(0, 10)), Buffer.from([23, 3, 3, 0, 1, 0])]), 'type 23'],
    ['a ClientHello declared larger than the proxy reads', Buffer.from([22, 3, 1, 0, 4, 1, 0x01, 0x00, 0x00]), 'more than the 32768'],
  ])('is not trusted from a malformed ClientHello: %s', (_, bytes, why) => {
    const s = scan(bytes);
    expect(s.state).toBe('malformed');
    expect((s as { reason: string }).reason).toContain(why);
  });

  it('needs at most the declared ClientHello and one record header more, however large the declared records', () => {
    // a ClientHello of 100 bytes declared; the scan never asks for more than its records
    const message = handshake([[0, sni([0, 'a.example'])]]);
    const s = scan(records(message).subarray(0, 9));
    expect(s).toEqual({ state: 'more', need: 5 + message.length });
  });
});
