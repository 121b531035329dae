// The proxy itself, on Node's http server: CONNECT tunnels (TLS passes through
// untouched) and absolute-form plain HTTP requests. For each request:
// admit (tunnel limits) → parse and check the destination against the
// allow-list → resolve once and classify every address → connect to a checked
// address → (a tunnel) its TLS ClientHello names the CONNECT host
// (client-hello-check.ts) → relay. Every outcome is one log line and one metric sample; a
// request target is shown there, and in answers, without its userinfo, query
// or fragment (shown.ts). What the proxy buffers for each client is counted
// against a budget sized from its memory limit (buffer-budget.ts). With a
// parent (corporate) proxy, destinations it applies to are reached through it
// (parent-proxy.ts) after the same checks, at the address checked.
import http, { STATUS_CODES, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { ERROR_HEADER, REFUSED_HEADER } from '../lib/egress-headers.ts';
import { errorFields } from '../lib/error-fields.ts';
import { peerAddress } from '../lib/listen-address.ts';
import type { OutboundProxy } from '../lib/outbound-proxy.ts';
import { parseAbsoluteUrl, parseAuthority, type AllowList, type Destination, type Refusal } from './allow-list.ts';
import type { Answer, Decision } from './answer.ts';
import { BufferBudget, MiB } from './buffer-budget.ts';
import { checkTunnelStart, tlsAlert, type SniRefusal } from './client-hello-check.ts';
import type { EgressConfig } from './config.ts';
import { BufferPool, DownstreamRelay } from './downstream-relay.ts';
import type { EgressMetrics } from './metrics.ts';
import { authority, dialParent, parentAuthorization, parentRefusedForward, tunnelThroughParent } from './parent-proxy.ts';
import type { DestinationResolver } from './resolve-destination.ts';
import { shown, shownTarget } from './shown.ts';
import { relayUpstream } from './upstream-relay.ts';

export { ERROR_HEADER, REFUSED_HEADER };
const RETRY_AFTER_SECONDS = 5;
// A forwarded plain-HTTP request is relayed by Node's streams, which hold per
// direction at most three buffers (the source socket, the parsed message, the
// destination socket) of one highWaterMark (64 KiB) plus one read (64 KiB)
// each: reserved from its client's share for as long as it runs.
const FORWARD_BYTES = 2 * 3 * (64 + 64) * 1024;

interface Outcome {
  host: string;
  port?: number;
  client: string;
  decision: Decision;
  rule: string;
  /** why a tunnel already open was refused (its client got no HTTP answer to read it in) */
  reason?: string;
  address?: string;
  /** the parent proxy the connection went through (scheme, host and port) */
  parent?: string;
  status?: number;
  bytesUp: number;
  bytesDown: number;
  durationMs: number;
  method: string;
}

export interface ProxyDeps {
  config: EgressConfig;
  allowList: AllowList;
  resolver: DestinationResolver;
  metrics: EgressMetrics;
  logger: Logger;
  /** the corporate proxy upstream connections go through, where it applies (noProxy) */
  parent?: OutboundProxy;
}

/** A destination that passed: the checked addresses to connect to (directly or through the parent), or none to go through the parent by name. */
interface Decided {
  addresses: string[];
  rule: string;
  parent?: OutboundProxy;
}

type Connected = { ok: true; socket: net.Socket; address: string } | { ok: false; answer: Answer; address?: string };
/** Through the parent: the checked address asked for (none: by name). */
type ThroughParent = { ok: true; socket: net.Socket; address?: string } | { ok: false; answer: Answer; address?: string };

const mib = (bytes: number) => (bytes / MiB).toFixed(1);

export function createProxy(deps: ProxyDeps) {
  const { config, allowList, resolver, metrics, logger, parent } = deps;
  const server = http.createServer({
    headersTimeout: config.headerTimeoutMs,
    // a forwarded body may take long; idle connections are cut by the socket timeout below
    requestTimeout: 0,
    maxHeaderSize: config.maxHeaderBytes,
    keepAliveTimeout: 5_000,
    noDelay: true,
    // how often header/request timeouts are enforced (Node's default is 30 s)
    connectionsCheckingInterval: Math.min(1_000, config.headerTimeoutMs),
  });
  server.setTimeout(config.idleTimeoutMs, (socket) => socket.destroy());
  const perClient = new Map<string, number>();
  const open = new Set<Duplex>();
  let active = 0;
  let draining = false;
  // Connections are counted from accept, before a byte of them is parsed (the
  // tunnel counts above start only once a request's headers are in), so a
  // client that opens connections and sends nothing holds at most its share
  // until the header timeout closes them.
  const connectionsPerClient = new Map<string, number>();
  let connections = 0;
  const turnedAway = new WeakSet<Duplex>();
  const budget = new BufferBudget(config.buffers);
  const pool = new BufferPool(config.buffers.poolBytesPerSize);
  metrics.readBufferedBytesFrom(() => budget.held());

  /** The answer for a client at its share of the relay buffers (or every client at the budget), or undefined. */
  function bufferLimit(client: string): Answer | undefined {
    const { totalBytes, perClientBytes, memoryLimitBytes } = config.buffers;
    if (budget.held() >= totalBytes) {
      return {
        status: 503, decision: 'limited', rule: 'buffer-budget', retryAfter: true,
        body: `the egress proxy's relay buffers are full (${mib(budget.held())} MiB held for its clients; its budget is ${mib(totalBytes)} MiB, a quarter of its ${mib(memoryLimitBytes)} MiB memory limit); retry after ${RETRY_AFTER_SECONDS} s`,
      };
    }
    const held = budget.heldBy(client);
    if (held >= perClientBytes) {
      return {
        status: 429, decision: 'limited', rule: 'client-buffer-share', retryAfter: true,
        body: `${client} holds ${mib(held)} MiB of the egress proxy's relay buffers, its share (${mib(perClientBytes)} MiB, an eighth of the proxy's ${mib(totalBytes)} MiB buffer budget, from its ${mib(memoryLimitBytes)} MiB memory limit): ` +
          `its open connections are not reading what they asked for; read from them or close some, then retry after ${RETRY_AFTER_SECONDS} s`,
      };
    }
    return undefined;
  }

  function record(o: Outcome): void {
    metrics.decide(o.decision, o.rule);
    if (o.bytesUp) metrics.bytes.inc({ direction: 'upstream' }, o.bytesUp);
    if (o.bytesDown) metrics.bytes.inc({ direction: 'downstream' }, o.bytesDown);
    logger.info(o, `egress ${o.decision}`);
  }

  /** Counts the client against the tunnel limits; returns a release function or the 429/503 answer. */
  function admit(client: string): (() => void) | Answer {
    if (draining) {
      return { status: 503, decision: 'limited', rule: 'draining', retryAfter: true, body: 'the egress proxy is shutting down; retry, another replica will answer' };
    }
    if (active >= config.maxTunnels) {
      return {
        status: 503, decision: 'limited', rule: 'max-tunnels', retryAfter: true,
        body: `the egress proxy already serves ${config.maxTunnels} connections (its total limit); retry after ${RETRY_AFTER_SECONDS} s`,
      };
    }
    const mine = perClient.get(client) ?? 0;
    if (mine >= config.maxTunnelsPerClient) {
      return {
        status: 429, decision: 'limited', rule: 'max-tunnels-per-client', retryAfter: true,
        body: `${client} already has ${mine} connections open through the egress proxy (the per-client limit); close some or retry after ${RETRY_AFTER_SECONDS} s`,
      };
    }
    const overBuffers = bufferLimit(client);
    if (overBuffers) return overBuffers;
    active++;
    perClient.set(client, mine + 1);
    metrics.activeTunnels.set(active);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      active--;
      const left = (perClient.get(client) ?? 1) - 1;
      if (left > 0) perClient.set(client, left);
      else perClient.delete(client);
      metrics.activeTunnels.set(active);
    };
  }

  /** `host`: a normalised destination host, or a target already passed through shownTarget. */
  function refusal(host: string, r: Refusal): Answer {
    return { status: 403, decision: 'refused', rule: r.rule, body: `egress to '${host}' refused: ${r.reason}` };
  }

  /**
   * Checks and resolves the destination; the addresses returned are the only
   * ones to connect to, directly or through the parent (which is asked for
   * the address, not the name). A name the cluster's DNS cannot resolve has
   * no address to check: through a parent it is refused, unless
   * controlPlane.proxy.passUnresolvedNames lets the parent resolve it.
   */
  async function decide(dest: Destination | Refusal, target: string): Promise<Decided | Answer> {
    if ('rule' in dest) return refusal(shownTarget(target), dest);
    const denied = allowList.check(dest);
    if (denied) return refusal(dest.host, denied);
    const through = parent?.appliesTo(dest.host) ? parent : undefined;
    const started = performance.now();
    const resolution = await resolver.resolve(dest);
    if (dest.kind === 'name') metrics.dnsSeconds.observe((performance.now() - started) / 1000);
    if (resolution.outcome === 'refused') return refusal(dest.host, resolution);
    if (resolution.outcome === 'dns-failure') {
      if (through && config.parentProxy?.passUnresolvedNames) return { addresses: [], rule: 'parent-resolves', parent: through };
      if (through) return unresolvedThroughParent(dest, resolution.reason, through);
      return { status: 502, decision: 'dns-failure', rule: resolution.rule, body: `egress to '${dest.host}' failed: ${resolution.reason}; check the name and the proxy's DNS resolver` };
    }
    return { addresses: resolution.addresses, rule: resolution.rule, ...(through ? { parent: through } : {}) };
  }

  /** The answer for a name without an address to check, through the parent. */
  function unresolvedThroughParent(dest: Destination, reason: string, through: OutboundProxy): Answer {
    return {
      status: 403, decision: 'refused', rule: 'unresolved-name',
      body: `egress to '${dest.host}' refused: ${reason} in the cluster's DNS, so the egress proxy has no address to check, and the corporate proxy ${through.shown} ` +
        'would resolve the name itself and could connect anywhere, private addresses included; make the name resolve in the DNS the egress proxy uses (the corporate proxy is then asked ' +
        'for the checked address), or set controlPlane.proxy.passUnresolvedNames=true to let the corporate proxy resolve such names, if it refuses private destinations itself',
    };
  }

  /** Through the parent: its URL, and the checked address it was asked for (none for a name it resolves). */
  function via(decided: Decided, address?: string): { parent?: string; address?: string } {
    if (!decided.parent) return {};
    return { parent: decided.parent.shown, ...(address ? { address } : {}) };
  }

  /** A CONNECT tunnel through the parent to a checked address (`tunnel`), or a connection to the parent to forward a request on, timed like a direct connect. */
  async function throughParent(dest: Destination, decided: Decided & { parent: OutboundProxy }, tunnel: boolean): Promise<ThroughParent> {
    const started = performance.now();
    const opened = tunnel
      ? await tunnelThroughParent(decided.parent, dest, decided.addresses, config.connectTimeoutMs)
      : { ...(await dialParent(decided.parent, dest, config.connectTimeoutMs)), ...(decided.addresses[0] ? { address: decided.addresses[0] } : {}) };
    metrics.connectSeconds.observe((performance.now() - started) / 1000);
    if (opened.ok) metrics.parentConnections.inc({ target: opened.address ? 'checked-address' : 'name' });
    return opened;
  }

  /** Opens TCP to the first checked address that answers, within one connect-timeout budget. */
  async function connect(dest: Destination, addresses: string[], onread?: DownstreamRelay['onread']): Promise<Connected> {
    const deadline = performance.now() + config.connectTimeoutMs;
    let last: Answer | undefined;
    for (const address of addresses) {
      const budget = deadline - performance.now();
      if (budget <= 0) break;
      const started = performance.now();
      const result = await new Promise<Connected>((resolve) => {
        const socket = net.connect({ host: address, port: dest.port, noDelay: true, ...(onread ? { onread } : {}) });
        const timer = setTimeout(() => {
          socket.destroy();
          resolve({
            ok: false,
            answer: {
              status: 504, decision: 'connect-timeout', rule: 'connect-timeout',
              body: `egress to '${dest.host}' failed: ${address} port ${dest.port} did not accept a connection within ${config.connectTimeoutMs} ms; the destination is down or filtered`,
            },
          });
        }, budget);
        socket.once('connect', () => {
          clearTimeout(timer);
          resolve({ ok: true, socket, address });
        });
        socket.once('error', (err: NodeJS.ErrnoException) => {
          clearTimeout(timer);
          resolve({
            ok: false,
            answer: {
              status: 502, decision: 'connect-failure', rule: `connect-${(err.code ?? 'error').toLowerCase()}`,
              body: `egress to '${dest.host}' failed: connecting to ${address} port ${dest.port} failed (${err.code ?? err.message}); the destination is not accepting connections`,
            },
          });
        });
      });
      metrics.connectSeconds.observe((performance.now() - started) / 1000);
      if (result.ok) return result;
      last = result.answer;
    }
    return {
      ok: false,
      answer: last ?? {
        status: 504, decision: 'connect-timeout', rule: 'connect-timeout',
        body: `egress to '${dest.host}' failed: no address accepted a connection within ${config.connectTimeoutMs} ms`,
      },
    };
  }

  function answerHeaders(a: Answer): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': 'text/plain; charset=utf-8' };
    headers[a.decision === 'refused' ? REFUSED_HEADER : ERROR_HEADER] = a.rule;
    if (a.retryAfter) headers['retry-after'] = String(RETRY_AFTER_SECONDS);
    if (a.close) headers.connection = 'close';
    return headers;
  }

  function answerSocket(socket: Duplex, a: Answer): void {
    const body = `${a.body}\n`;
    const headers = { ...answerHeaders(a), 'content-length': String(Buffer.byteLength(body)), connection: 'close' };
    const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    socket.end(`HTTP/1.1 ${a.status} ${STATUS_CODES[a.status]}\r\n${lines}\r\n${body}`);
  }

  function track(sockets: Duplex[], release: () => void): void {
    for (const s of sockets) {
      open.add(s);
      s.once('close', () => open.delete(s));
    }
    let closed = 0;
    for (const s of sockets) {
      s.once('close', () => {
        if (++closed === sockets.length) release();
      });
    }
  }

  /** The answer for a connection over its limit, or undefined to accept it. */
  function connectionLimit(client: string): Answer | undefined {
    if (connections >= config.maxConnections) {
      return {
        status: 503, decision: 'limited', rule: 'max-connections', retryAfter: true,
        body: `the egress proxy already has ${connections} client connections open (its total connection limit, counted before any request is read); retry after ${RETRY_AFTER_SECONDS} s`,
      };
    }
    const mine = connectionsPerClient.get(client) ?? 0;
    if (mine >= config.maxConnectionsPerClient) {
      return {
        status: 429, decision: 'limited', rule: 'max-connections-per-client', retryAfter: true,
        body: `${client} already has ${mine} connections open to the egress proxy (the per-client connection limit, counted before any request is read); close idle connections or retry after ${RETRY_AFTER_SECONDS} s`,
      };
    }
    return bufferLimit(client);
  }

  // before Node's HTTP parser is attached to the socket (it listens on 'connection' too)
  server.prependListener('connection', (socket: net.Socket) => {
    const client = peerAddress(socket.remoteAddress);
    const over = connectionLimit(client);
    if (over) {
      turnedAway.add(socket);
      socket.on('error', () => socket.destroy());
      socket.once('finish', () => socket.destroy());
      answerSocket(socket, over);
      record({ host: '', client, method: '', decision: over.decision, rule: over.rule, status: over.status, bytesUp: 0, bytesDown: 0, durationMs: 0 });
      return;
    }
    connections++;
    connectionsPerClient.set(client, (connectionsPerClient.get(client) ?? 0) + 1);
    metrics.openConnections.set(connections);
    socket.once('close', () => {
      connections--;
      const left = (connectionsPerClient.get(client) ?? 1) - 1;
      if (left > 0) connectionsPerClient.set(client, left);
      else connectionsPerClient.delete(client);
      metrics.openConnections.set(connections);
    });
  });

  server.on('connect', (req: IncomingMessage, clientSocket: Duplex, head: Buffer) => {
    if (turnedAway.has(req.socket)) return clientSocket.destroy();
    const started = performance.now();
    const client = peerAddress(req.socket.remoteAddress);
    const target = req.url ?? '';
    clientSocket.on('error', () => clientSocket.destroy());
    const base = { host: shownTarget(target), client, method: 'CONNECT', bytesUp: 0, bytesDown: 0 };
    const admitted = admit(client);
    if (typeof admitted !== 'function') {
      answerSocket(clientSocket, admitted);
      record({ ...base, decision: admitted.decision, rule: admitted.rule, status: admitted.status, durationMs: performance.now() - started });
      return;
    }
    const release = admitted;
    // the relay buffers this tunnel holds; given back when both sockets have closed (track below), or with the client's when it never connected
    const holding = budget.holding(client);
    let connected = false;
    clientSocket.once('close', () => {
      release();
      if (!connected) holding.end();
    });
    void (async () => {
      const dest = parseAuthority(target);
      const hostField = 'rule' in dest ? base.host : dest.host;
      const port = 'rule' in dest ? undefined : dest.port;
      const decided = await decide(dest, target);
      const fail = (a: Answer, more: { parent?: string } = {}) => {
        answerSocket(clientSocket, a);
        record({ ...base, host: hostField, port, ...more, decision: a.decision, rule: a.rule, status: a.status, durationMs: performance.now() - started });
      };
      if ('status' in decided) return fail(decided);
      const d = dest as Destination;
      const relay = new DownstreamRelay(pool, holding);
      const opened = decided.parent ? await throughParent(d, { ...decided, parent: decided.parent }, true) : await connect(d, decided.addresses, relay.onread);
      if (!opened.ok) {
        relay.closed();
        return fail(opened.answer, via(decided, opened.address));
      }
      const where = decided.parent ? via(decided, opened.address) : { address: opened.address };
      const upstream = opened.socket;
      if (clientSocket.destroyed) {
        upstream.destroy();
        record({ ...base, host: hostField, port, decision: 'client-closed', rule: decided.rule, ...where, durationMs: performance.now() - started });
        return;
      }
      connected = true;
      track([clientSocket, upstream], () => {
        release();
        holding.end();
      });
      upstream.on('error', () => {
        upstream.destroy();
        clientSocket.destroy();
      });
      clientSocket.on('error', () => upstream.destroy());
      for (const s of [clientSocket as net.Socket, upstream]) {
        s.setTimeout(config.idleTimeoutMs, () => {
          clientSocket.destroy();
          upstream.destroy();
        });
      }
      let closed = 0;
      let fronted: SniRefusal | undefined;
      const finish = () => {
        if (++closed < 2) return;
        record({
          ...base, host: hostField, port, ...where, status: 200,
          ...(fronted ? { decision: 'refused', rule: fronted.rule, reason: fronted.reason } : { decision: 'allowed', rule: decided.rule }),
          bytesUp: upstream.bytesWritten, bytesDown: upstream.bytesRead, durationMs: performance.now() - started,
        });
      };
      upstream.once('close', finish);
      upstream.once('close', () => relay.closed());
      clientSocket.once('close', finish);
      // a side that closes lets the other flush and finish; idle timeouts end stragglers
      upstream.once('close', () => clientSocket.end());
      clientSocket.once('close', () => upstream.end());
      clientSocket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (decided.parent) relay.startStream(upstream, clientSocket);
      else relay.start(upstream, clientSocket);
      // nothing of the client's reaches the destination before its ClientHello names the CONNECT host
      const start = await checkTunnelStart({ socket: clientSocket, head, dest: d, timeoutMs: config.headerTimeoutMs, holding });
      if (!start.ok) {
        if ('refusal' in start) {
          fronted = start.refusal;
          if (fronted.alert !== undefined) clientSocket.end(tlsAlert(fronted.alert), () => clientSocket.destroy());
          else clientSocket.destroy();
        }
        upstream.destroy();
        return;
      }
      if (start.bytes.length > 0) upstream.write(start.bytes);
      relayUpstream(clientSocket, upstream, holding);
      clientSocket.resume();
    })().catch((err: Error) => {
      logger.error({ ...errorFields(err), client, host: base.host }, 'egress tunnel failed unexpectedly');
      clientSocket.destroy();
    });
  });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (turnedAway.has(req.socket)) return req.socket.destroy();
    const started = performance.now();
    const client = peerAddress(req.socket.remoteAddress);
    const target = req.url ?? '';
    const base = { host: shownTarget(target), client, method: req.method ?? '', bytesUp: 0, bytesDown: 0 };
    let failed = false;
    const fail = (a: Answer, host = base.host, port?: number, more: { parent?: string } = {}) => {
      failed = true;
      if (!res.headersSent) {
        const body = `${a.body}\n`;
        res.writeHead(a.status, { ...answerHeaders(a), 'content-length': String(Buffer.byteLength(body)) }).end(body);
      } else res.destroy();
      record({ ...base, host, port, ...more, decision: a.decision, rule: a.rule, status: a.status, durationMs: performance.now() - started });
    };
    let dest: Destination | Refusal;
    try {
      dest = parseAbsoluteUrl(target);
    } catch (err) {
      logger.error({ ...errorFields(err), client, host: base.host }, 'egress request failed unexpectedly');
      return res.destroy();
    }
    if (!('rule' in dest)) Object.assign(base, { host: dest.host });
    // before anything else: a request whose end the destination could see elsewhere is never forwarded
    const framing = framingProblem(req);
    if (framing) {
      return fail({ status: 400, decision: 'refused', rule: 'ambiguous-framing', close: true, body: `egress to '${base.host}' refused: ${framing}` },
        base.host, 'rule' in dest ? undefined : dest.port);
    }
    const admitted = admit(client);
    if (typeof admitted !== 'function') return fail(admitted);
    const holding = budget.holding(client);
    holding.hold(FORWARD_BYTES);
    res.once('close', () => {
      admitted();
      holding.end();
    });
    void (async () => {
      const decided = await decide(dest, target);
      if ('status' in decided) return fail(decided, base.host, (dest as Destination).port);
      const d = dest as Destination;
      const through = decided.parent;
      // the parent is asked for the first checked address (none: the name, which it resolves)
      const where = via(decided, decided.addresses[0]);
      const credentials = through ? parentAuthorization(through, d) : { auth: undefined };
      if ('status' in credentials) return fail(credentials, d.host, d.port, where);
      const connected = through ? await throughParent(d, { ...decided, parent: through }, false) : await connect(d, decided.addresses);
      if (!connected.ok) return fail(connected.answer, d.host, d.port, where);
      const socket = connected.socket;
      socket.setTimeout(config.idleTimeoutMs, () => socket.destroy());
      const url = new URL(target);
      const headers = withoutHopByHop(req.headers);
      headers.host = d.port === 80 ? url.hostname : `${url.hostname}:${d.port}`;
      if (credentials.auth) headers['proxy-authorization'] = credentials.auth;
      // the body's framing is written explicitly: Content-Length passes as it came (Node's
      // parser has checked it), a chunked body is chunked again (framingProblem allowed only
      // plain chunked on methods that carry bodies)
      if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
      const path = `${url.pathname}${url.search}`;
      const upstreamReq = http.request({
        // a parent gets the request in absolute form, as a forward proxy does, for the checked address (with the Host the client sent)
        method: req.method, path: through ? `http://${where.address ? authority(where.address, d.port) : headers.host}${path}` : path, headers, setHost: false,
        createConnection: () => socket,
      });
      upstreamReq.on('response', (upstreamRes) => {
        if (through && upstreamRes.statusCode === 407) {
          upstreamRes.resume();
          socket.destroy();
          return fail(parentRefusedForward(through, d, where.address, req.method ?? 'GET', credentials.auth !== undefined), d.host, d.port, where);
        }
        res.writeHead(upstreamRes.statusCode ?? 502, withoutHopByHop(upstreamRes.headers));
        upstreamRes.pipe(res);
        upstreamRes.on('error', () => res.destroy());
      });
      upstreamReq.on('error', (err: NodeJS.ErrnoException) => {
        if (failed) return;
        fail({
          status: 502, decision: 'connect-failure', rule: 'upstream-error',
          body: `egress to '${d.host}' failed: the ${through ? `corporate proxy ${through.shown} or the ` : ''}destination broke the request (${err.code ?? err.message})`,
        }, d.host, d.port, where);
      });
      res.once('close', () => {
        socket.destroy();
        if (res.writableFinished && !failed) {
          record({
            ...base, host: d.host, port: d.port, decision: 'allowed', rule: decided.rule, ...(through ? where : { address: connected.address }),
            status: res.statusCode, bytesUp: socket.bytesWritten, bytesDown: socket.bytesRead, durationMs: performance.now() - started,
          });
        }
      });
      req.pipe(upstreamReq);
    })().catch((err: Error) => {
      logger.error({ ...errorFields(err), client, host: base.host }, 'egress request failed unexpectedly');
      res.destroy();
    });
  });

  // protocol upgrades (WebSocket over plain HTTP) are not relayed; wss:// goes through CONNECT
  server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    if (turnedAway.has(req.socket)) return socket.destroy();
    const host = shownTarget(req.url ?? '');
    const a: Answer = {
      status: 403, decision: 'refused', rule: 'upgrade',
      body: `egress to '${host}' refused: protocol upgrades over plain HTTP are not proxied; use TLS (wss://, https://) through CONNECT`,
    };
    answerSocket(socket, a);
    record({ host, client: peerAddress(req.socket.remoteAddress), method: req.method ?? '', decision: a.decision, rule: a.rule, status: a.status, bytesUp: 0, bytesDown: 0, durationMs: 0 });
  });

  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable) return socket.destroy();
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = tooLarge
      ? `request headers exceed ${config.maxHeaderBytes} bytes, the egress proxy's limit\n`
      : status === 408 ? 'the request headers did not arrive in time\n' : 'malformed proxy request; send CONNECT host:port or an absolute http:// URL\n';
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    metrics.decide('refused', `bad-request-${status}`);
  });

  /** Stops accepting, lets open tunnels finish for up to `timeoutMs`, then cuts the rest. */
  async function drain(timeoutMs: number): Promise<void> {
    draining = true;
    server.close();
    server.closeIdleConnections();
    const deadline = Date.now() + timeoutMs;
    while (active > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    for (const s of open) s.destroy();
    server.closeAllConnections();
  }

  return {
    server, drain, isDraining: () => draining, activeTunnels: () => active, openConnections: () => connections,
    /** relay bytes held for one client, or (without one) for all */
    bufferedBytes: (client?: string) => (client === undefined ? budget.held() : budget.heldBy(client)),
  };
}

// Headers that say where a request's body ends. Named in Connection, they
// would be dropped as hop-by-hop while the body they framed is still relayed.
const FRAMING_HEADERS = new Set(['content-length', 'transfer-encoding']);
// Methods Node's client (and many servers) treat as bodiless unless told
// otherwise: with a chunked body, a destination that ignores it reads the body
// as the next request.
const NO_CHUNKED_BODY = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE']);

function connectionTokens(headers: IncomingHttpHeaders): string[] {
  return String(headers.connection ?? '').split(',').map((t) => t.trim().toLowerCase()).filter(Boolean);
}

/**
 * Why a plain-HTTP request's framing is ambiguous (a request-smuggling
 * vector), or undefined when its end is unambiguous. Node's parser already
 * refuses duplicate or conflicting Content-Length, Content-Length with
 * Transfer-Encoding, and Transfer-Encoding that does not end in chunked.
 */
export function framingProblem(req: Pick<IncomingMessage, 'headers' | 'method' | 'httpVersion'>): string | undefined {
  const named = connectionTokens(req.headers).filter((t) => FRAMING_HEADERS.has(t));
  if (named.length > 0) {
    return `its Connection header names ${named.join(' and ')}, which frames the request: dropped as hop-by-hop, the destination ` +
      `could read the body as a second request (request smuggling); remove ${named.join(' and ')} from Connection`;
  }
  const te = req.headers['transfer-encoding'];
  if (te === undefined) return undefined;
  if (te.trim().toLowerCase() !== 'chunked') {
    return `Transfer-Encoding '${shown(te)}' is not plain chunked; the proxy relays request bodies framed by Content-Length or by chunked alone`;
  }
  if (req.httpVersion === '1.0') {
    return 'an HTTP/1.0 request cannot carry Transfer-Encoding (RFC 9112 section 6.1); send the body with Content-Length';
  }
  if (NO_CHUNKED_BODY.has(req.method ?? '')) {
    return `a ${req.method} request with a chunked body is refused: servers disagree on whether a ${req.method} has a body, so one of them ` +
      'could read a second, hidden request in it (request smuggling); send the body with Content-Length, or use POST';
  }
  return undefined;
}

const HOP_BY_HOP = ['connection', 'proxy-connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

function withoutHopByHop(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const drop = new Set(HOP_BY_HOP);
  for (const token of connectionTokens(headers)) drop.add(token);
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && !drop.has(k)) out[k] = v;
  return out;
}
