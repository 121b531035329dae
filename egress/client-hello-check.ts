// The domain-fronting check of a CONNECT tunnel. A front (a CDN, a shared
// load balancer) serves many names on one address and picks the one in the
// TLS ClientHello's server_name (SNI), so `CONNECT allowed.example:443`
// followed by a ClientHello naming another host would reach a host the
// allow-list never admitted. Before relaying a byte of the client's to the
// destination, the proxy reads the client's first bytes (at most one
// ClientHello, whose rest must follow its first byte within the header
// timeout) and, when they are a ClientHello,
// lets the tunnel through only if the name it carries is the CONNECT host.
//
// - A ClientHello without SNI to a name passes: the server then picks its
//   default name, which the client cannot choose, and it could reach no more
//   than with the right SNI and another Host header inside the encryption,
//   which no proxy that does not decrypt can see (see egress/README.md).
// - A CONNECT to an IP address with a ClientHello naming any host is refused:
//   the allow-list admitted the address, not a name served there.
// - Encrypted Client Hello is refused: its outer name is the front's and the
//   real one is encrypted.
// - First bytes that are not a TLS handshake record pass (another protocol).
import type { Duplex } from 'node:stream';
import type { Destination } from './allow-list.ts';
import type { Holding } from './buffer-budget.ts';
import { scanClientHello, type HelloScan } from './tls-client-hello.ts';

/** The largest ClientHello read; real ones are 0.5-2 KiB, with post-quantum key shares included. */
export const MAX_CLIENT_HELLO_BYTES = 32 * 1024;

export type SniRefusal = { rule: string; reason: string; /** TLS alert description to send the client, if any */ alert?: number };
export type TunnelStart = { ok: true; bytes: Buffer } | { ok: false; refusal: SniRefusal } | { ok: false; closed: true };

const UNRECOGNIZED_NAME = 112;
const DECODE_ERROR = 50;
const ILLEGAL_PARAMETER = 47;

/** Why a scanned first message may not go to `dest`, or undefined when it may. */
export function sniRefusal(scan: Exclude<HelloScan, { state: 'more' }>, dest: Destination): SniRefusal | undefined {
  const to = dest.kind === 'ip' ? `the address ${dest.host}` : `'${dest.host}'`;
  switch (scan.state) {
    case 'not-tls':
      return undefined;
    case 'malformed':
      return {
        rule: 'tls-client-hello-invalid', alert: DECODE_ERROR,
        reason: `the tunnel to ${to} starts with a TLS ClientHello the proxy cannot read (${scan.reason}); the proxy checks the server it names, so it must be well formed`,
      };
    case 'hello':
      if (scan.encryptedClientHello) {
        return {
          rule: 'tls-encrypted-client-hello', alert: ILLEGAL_PARAMETER,
          reason: `the ClientHello to ${to} uses Encrypted Client Hello, which hides the server it names from the proxy; turn ECH off in the client (Chromium: --disable-features=EncryptedClientHello)`,
        };
      }
      if (scan.serverName === undefined || scan.serverName === dest.host) return undefined;
      return {
        rule: 'sni-mismatch', alert: UNRECOGNIZED_NAME,
        reason: dest.kind === 'ip'
          ? `the tunnel was opened to the address ${dest.host}, but its ClientHello names '${scan.serverName}' (a name served at an allowed address is not allowed by it); CONNECT to the name`
          : `the tunnel was opened to '${dest.host}', but its ClientHello names '${scan.serverName}' (domain fronting); CONNECT to the host the client means to reach`,
      };
  }
}

/** A fatal TLS alert record (RFC 8446 section 6), so the client's TLS library reports why. */
export function tlsAlert(description: number): Buffer {
  return Buffer.from([21, 3, 3, 0, 2, 2, description]);
}

export type TunnelStartOptions = {
  socket: Duplex;
  /** bytes that came with the CONNECT request */
  head: Buffer;
  dest: Destination;
  timeoutMs: number;
  /** the client's share of the relay buffers: what is read here is counted while it waits */
  holding: Holding;
};

/**
 * Reads the client's first message and decides. On `ok`, `bytes` is everything
 * read, for the caller to write to the destination first, and the socket is
 * paused; on a refusal the caller closes the tunnel.
 */
export function checkTunnelStart(o: TunnelStartOptions): Promise<TunnelStart> {
  const { socket, dest, holding } = o;
  // concatenated only once there are as many bytes as the scan needs, so a client sending a byte at a time costs no more
  let chunks: Buffer[] = o.head.length > 0 ? [o.head] : [];
  let total = o.head.length;
  holding.hold(total);
  let need = 1;
  return new Promise<TunnelStart>((resolve) => {
    // from the first byte on, the rest of the ClientHello must come within timeoutMs; a client
    // that sends nothing is idle, as any tunnel may be, until the idle timeout ends it
    let timer: NodeJS.Timeout | undefined;
    const startTimer = () => {
      timer ??= setTimeout(() => {
        finish({
          ok: false,
          refusal: {
            rule: 'tls-client-hello-timeout',
            reason: `the client sent ${total} bytes of a TLS ClientHello to ${dest.kind === 'ip' ? dest.host : `'${dest.host}'`} but not the rest within ${o.timeoutMs} ms; the proxy reads the whole ClientHello before relaying, to check the server it names`,
          },
        });
      }, o.timeoutMs);
    };
    const finish = (start: TunnelStart) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.pause();
      holding.free(total);
      resolve(start);
    };
    const decide = (): boolean => {
      if (total < need) return false;
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
      chunks = [bytes];
      const scan = scanClientHello(bytes, MAX_CLIENT_HELLO_BYTES);
      if (scan.state === 'more') {
        need = scan.need;
        return false;
      }
      const refusal = sniRefusal(scan, dest);
      finish(refusal ? { ok: false, refusal } : { ok: true, bytes });
      return true;
    };
    const onData = (chunk: Buffer) => {
      holding.hold(chunk.length);
      chunks.push(chunk);
      total += chunk.length;
      if (!decide()) startTimer();
    };
    const onEnd = () => finish({ ok: false, closed: true });
    if (total > 0) {
      if (decide()) return;
      startTimer();
    }
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
    socket.resume();
  });
}
