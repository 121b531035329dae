// Upstream connections through the parent proxy (the corporate proxy,
// controlPlane.proxy or --parent-proxy): for CONNECT requests a CONNECT tunnel
// to the address the egress proxy checked (`CONNECT 203.0.113.7:443`; the
// client's TLS, SNI and all, passes inside it untouched), so the parent cannot
// resolve the name again and connect anywhere else; only with
// controlPlane.proxy.passUnresolvedNames, a name the cluster's DNS cannot
// resolve goes by name. Plain-HTTP requests get a connection to the parent
// itself and are forwarded to it in absolute form (corporate proxies usually
// refuse CONNECT to port 80). Every failure of the parent becomes an answer
// that names it and says what it said, never its credentials.
import net from 'node:net';
import tls from 'node:tls';
import { errorMessage } from '../lib/error-fields.ts';
import { ProxyTunnelError, type OutboundProxy } from '../lib/outbound-proxy.ts';
import type { Destination } from './allow-list.ts';
import type { Answer } from './answer.ts';

export type ParentOpened = { ok: true; socket: net.Socket } | { ok: false; answer: Answer };
/** A tunnel through the parent, and the checked address it goes to (none: by name); on failure, the last address asked for. */
export type ParentTunnel = { ok: true; socket: net.Socket; address?: string } | { ok: false; answer: Answer; address?: string };

const CHECK = 'check controlPlane.proxy.url (or --parent-proxy) and that the corporate proxy is up';

function failed(dest: Destination, rule: string, why: string, status = 502): Answer {
  return { status, decision: status === 504 ? 'connect-timeout' : 'connect-failure', rule, body: `egress to '${dest.host}' failed: ${why}` };
}

/** Proxy-Authorization for the next request to the parent, or the answer when its credentials cannot be read. */
export function parentAuthorization(parent: OutboundProxy, dest: Destination): { auth: string | undefined } | Answer {
  try {
    return { auth: parent.authorization() };
  } catch (err) {
    return failed(dest, 'parent-proxy-credentials', errorMessage(err));
  }
}

/** How a CONNECT target is written: an IPv6 address in brackets. */
export const authority = (host: string, port: number): string => `${host.includes(':') ? `[${host}]` : host}:${port}`;

// the parent's answers that say it could not reach this address (another checked address may answer)
const UNREACHED = new Set([502, 503, 504]);

/**
 * A CONNECT tunnel through the parent to the first of the checked `addresses`
 * it opens, within one `timeoutMs` budget; with no addresses (the cluster's DNS
 * did not resolve the name and controlPlane.proxy.passUnresolvedNames is on),
 * to the destination by name.
 */
export async function tunnelThroughParent(parent: OutboundProxy, dest: Destination, addresses: readonly string[], timeoutMs: number): Promise<ParentTunnel> {
  const deadline = performance.now() + timeoutMs;
  let last: ParentTunnel | undefined;
  for (const address of addresses.length > 0 ? addresses : [undefined]) {
    const budget = Math.floor(deadline - performance.now());
    if (budget <= 0) break;
    const opened = await tunnelOnce(parent, dest, address, budget);
    if (opened.ok) return { ...opened, ...(address ? { address } : {}) };
    last = { ...opened, ...(address ? { address } : {}) };
    if (!UNREACHED.has(opened.status ?? 0)) break;
  }
  return last ?? {
    ok: false,
    answer: failed(dest, 'parent-proxy-timeout', `the corporate proxy ${parent.shown} did not open a tunnel to ${dest.host} port ${dest.port} within ${timeoutMs} ms; ${CHECK}`, 504),
  };
}

function tunnelOnce(parent: OutboundProxy, dest: Destination, address: string | undefined, timeoutMs: number): Promise<ParentOpened & { status?: number }> {
  const credentials = parentAuthorization(parent, dest);
  if ('status' in credentials) return Promise.resolve({ ok: false, answer: credentials });
  const target = authority(address ?? dest.host, dest.port);
  // asked for an address, a parent whose rules match names only refuses it: say why it was not asked for the name
  const byAddress = address !== undefined && dest.kind === 'name'
    ? ` (the egress proxy asks for the address it checked for '${dest.host}', never the name, so that the corporate proxy cannot resolve it again to another address: its rules must allow CONNECT to that address)`
    : '';
  return new Promise((resolve) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      resolve({
        ok: false,
        answer: failed(dest, 'parent-proxy-timeout', `the corporate proxy ${parent.shown} did not open a tunnel to ${target} within ${timeoutMs} ms; ${CHECK}`, 504),
      });
    }, timeoutMs);
    // the tunnel's own timeout is a backstop: the connect budget above answers first
    parent.tunnel(address ?? dest.host, dest.port, { timeoutMs: timeoutMs + 1_000 }).then(
      (socket) => {
        if (settled) return void socket.destroy();
        settled = true;
        clearTimeout(timer);
        resolve({ ok: true, socket });
      },
      (err: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const status = err instanceof ProxyTunnelError ? err.status : undefined;
        const why = `${errorMessage(err)}${status === 403 ? byAddress : ''}`;
        resolve({ ok: false, answer: failed(dest, status ? `parent-proxy-${status}` : 'parent-proxy-unreachable', why), ...(status ? { status } : {}) });
      },
    );
  });
}

/** A connection to the parent itself (TLS for an https:// parent), open within `timeoutMs`, to forward a plain-HTTP request on. */
export function dialParent(parent: OutboundProxy, dest: Destination, timeoutMs: number): Promise<ParentOpened> {
  const url = new URL(parent.shown);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const secure = url.protocol === 'https:';
  const port = Number(url.port) || (secure ? 443 : 80);
  return new Promise((resolve) => {
    const socket: net.Socket = secure
      ? tls.connect({ host, port, ...(net.isIP(host) ? {} : { servername: host }) })
      : net.connect({ host, port, noDelay: true });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ ok: false, answer: failed(dest, 'parent-proxy-timeout', `the corporate proxy ${parent.shown} did not accept a connection within ${timeoutMs} ms; ${CHECK}`, 504) });
    }, timeoutMs);
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      resolve({ ok: true, socket });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ ok: false, answer: failed(dest, 'parent-proxy-unreachable', `cannot reach the corporate proxy ${parent.shown} (${err.code ?? err.message}); ${CHECK}`) });
    });
  });
}

/** The answer when the parent wants other credentials for a forwarded plain-HTTP request (its 407 is not the client's to answer). */
export function parentRefusedForward(parent: OutboundProxy, dest: Destination, address: string | undefined, method: string, hadCredentials: boolean): Answer {
  const head = `the corporate proxy ${parent.shown} answered 407 Proxy Authentication Required to ${method} http://${authority(address ?? dest.host, dest.port)}/`;
  const what = hadCredentials
    ? 'it does not accept the username and password it was given (the Secret controlPlane.proxy.existingSecret, or the files in --parent-proxy-credentials); put the right ones in the keys username and password (read again at the next request)'
    : 'it wants credentials; create a Secret with keys username and password and name it in controlPlane.proxy.existingSecret (or give --parent-proxy-credentials DIR)';
  return failed(dest, 'parent-proxy-407', `${head}: ${what}`);
}
