// Upstream connections through the parent proxy (the corporate proxy,
// controlPlane.proxy or --parent-proxy): CONNECT tunnels by name for CONNECT
// requests, and a connection to the parent itself for plain-HTTP requests,
// which are forwarded to it in absolute form (corporate proxies usually refuse
// CONNECT to port 80). Every failure of the parent becomes an answer that names
// it and says what it said, never its credentials.
import net from 'node:net';
import tls from 'node:tls';
import { errorMessage } from '../lib/error-fields.ts';
import { ProxyTunnelError, type OutboundProxy } from '../lib/outbound-proxy.ts';
import type { Destination } from './allow-list.ts';
import type { Answer } from './proxy.ts';

export type ParentOpened = { ok: true; socket: net.Socket } | { ok: false; answer: Answer };

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

/** A CONNECT tunnel to the destination by name through the parent, open within `timeoutMs`. */
export function tunnelThroughParent(parent: OutboundProxy, dest: Destination, timeoutMs: number): Promise<ParentOpened> {
  const credentials = parentAuthorization(parent, dest);
  if ('status' in credentials) return Promise.resolve({ ok: false, answer: credentials });
  return new Promise((resolve) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      resolve({
        ok: false,
        answer: failed(dest, 'parent-proxy-timeout', `the corporate proxy ${parent.shown} did not open a tunnel to ${dest.host} port ${dest.port} within ${timeoutMs} ms; ${CHECK}`, 504),
      });
    }, timeoutMs);
    // the tunnel's own timeout is a backstop: the connect budget above answers first
    parent.tunnel(dest.host, dest.port, { timeoutMs: timeoutMs + 1_000 }).then(
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
        resolve({ ok: false, answer: failed(dest, status ? `parent-proxy-${status}` : 'parent-proxy-unreachable', errorMessage(err)) });
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
export function parentRefusedForward(parent: OutboundProxy, dest: Destination, method: string, hadCredentials: boolean): Answer {
  const head = `the corporate proxy ${parent.shown} answered 407 Proxy Authentication Required to ${method} http://${dest.host}:${dest.port}/`;
  const what = hadCredentials
    ? 'it does not accept the username and password it was given (the Secret controlPlane.proxy.existingSecret, or the files in --parent-proxy-credentials); put the right ones in the keys username and password (read again at the next request)'
    : 'it wants credentials; create a Secret with keys username and password and name it in controlPlane.proxy.existingSecret (or give --parent-proxy-credentials DIR)';
  return failed(dest, 'parent-proxy-407', `${head}: ${what}`);
}
