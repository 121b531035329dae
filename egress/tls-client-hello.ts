// Reads the server name (SNI) from the first bytes a client sends into a
// CONNECT tunnel, when they are a TLS ClientHello (RFC 8446 section 4.1.2,
// RFC 5246 section 7.4.1.2, RFC 6066 section 3). The ClientHello may come in
// several handshake records and those in several reads; scanClientHello is
// called again with all bytes so far and says how many it needs before it can
// go on, so a client sending one byte at a time costs one scan per record.
//
// It is strict where leniency would let the proxy and the server read two
// different names: one server_name extension with exactly one host_name, no
// repeated extension, lengths that add up, a name of hostname characters.

export type HelloScan =
  /** the bytes so far are a prefix of a ClientHello; `need` is the total to have before scanning again */
  | { state: 'more'; need: number }
  /** the first byte is not a TLS handshake record: some other protocol */
  | { state: 'not-tls' }
  /** a complete ClientHello; serverName lowercased, without a trailing dot */
  | { state: 'hello'; serverName?: string; encryptedClientHello: boolean }
  | { state: 'malformed'; reason: string };

const HANDSHAKE = 22;
const CLIENT_HELLO = 1;
const RECORD_HEADER = 5;
/** RFC 8446 5.1: a plaintext record carries at most 2^14 bytes */
const MAX_RECORD = 16_384;
const EXT_SERVER_NAME = 0;
const EXT_ENCRYPTED_CLIENT_HELLO = 0xfe0d;
const HOST_NAME = 0;
const HOSTNAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;
/** more records than any client splits a ClientHello into: past it, the fragmenting is an evasion */
const MAX_RECORDS = 64;

const malformed = (reason: string): HelloScan => ({ state: 'malformed', reason });

/** Scans `bytes` (everything the client sent so far); a ClientHello longer than `maxHelloBytes` is malformed. */
export function scanClientHello(bytes: Uint8Array, maxHelloBytes: number): HelloScan {
  if (bytes.length === 0) return { state: 'more', need: 1 };
  if (bytes[0] !== HANDSHAKE) return { state: 'not-tls' };
  const fragments: Uint8Array[] = [];
  let handshakeBytes = 0;
  let pos = 0;
  for (;;) {
    if (fragments.length === MAX_RECORDS) return malformed(`the ClientHello is split into more than ${MAX_RECORDS} records`);
    if (bytes.length < pos + RECORD_HEADER) return { state: 'more', need: pos + RECORD_HEADER };
    if (bytes[pos] !== HANDSHAKE) return malformed(`a record of type ${bytes[pos]} came before the ClientHello was complete`);
    if (bytes[pos + 1] !== 3) return malformed(`the record version ${bytes[pos + 1]}.${bytes[pos + 2]} is not TLS`);
    const length = (bytes[pos + 3]! << 8) | bytes[pos + 4]!;
    if (length === 0 || length > MAX_RECORD) return malformed(`a handshake record of ${length} bytes (TLS allows 1 to ${MAX_RECORD})`);
    if (bytes.length < pos + RECORD_HEADER + length) {
      // the message header may already be in: a ClientHello too large is refused before its records arrive
      const partial = bytes.subarray(pos + RECORD_HEADER);
      const early = partial.length > 0 ? checkHeader(concat([...fragments, partial], handshakeBytes + partial.length), maxHelloBytes) : undefined;
      return typeof early === 'object' ? early : { state: 'more', need: pos + RECORD_HEADER + length };
    }
    fragments.push(bytes.subarray(pos + RECORD_HEADER, pos + RECORD_HEADER + length));
    handshakeBytes += length;
    pos += RECORD_HEADER + length;
    const handshake = concat(fragments, handshakeBytes);
    const helloLength = checkHeader(handshake, maxHelloBytes);
    if (typeof helloLength === 'object') return helloLength;
    if (helloLength === undefined || handshakeBytes < 4 + helloLength) continue;
    return parseClientHello(handshake.subarray(4, 4 + helloLength));
  }
}

/** The ClientHello's length from the handshake message header, undefined before its 4 bytes are in, or why it is refused. */
function checkHeader(handshake: Uint8Array, maxHelloBytes: number): number | undefined | HelloScan {
  if (handshake.length < 4) return undefined;
  if (handshake[0] !== CLIENT_HELLO) return malformed(`the first handshake message is of type ${handshake[0]}, not a ClientHello`);
  const helloLength = (handshake[1]! << 16) | (handshake[2]! << 8) | handshake[3]!;
  if (helloLength > maxHelloBytes) return malformed(`the ClientHello is ${helloLength} bytes, more than the ${maxHelloBytes} the proxy reads`);
  return helloLength;
}

function concat(parts: Uint8Array[], total: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A cursor over a ClientHello body; every read checks its bounds. */
class Reader {
  private pos = 0;
  private readonly bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }
  get left(): number {
    return this.bytes.length - this.pos;
  }
  uint(size: 1 | 2 | 3): number | undefined {
    if (this.left < size) return undefined;
    let v = 0;
    for (let i = 0; i < size; i++) v = (v << 8) | this.bytes[this.pos++]!;
    return v;
  }
  take(n: number): Uint8Array | undefined {
    if (n > this.left) return undefined;
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  /** a vector with a length prefix of `size` bytes */
  vector(size: 1 | 2): Uint8Array | undefined {
    const n = this.uint(size);
    return n === undefined ? undefined : this.take(n);
  }
}

function parseClientHello(body: Uint8Array): HelloScan {
  const r = new Reader(body);
  if (r.take(2 + 32) === undefined) return malformed('the ClientHello ends inside its version and random');
  const session = r.vector(1);
  if (session === undefined || session.length > 32) return malformed('the ClientHello has a bad session id');
  const suites = r.vector(2);
  if (suites === undefined || suites.length < 2 || suites.length % 2 !== 0) return malformed('the ClientHello has a bad cipher suite list');
  const compression = r.vector(1);
  if (compression === undefined || compression.length < 1) return malformed('the ClientHello has a bad compression method list');
  // a ClientHello without extensions (TLS 1.2 and older allow it) names no server
  if (r.left === 0) return { state: 'hello', encryptedClientHello: false };
  const extensions = r.vector(2);
  if (extensions === undefined || r.left !== 0) return malformed('the ClientHello extensions do not add up to its length');
  const e = new Reader(extensions);
  const seen = new Set<number>();
  let serverName: string | undefined;
  let encryptedClientHello = false;
  while (e.left > 0) {
    const type = e.uint(2);
    const data = e.vector(2);
    if (type === undefined || data === undefined) return malformed('a ClientHello extension runs past the end of the list');
    if (seen.has(type)) return malformed(`the ClientHello repeats extension ${type}`);
    seen.add(type);
    if (type === EXT_ENCRYPTED_CLIENT_HELLO) encryptedClientHello = true;
    if (type !== EXT_SERVER_NAME) continue;
    const name = parseServerName(data);
    if (typeof name !== 'string') return name;
    serverName = name;
  }
  return { state: 'hello', ...(serverName === undefined ? {} : { serverName }), encryptedClientHello };
}

/** The server_name extension's data: a list of exactly one host_name. */
function parseServerName(data: Uint8Array): string | HelloScan {
  const r = new Reader(data);
  const list = r.vector(2);
  if (list === undefined || r.left !== 0) return malformed('the server_name extension does not add up to its length');
  const l = new Reader(list);
  const type = l.uint(1);
  const name = l.vector(2);
  if (type !== HOST_NAME || name === undefined) return malformed('the server_name extension does not start with a host_name');
  if (l.left !== 0) return malformed('the server_name extension names more than one server');
  let text = '';
  for (const b of name) text += String.fromCharCode(b);
  text = text.toLowerCase();
  if (text.endsWith('.')) text = text.slice(0, -1);
  if (text.length === 0 || text.length > 253 || !HOSTNAME.test(text)) return malformed(`the server name ${JSON.stringify(text.slice(0, 64))} is not a host name`);
  return text;
}
