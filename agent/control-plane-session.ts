// The one outbound session: a gRPC bidi stream (Connect-ES over HTTP/2 + TLS)
// to the address /v1/info gave, authenticated with the control credential.
// Hello carries the ids still in the spool; heartbeats keep lastSeenAt moving;
// pings are answered; silence for `silenceMs` or any drop means reconnect with
// jittered exponential backoff; a refused credential backs off longer and says
// why. A credential change (rotation) re-authenticates without a restart.
// The control plane judges the agent's version (lib/version-skew.ts) at Hello:
// Welcome names its version (and a notice on the oldest supported line); a
// refusal ends the session with the line that says what to do, which the agent
// logs, reports (versionSkew, the metric, /readyz) and retries rarely.
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import type { Logger } from 'pino';
import {
  AgentMessageSchema,
  ClusterSession,
  type AgentMessage,
  type ControlMessage,
  type EvaluationUpdate,
  type NodeReport,
} from '../lib/gen/rlmesh/v1/session_pb.ts';
import { createBackoff, sleep } from '../lib/backoff.ts';
import type { Timing } from './config.ts';
import { errorMessage } from '../lib/error-fields.ts';
import { hostPort } from '../lib/listen-address.ts';
import { proxyTunnelError, type OutboundProxy } from '../lib/outbound-proxy.ts';

export type SessionState = 'connecting' | 'connected' | 'backoff' | 'unauthenticated' | 'unsupported' | 'stopped';

/** What the control plane said of this agent's version: accepted (supported, or the oldest supported line) or refused. */
export type VersionSkew = {
  agentVersion: string;
  /** empty when a control plane older than the policy did not say */
  controlPlaneVersion: string;
  verdict: 'supported' | 'oldest' | 'unsupported';
  /** the control plane's line (what happened, why, what to do); empty when supported */
  line: string;
};

/** gRPC metadata of a refusal for the agent's version (controlplane/agent-session.ts sets them). */
const VERSION_SKEW_HEADER = 'rlmesh-version-skew';
const CONTROL_PLANE_VERSION_HEADER = 'rlmesh-control-plane-version';

export type SessionDeps = {
  target: { host: string; port: number };
  ca: string | undefined;
  /** the corporate proxy the session tunnels through, when one applies to the target */
  proxy: OutboundProxy | undefined;
  credential: () => { control: string; clusterId: string };
  agentVersion: string;
  kubernetesVersion: () => string;
  timing: Timing;
  log: Logger;
  /** ids of updates still owed, for Hello */
  pendingIds: () => string[];
  /** after Welcome: send what is owed (spooled updates, a full node report) */
  onConnected: () => void;
  onMessage: (m: ControlMessage) => void;
  onState: (s: SessionState) => void;
  onReconnect: () => void;
  /** the control plane judged this agent's version (at every connect, and at a refusal) */
  onVersionSkew?: (v: VersionSkew) => void;
};

/** A push-based async iterable: the request side of the stream. */
class Outbox<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  private closed = false;
  push(item: T) {
    if (this.closed) return;
    this.items.push(item);
    this.wake?.();
  }
  close() {
    this.closed = true;
    this.wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      while (this.items.length) yield this.items.shift()!;
      if (this.closed) return;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
}

type EndReason = 'silence' | 'reauth' | 'stop';

export class Session {
  private readonly d: SessionDeps;
  private state: SessionState = 'connecting';
  private outbox: Outbox<AgentMessage> | undefined;
  private abort: AbortController | undefined;
  private wakeUp = new AbortController();
  private stopped = false;
  private lastHeard = 0;
  private connectedOnce = false;
  private sentUpdates = new Set<string>();
  private loop: Promise<void> | undefined;
  private resetBackoff: () => void = () => undefined;
  /** the first connection, opened by preconnect() before start() */
  private early: Http2SessionManager | undefined;
  /** when the session last reached Connected (ms since epoch) */
  connectedAt = 0;
  /** what the control plane last said of this agent's version (undefined before the first answer) */
  versionSkew: VersionSkew | undefined;
  /** since when the agent has had no session (ms since epoch): its start, then each time a session ends */
  disconnectedAt = Date.now();

  constructor(d: SessionDeps) {
    this.d = d;
  }

  /**
   * Opens the first connection (TLS and HTTP/2 to the configured target, nothing
   * sent) while the agent still reads its credential and checks /v1/info, so the
   * first Hello does not wait for a handshake. The credential goes out only in
   * Hello, after start().
   */
  preconnect(): void {
    this.early ??= this.newSessionManager();
    void this.early.connect();
  }

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.early?.abort();
    this.abort?.abort('stop' satisfies EndReason);
    this.wakeUp.abort();
    await this.loop;
  }

  /** Connected, and the control plane spoke within the silence window. */
  get live(): boolean {
    return this.state === 'connected' && Date.now() - this.lastHeard < this.d.timing.silenceMs;
  }

  get currentState(): SessionState {
    return this.state;
  }

  /** when the control plane last spoke on a session (ms since epoch; 0: never) */
  get lastHeardAt(): number {
    return this.lastHeard;
  }

  /** The credential changed: drop the stream (if any) and connect again now. */
  reauthenticate(): void {
    this.abort?.abort('reauth' satisfies EndReason);
    this.wakeUp.abort();
  }

  sendNodeReport(report: NodeReport): boolean {
    return this.send({ case: 'nodeReport', value: report });
  }

  /** Sends a spooled update unless this connection already carried it. */
  sendUpdate(u: EvaluationUpdate): boolean {
    if (this.state !== 'connected' || this.sentUpdates.has(u.id)) return false;
    this.sentUpdates.add(u.id);
    return this.send({ case: 'evaluationUpdate', value: u });
  }

  /** the control plane stored these updates: no need to remember they were sent */
  acked(ids: string[]): void {
    for (const id of ids) this.sentUpdates.delete(id);
  }

  send(msg: AgentMessage['msg']): boolean {
    if (this.state !== 'connected' || !this.outbox) return false;
    this.outbox.push(create(AgentMessageSchema, { msg }));
    return true;
  }

  private setVersionSkew(v: VersionSkew) {
    this.versionSkew = v;
    this.d.onVersionSkew?.(v);
  }

  private setState(s: SessionState) {
    if (this.state === s) return;
    if (this.state === 'connected') this.disconnectedAt = Date.now();
    this.state = s;
    this.d.onState(s);
  }

  private async run(): Promise<void> {
    const { timing, log } = this.d;
    // a gentler factor than 2: after a control-plane restart the next attempt lands soon after it is back
    const backoff = createBackoff(timing.backoffBaseMs, timing.backoffMaxMs, Math.random, 1.5);
    this.resetBackoff = () => backoff.reset();
    while (!this.stopped) {
      let delay: number;
      try {
        await this.connectOnce();
        delay = backoff.next();
        log.warn({ retryInMs: delay }, 'the control plane ended the session; reconnecting');
      } catch (err) {
        const reason = this.abort?.signal.reason as EndReason | undefined;
        if (reason === 'stop') break;
        if (reason === 'reauth') {
          log.info('control credential changed: re-authenticating the session');
          backoff.reset();
          delay = 0;
        } else if (reason === 'silence') {
          delay = backoff.next();
          log.warn({ silentMs: Date.now() - this.lastHeard, retryInMs: delay }, `no message from the control plane for ${Math.round(timing.silenceMs / 1000)} s: the session is dead, reconnecting`);
        } else if (err instanceof ConnectError && err.code === Code.FailedPrecondition && err.metadata.get(VERSION_SKEW_HEADER)) {
          // the version does not change by retrying: as rarely as a refused credential, until either side is upgraded
          delay = timing.authBackoffMs;
          this.setVersionSkew({ agentVersion: this.d.agentVersion, controlPlaneVersion: err.metadata.get(CONTROL_PLANE_VERSION_HEADER) ?? '', verdict: 'unsupported', line: err.rawMessage });
          this.setState('unsupported');
          log.error({ agentVersion: this.d.agentVersion, controlPlaneVersion: this.versionSkew?.controlPlaneVersion, retryInMs: delay }, `the control plane refused this agent's version: ${err.rawMessage}`);
        } else if (err instanceof ConnectError && err.code === Code.Unauthenticated) {
          delay = timing.authBackoffMs;
          this.setState('unauthenticated');
          const cause = err.metadata.get('rlmesh-auth-cause') ?? 'refused';
          log.error(
            { cause, retryInMs: delay },
            `the control plane refused the control credential (${cause}): ${err.rawMessage}` +
              (/new install command|control Secret/i.test(err.rawMessage) ? '' : '; write a valid credential into the control Secret, or a used or expired token needs a new install command'),
          );
        } else {
          delay = backoff.next();
          const tunnel = proxyTunnelError(err);
          const msg = tunnel ? tunnel.message : err instanceof ConnectError ? `${Code[err.code]}: ${err.rawMessage}` : errorMessage(err);
          log.warn({ err: msg, retryInMs: delay }, `session to ${this.d.target.host}:${this.d.target.port} lost; reconnecting`);
        }
      }
      if (this.stopped) break;
      if (this.state !== 'unauthenticated' && this.state !== 'unsupported') this.setState('backoff');
      if (this.wakeUp.signal.aborted) this.wakeUp = new AbortController();
      if (delay > 0) await sleep(delay, this.wakeUp.signal);
      if (this.wakeUp.signal.aborted) {
        // a new credential arrived during the wait: try it at once
        this.wakeUp = new AbortController();
        backoff.reset();
      }
    }
    this.setState('stopped');
  }

  private async connectOnce(): Promise<void> {
    const { target, timing, log } = this.d;
    // a fresh HTTP/2 connection per attempt: after a control-plane restart the old one is dead
    // (the early one only if it did not fail: an error state would just fail this attempt too)
    const early = this.early;
    this.early = undefined;
    const failed = early?.state() === 'error';
    if (failed) early!.abort();
    const sessionManager = early && !failed ? early : this.newSessionManager();
    const client = createClient(ClusterSession, createGrpcTransport({ baseUrl: sessionManager.authority, sessionManager }));
    const abort = new AbortController();
    this.abort = abort;
    const outbox = new Outbox<AgentMessage>();
    const { control, clusterId } = this.d.credential();
    this.setState('connecting');
    outbox.push(
      create(AgentMessageSchema, {
        msg: {
          case: 'hello',
          value: { clusterId, agentVersion: this.d.agentVersion, kubernetesVersion: this.d.kubernetesVersion(), pendingUpdateIds: this.d.pendingIds() },
        },
      }),
    );
    this.lastHeard = Date.now();
    const silence = setInterval(() => {
      if (Date.now() - this.lastHeard > timing.silenceMs) abort.abort('silence' satisfies EndReason);
    }, Math.max(50, Math.min(1000, timing.silenceMs / 10)));
    const heartbeat = setInterval(() => {
      if (this.state === 'connected') outbox.push(create(AgentMessageSchema, { msg: { case: 'heartbeat', value: { sentAt: timestampFromDate(new Date()) } } }));
    }, timing.heartbeatMs);
    try {
      const stream = client.connect(outbox, { signal: abort.signal, headers: { authorization: `Bearer ${control}` } });
      for await (const m of stream) {
        this.lastHeard = Date.now();
        if (this.state !== 'connected') {
          this.outbox = outbox;
          this.sentUpdates = new Set();
          this.connectedAt = Date.now();
          this.resetBackoff();
          this.setState('connected');
          if (this.connectedOnce) this.d.onReconnect();
          this.connectedOnce = true;
          // processUptimeMs: how long this process took to get here, what a restart costs (read from a pod's log too);
          // processCpuMs: the CPU it spent on the way, all threads, which tells a CPU-bound start from one that waited
          const cpu = process.cpuUsage();
          const welcome = m.msg.case === 'welcome' ? m.msg.value : undefined;
          this.setVersionSkew({
            agentVersion: this.d.agentVersion,
            controlPlaneVersion: welcome?.controlPlaneVersion ?? '',
            verdict: welcome?.versionNotice ? 'oldest' : 'supported',
            line: welcome?.versionNotice ?? '',
          });
          if (welcome?.versionNotice) log.warn({ agentVersion: this.d.agentVersion, controlPlaneVersion: welcome.controlPlaneVersion }, welcome.versionNotice);
          log.info({ controlPlane: `${target.host}:${target.port}`, controlPlaneVersion: welcome?.controlPlaneVersion || undefined, agentVersion: this.d.agentVersion, clusterId, processUptimeMs: Math.round(performance.now()), processCpuMs: Math.round((cpu.user + cpu.system) / 1000) }, 'session connected');
          this.d.onConnected();
        }
        if (m.msg.case === 'ping') {
          outbox.push(create(AgentMessageSchema, { msg: { case: 'pong', value: { nonce: m.msg.value.nonce } } }));
          continue;
        }
        this.d.onMessage(m);
      }
      if (abort.signal.aborted) throw new Error(String(abort.signal.reason));
    } finally {
      clearInterval(silence);
      clearInterval(heartbeat);
      outbox.close();
      if (this.outbox === outbox) this.outbox = undefined;
      abort.abort('done');
      sessionManager.abort();
      if (this.state === 'connected') this.setState('backoff');
    }
  }

  // No HTTP/2 PINGs of connect-node's own: a PING timeout that fires after the
  // stream ended destroys the connection with no error listener left, which
  // crashes the process. The session's own pings and the silence timer above
  // detect a dead peer instead.
  private newSessionManager(): Http2SessionManager {
    const { target, ca, proxy } = this.d;
    const tls = { ...(ca ? { ca } : {}), servername: isIp(target.host) ? undefined : target.host };
    return new Http2SessionManager(`https://${hostPort(target.host, target.port)}`, undefined, {
      ...tls,
      // behind a corporate proxy: HTTP/2 over TLS inside a CONNECT tunnel
      ...(proxy ? { createConnection: () => proxy.tlsThroughTunnel(target.host, target.port, { ...tls, ALPNProtocols: ['h2'] }) } : {}),
    });
  }
}

const isIp = (h: string) => /^[\d.]+$/.test(h) || h.includes(':');
