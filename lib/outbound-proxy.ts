// The corporate proxy (controlPlane.proxy) that outbound connections to the
// internet go through when a cluster has no direct way out: the agent's
// discovery, join and gRPC session, and the egress proxy's own upstream
// connections. Each connection is an HTTP CONNECT tunnel; TLS to the
// destination runs inside it, end to end. The credentials are read from the
// mounted Secret at every tunnel, so a changed password needs no restart.
import { readFileSync } from 'node:fs';
import { request as httpRequest, STATUS_CODES } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import type { buildConnector } from 'undici';
import type { z } from 'zod';
import { errorMessage } from './error-fields.ts';
import type { outboundProxySchema } from './runtime-config.ts';

export type OutboundProxySettings = z.infer<typeof outboundProxySchema>;

/** The proxy answered a CONNECT with something other than 200, or could not be reached. */
export class ProxyTunnelError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status?: number) {
    super(message);
    this.name = 'ProxyTunnelError';
    this.status = status;
  }
}

/** Where the proxy's username and password come from: the chart's mounted Secret, or the CLI's file or environment. */
export type ProxyCredentialSource = {
  /** how messages name it: "Secret corp-proxy", "the file ./proxy-credentials (--proxy-credentials-file)" */
  shown: string;
  /** the username and password for the next tunnel; throws a ProxyTunnelError saying what to fix */
  read(): { username: string; password: string };
};

/** What messages tell the user to change, in the terms of where the proxy was configured. */
export type ProxyHints = {
  /** the setting that names the proxy */
  url: string;
  /** what to check when the proxy cannot be reached */
  reach: string;
  /** 407 with credentials: where to put the right ones */
  wrongCredentials: string;
  /** 407 without credentials: how to give some */
  missingCredentials: string;
  /** 403: how to reach the host directly instead */
  direct: string;
};

const CHART_HINTS: ProxyHints = {
  url: 'controlPlane.proxy.url',
  reach: 'check controlPlane.proxy.url, and controlPlane.proxy.addresses, which the NetworkPolicies open',
  wrongCredentials: 'put the right ones in its keys username and password (read again at the next attempt)',
  missingCredentials: 'create a Secret with keys username and password and name it in controlPlane.proxy.existingSecret',
  direct: 'list the host in controlPlane.proxy.noProxy if it is reached directly',
};

export type OutboundProxyOptions = {
  read?: (path: string) => string;
  /** instead of the Secret settings.credentialsDir names (the CLI's) */
  credentials?: ProxyCredentialSource;
  hints?: ProxyHints;
};

export class OutboundProxy {
  /** scheme, host and port: what messages show */
  readonly shown: string;
  private readonly url: URL;
  private readonly direct: { hosts: Set<string>; suffixes: string[]; ranges: BlockList; all: boolean };
  private readonly credentials: ProxyCredentialSource | undefined;
  private readonly hints: ProxyHints;

  constructor(settings: OutboundProxySettings, options: OutboundProxyOptions = {}) {
    this.hints = options.hints ?? CHART_HINTS;
    const url = new URL(settings.url);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`${this.hints.url} ${JSON.stringify(url.protocol)} is not http: or https:`);
    if (url.username || url.password) throw new Error('controlPlane.proxy.url carries credentials: put them in the Secret controlPlane.proxy.existingSecret names (keys username and password)');
    this.url = url;
    this.shown = `${url.protocol}//${url.host}`;
    this.direct = directRules(settings.noProxy);
    this.credentials = options.credentials ?? (settings.credentialsDir ? secretCredentials(this.shown, settings.credentialsDir, settings.credentialsSecret ?? 'controlPlane.proxy.existingSecret', options.read ?? ((p) => readFileSync(p, 'utf8'))) : undefined);
  }

  /** Whether tunnels carry Proxy-Authorization. */
  get sendsCredentials(): boolean {
    return this.credentials !== undefined;
  }

  /** Whether a connection to `host` goes through the proxy (not listed in noProxy). */
  appliesTo(host: string): boolean {
    const name = host.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase();
    const { hosts, suffixes, ranges, all } = this.direct;
    if (all || hosts.has(name)) return false;
    const family = isIP(name);
    if (family) return !ranges.check(name, family === 6 ? 'ipv6' : 'ipv4');
    return !suffixes.some((s) => name.endsWith(s));
  }

  /** Proxy-Authorization for the next tunnel, read from its source now; undefined without one. */
  authorization(): string | undefined {
    if (!this.credentials) return undefined;
    const { username, password } = this.credentials.read();
    return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  }

  /** A CONNECT tunnel to host:port through the proxy, open when the promise resolves. */
  tunnel(host: string, port: number, opts: { timeoutMs?: number; ca?: string | undefined } = {}): Promise<Socket> {
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const target = `${host.includes(':') ? `[${host}]` : host}:${port}`;
    return new Promise((resolve, reject) => {
      let auth: string | undefined;
      try {
        auth = this.authorization();
      } catch (err) {
        reject(err as Error);
        return;
      }
      const https = this.url.protocol === 'https:';
      const req = (https ? httpsRequest : httpRequest)({
        host: this.url.hostname.replace(/^\[|\]$/g, ''),
        port: Number(this.url.port) || (https ? 443 : 80),
        method: 'CONNECT',
        path: target,
        headers: { host: target, ...(auth ? { 'proxy-authorization': auth } : {}) },
        timeout: timeoutMs,
        agent: false,
        ...(https && opts.ca ? { ca: opts.ca } : {}),
      });
      req.once('connect', (res, socket, head) => {
        req.setTimeout(0);
        if (res.statusCode !== 200) {
          socket.destroy();
          reject(new ProxyTunnelError(this.refusal(target, res.statusCode ?? 0), res.statusCode));
          return;
        }
        if (head.length) socket.unshift(head);
        socket.setTimeout(0);
        resolve(socket);
      });
      req.once('timeout', () => req.destroy(new ProxyTunnelError(`the corporate proxy ${this.shown} did not answer CONNECT ${target} within ${timeoutMs / 1000} s: check ${this.hints.url} and that the proxy is up`)));
      req.once('error', (err) => {
        reject(err instanceof ProxyTunnelError ? err : new ProxyTunnelError(`cannot reach the corporate proxy ${this.shown} for CONNECT ${target} (${errorMessage(err)}): ${this.hints.reach}`));
      });
      req.end();
    });
  }

  /**
   * TLS to host:port inside a tunnel, returned at once (http2's createConnection
   * must return a socket synchronously): the handshake waits for the tunnel.
   */
  tlsThroughTunnel(host: string, port: number, tls: ConnectionOptions): TLSSocket {
    const tunnel = new PendingTunnel(this.tunnel(host, port, { ca: tls.ca as string | undefined }));
    return tlsConnect({ ...tls, socket: tunnel, ...(isIP(host) ? {} : { servername: host }) });
  }

  /** undici's `connect` option: its connections to host go through a tunnel, TLS inside. */
  undiciConnector(tls: { ca?: string | undefined; timeoutMs?: number }): buildConnector.connector {
    return (opts, callback) => {
      const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
      this.tunnel(opts.hostname, port, { ca: tls.ca, timeoutMs: tls.timeoutMs }).then(
        (socket) => {
          if (opts.protocol !== 'https:') return callback(null, socket);
          const secure = tlsConnect({ socket, servername: opts.servername ?? opts.hostname, ...(tls.ca ? { ca: tls.ca } : {}), ALPNProtocols: ['http/1.1'] });
          secure.once('secureConnect', () => callback(null, secure));
          secure.once('error', (err) => callback(err, null));
        },
        (err: Error) => callback(err, null),
      );
    };
  }

  private refusal(target: string, status: number): string {
    const answer = `${status} ${STATUS_CODES[status] ?? ''}`.trim();
    const head = `the corporate proxy ${this.shown} answered ${answer} to CONNECT ${target}`;
    if (status === 407)
      return this.credentials
        ? `${head}: it does not accept the username and password in ${this.credentials.shown}; ${this.hints.wrongCredentials}`
        : `${head}: it wants credentials; ${this.hints.missingCredentials}`;
    if (status === 403) return `${head}: its rules do not allow this destination; ask its operators to allow CONNECT to ${target}, or ${this.hints.direct}`;
    return `${head}: the tunnel was not opened; the proxy's own log says why`;
  }
}

/** The chart's: keys username and password of the Secret mounted at dir, read at every tunnel. */
function secretCredentials(proxy: string, dir: string, secret: string, read: (path: string) => string): ProxyCredentialSource {
  return {
    shown: `Secret ${secret}`,
    read: () => {
      try {
        return { username: read(`${dir}/username`).replace(/\r?\n$/, ''), password: read(`${dir}/password`).replace(/\r?\n$/, '') };
      } catch (err) {
        throw new ProxyTunnelError(`cannot read the credentials of the corporate proxy ${proxy} from Secret ${secret} (${errorMessage(err)}): give it the keys username and password`);
      }
    },
  };
}

/** noProxy entries: exact hosts, `.domain` or `domain` (the domain and its subdomains), IPs, CIDRs, `*`. */
function directRules(noProxy: string[]) {
  const hosts = new Set<string>();
  const suffixes: string[] = [];
  const ranges = new BlockList();
  let all = false;
  for (const raw of noProxy) {
    const entry = raw.trim().toLowerCase().replace(/^\[|\]$/g, '');
    if (!entry) continue;
    if (entry === '*') {
      all = true;
      continue;
    }
    const [address, bits] = entry.split('/');
    const family = isIP(address!);
    if (family) {
      const type = family === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) ranges.addAddress(address!, type);
      else ranges.addSubnet(address!, Number(bits), type);
      continue;
    }
    const domain = entry.replace(/^\*?\./, '');
    hosts.add(domain);
    suffixes.push(`.${domain}`);
  }
  return { hosts, suffixes, ranges, all };
}

/**
 * A socket for TLS to write its handshake into before the tunnel is open: what
 * is written waits for the tunnel, and the tunnel's bytes are read back.
 */
class PendingTunnel extends Duplex {
  private socket: Socket | undefined;
  private readonly opening: Promise<Socket>;

  constructor(opening: Promise<Socket>) {
    super();
    this.opening = opening;
    opening.then(
      (socket) => {
        if (this.destroyed) return void socket.destroy();
        this.socket = socket;
        socket.on('data', (chunk: Buffer) => {
          if (!this.push(chunk)) socket.pause();
        });
        socket.once('end', () => this.push(null));
        socket.once('error', (err) => this.destroy(err));
        socket.once('close', () => this.destroy());
      },
      (err: Error) => this.destroy(err),
    );
  }

  override _read(): void {
    this.socket?.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.opening.then((socket) => socket.write(chunk, done), done);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.opening.then((socket) => socket.end(done), done);
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.socket?.destroy();
    done(err);
  }
}

/** The configured proxy, or undefined when controlPlane.proxy is not set. */
export function outboundProxy(settings: OutboundProxySettings | undefined): OutboundProxy | undefined {
  return settings?.url ? new OutboundProxy(settings) : undefined;
}

/** The ProxyTunnelError behind an error a client library wrapped (undici, Connect, TLS), if any. */
export function proxyTunnelError(err: unknown): ProxyTunnelError | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) if (e instanceof ProxyTunnelError) return e;
  return undefined;
}
