// ClusterSession.Connect: the one long-lived stream an agent opens. The agent
// authenticates with its control credential and sends Hello first; an agent
// whose version is outside the skew policy (lib/version-skew.ts) is refused
// before anything is sent to it. Otherwise the control plane marks the
// cluster Connected, advances lastSeenAt on every message, sends Welcome and a
// Ping every interval, (re)sends what the cluster has not acknowledged yet
// (rotations, assignments, cancellations) and acks every update it stored.
import { create, fromJson, toJson, type JsonValue } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import type { Logger } from 'pino';
import {
  AssignmentSchema,
  ClusterSession,
  ControlMessageSchema,
  NodeReportSchema,
  PreflightReportSchema,
  type AgentMessage,
  type ControlMessage,
  type Hello,
} from '../lib/gen/rlmesh/v1/session_pb.ts';
import { agentSkew, type SkewVerdict } from '../lib/version-skew.ts';
import { LiveSessions, Outbox, type LiveSession } from './live-sessions.ts';
import { credentialWireValue } from './pull-secret.ts';
import { randomBase62 } from './secrets.ts';
import type { AuthResult, Cluster, Evaluation, Store } from './store.ts';
import type { CredentialPurpose } from '../lib/credential-secret.ts';

export type SessionOptions = {
  store: Store;
  sessions: LiveSessions;
  log: Logger;
  registryHost: string;
  /** this control plane's version (package.json): the agents it accepts follow from it */
  version: string;
  pingIntervalMs: number;
  /** Silence from the agent for this long ends the session (the agent reconnects). */
  silenceTimeoutMs: number;
  /** the output hosts as they stand (GET /v1/info names the same; PUT /v1/output-hosts changes them), sent after Welcome */
  platform: { outputHosts: string[] };
  /** A rotation the agent has not confirmed is sent again on the live session this often (default 60 s). */
  rotationResendMs?: number;
};

const NEW_INSTALL_COMMAND = 'open Clusters → New install command and run it as helm upgrade --install (or write the new value into the control Secret)';

export function clusterSessionRoutes(opts: SessionOptions): (router: ConnectRouter) => void {
  return (router) => router.service(ClusterSession, { connect: (requests, ctx) => runSession(opts, requests, ctx) });
}

function authenticate(store: Store, header: string | null): { clusterId: string; credential: string; current: boolean } {
  const m = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
  if (!m) {
    throw new ConnectError(
      'no control credential: the session needs the header "authorization: Bearer <control credential>" with the value of key "control" of the control Secret',
      Code.Unauthenticated,
      { 'rlmesh-auth-cause': 'missing' },
    );
  }
  const r = store.authenticate('control', m[1]!);
  if (r.ok) return { clusterId: r.clusterId, credential: m[1]!, current: r.current };
  throw new ConnectError(authFailureMessage(r), Code.Unauthenticated, { 'rlmesh-auth-cause': r.cause });
}

export function authFailureMessage(r: Exclude<AuthResult, { ok: true }>): string {
  switch (r.cause) {
    case 'unknown':
      return `control credential unknown: this control plane never issued it (a mistyped Secret, or a Secret from another control plane); ${NEW_INSTALL_COMMAND}`;
    case 'archived':
      return `control credential revoked: cluster ${r.clusterId} was archived at ${r.at}, which revokes all its credentials; connect the cluster again with Clusters → Connect your cluster`;
    case 'revoked':
      // only rows from control planes that ended a control rotation's overlap early carry 'rotated'
      if (r.reason === 'rotated') {
        return `control credential revoked at ${r.at}: a rotation replaced it and the agent of cluster ${r.clusterId} has since authenticated with the new value, which ends the old one's overlap early; use the current value of the control Secret (the agent writes it), or ${NEW_INSTALL_COMMAND}`;
      }
      if (r.reason === 'rejoined') {
        return `control credential revoked at ${r.at}: cluster ${r.clusterId} joined again with a new install command and its agent confirmed the new credentials, which replace this one; use the control Secret the new join wrote (the agent that joined writes it), or ${NEW_INSTALL_COMMAND}`;
      }
      return `control credential revoked at ${r.at} for cluster ${r.clusterId}; ${NEW_INSTALL_COMMAND}`;
    case 'expired':
      return `control credential expired: it was replaced by a rotation at ${r.supersededAt} and its 24-hour overlap ended at ${r.validUntil}, so the control plane refuses it now; write the value the rotation issued (the rotate call's answer) into the control Secret, key "control", or ${NEW_INSTALL_COMMAND}`;
  }
}

/** The assignment with its S3 secrets unsealed: the one place they leave the store. */
export function assignmentMessage(store: Store, ev: Evaluation): ControlMessage {
  const assignment = fromJson(AssignmentSchema, { ...(store.assignmentSpec(ev) as Record<string, JsonValue>), evaluationId: ev.id });
  return create(ControlMessageSchema, { msg: { case: 'assignment', value: assignment } });
}

export function cancellationMessage(ev: Evaluation): ControlMessage {
  return create(ControlMessageSchema, {
    msg: { case: 'cancellation', value: { evaluationId: ev.id, reason: ev.cancelReason ?? '' } },
  });
}

export function rotationMessage(registryHost: string, clusterId: string, purpose: CredentialPurpose, value: string, oldValidUntil: string | null): ControlMessage {
  return create(ControlMessageSchema, {
    msg: {
      case: 'credentialRotation',
      value: {
        purpose,
        value: credentialWireValue(registryHost, clusterId, purpose, value),
        ...(oldValidUntil ? { oldValidUntil: timestampFromDate(new Date(oldValidUntil)) } : {}),
      },
    },
  });
}

/** Where evaluations upload their results: sent after Welcome and on every change. */
export function outputHostsMessage(hosts: readonly string[]): ControlMessage {
  return create(ControlMessageSchema, { msg: { case: 'outputHosts', value: { hosts: [...hosts] } } });
}

/** What the platform has decided about the cluster (draining): sent after Welcome and on every change. */
export function clusterStateMessage(c: Cluster): ControlMessage {
  return create(ControlMessageSchema, {
    msg: { case: 'clusterState', value: { draining: c.drainingSince !== null, ...(c.drainingSince ? { drainingSince: timestampFromDate(new Date(c.drainingSince)) } : {}) } },
  });
}

/**
 * Sends an assignment into the session; true when sent. One that carries secrets (S3 keys, presigned URLs, secret
 * environment values) goes only to a session opened with the current control credential: a superseded one (still
 * accepted during its overlap) may be held by whoever the rotation meant to shut out, so it waits, with a line
 * saying so, and is sent when the agent connects with the current value.
 */
export function deliverAssignment(store: Store, session: LiveSession, ev: Evaluation, log: Logger): boolean {
  if (!session.currentCredential && store.carriesSecrets(ev.id)) {
    log.warn(
      { clusterId: session.clusterId, sessionId: session.id, evaluationId: ev.id },
      `assignment ${ev.id} held back: it carries secrets (S3 keys, presigned URLs or secret environment values) and this session was opened with a superseded control credential; it is sent when the agent connects with the current control value (write the rotate call's value into the control Secret if the agent does not have it)`,
    );
    return false;
  }
  session.outbox.push(assignmentMessage(store, ev));
  store.markAssignmentSent(ev.id);
  return true;
}

/** Sends every assignment the cluster has not acknowledged (those with secrets only on a current credential), then every pending cancellation. */
export function sendBacklog(store: Store, session: LiveSession, log: Logger): void {
  for (const ev of store.unacknowledgedAssignments(session.clusterId)) deliverAssignment(store, session, ev, log);
  for (const ev of store.pendingCancellations(session.clusterId)) session.outbox.push(cancellationMessage(ev));
}

/** Metadata of a session refused for the agent's version: the agent tells this refusal from others by it. */
export const VERSION_SKEW_HEADER = 'rlmesh-version-skew';
export const CONTROL_PLANE_VERSION_HEADER = 'rlmesh-control-plane-version';

/**
 * The first message of the session, which must be Hello; nothing is sent before it arrives,
 * so an agent outside the version policy is never handed an assignment or a credential.
 */
async function firstHello(incoming: AsyncIterator<AgentMessage>, timeoutMs: number, signal: AbortSignal): Promise<Hello | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, fail) => {
    timer = setTimeout(
      () => fail(new ConnectError(`no Hello from the agent within ${Math.round(timeoutMs / 1000)} s of opening the session; the session is closed and the agent should reconnect`, Code.DeadlineExceeded)),
      timeoutMs,
    );
  });
  const aborted = new Promise<IteratorResult<AgentMessage>>((done) => signal.addEventListener('abort', () => done({ done: true, value: undefined }), { once: true }));
  try {
    const r = await Promise.race([incoming.next(), timeout, aborted]);
    if (r.done) return undefined;
    if (r.value.msg.case !== 'hello') {
      throw new ConnectError(
        `the session's first message was ${r.value.msg.case ?? 'empty'}, not Hello: an agent announces its cluster and version first; run a released agent (helm upgrade rlmesh <chart> --reuse-values)`,
        Code.InvalidArgument,
      );
    }
    return r.value.msg.value;
  } finally {
    clearTimeout(timer);
  }
}

const ack = (ids: string[]): ControlMessage => create(ControlMessageSchema, { msg: { case: 'ack', value: { ids } } });

async function* runSession(opts: SessionOptions, requests: AsyncIterable<AgentMessage>, ctx: HandlerContext): AsyncGenerator<ControlMessage> {
  const { store, sessions, log } = opts;
  let clusterId: string;
  let credential: string;
  let current: boolean;
  try {
    ({ clusterId, credential, current } = authenticate(store, ctx.requestHeader.get('authorization')));
  } catch (err) {
    const e = ConnectError.from(err);
    log.warn({ cause: e.metadata.get('rlmesh-auth-cause'), reason: e.rawMessage }, 'session refused');
    throw e;
  }
  // Rotations (control, pull and relay values), and assignments that carry secrets, go only to a session opened with
  // the current control credential. One opened with a superseded credential (allowed during the overlap, for an agent
  // that has not stored the new value yet) gets none: whoever holds an old value must not be handed the new ones. Such an agent keeps working
  // until the overlap ends; the new value reaches it through the Secret (the rotate call's answer).
  // Hello first: whose cluster, which agent version. A refused version ends the session here with one line.
  const incoming = requests[Symbol.asyncIterator]();
  const helloLog = log.child({ clusterId });
  const acceptHello = (h: Hello): SkewVerdict => {
    if (h.clusterId && h.clusterId !== clusterId) {
      throw new ConnectError(
        `hello names cluster ${h.clusterId} but the control credential belongs to cluster ${clusterId}; the control Secret's keys "control" and "cluster-id" must come from the same join`,
        Code.PermissionDenied,
      );
    }
    store.recordHello(clusterId, h.agentVersion, h.kubernetesVersion);
    const skew = agentSkew(opts.version, h.agentVersion);
    if (skew.verdict === 'unsupported') {
      helloLog.warn({ agentVersion: h.agentVersion, controlPlaneVersion: opts.version }, `session refused: ${skew.line}`);
      throw new ConnectError(skew.line, Code.FailedPrecondition, { [VERSION_SKEW_HEADER]: skew.verdict, [CONTROL_PLANE_VERSION_HEADER]: opts.version });
    }
    if (skew.verdict === 'oldest') helloLog.warn({ agentVersion: h.agentVersion, controlPlaneVersion: opts.version }, skew.line);
    return skew;
  };
  const hello = await firstHello(incoming, opts.silenceTimeoutMs, ctx.signal);
  if (!hello) return;
  const skew = acceptHello(hello);

  const session: LiveSession = { id: `s_${randomBase62(16)}`, clusterId, outbox: new Outbox<ControlMessage>(), openedAt: new Date(), currentCredential: current };
  const out = session.outbox;
  const slog = log.child({ clusterId, sessionId: session.id });

  sessions.open(session, () => new ConnectError('this session was replaced by a newer session of the same cluster (only one agent may be connected)', Code.Aborted));
  store.setConnected(clusterId, true);
  slog.info({ currentCredential: current }, current ? 'session opened' : 'session opened with a superseded control credential (within its overlap): it gets no credential rotations');

  out.push(
    create(ControlMessageSchema, {
      msg: {
        case: 'welcome',
        value: {
          sessionId: session.id,
          serverTime: timestampFromDate(new Date()),
          pingIntervalSeconds: Math.max(1, Math.round(opts.pingIntervalMs / 1000)),
          controlPlaneVersion: opts.version,
          versionNotice: skew.verdict === 'oldest' ? skew.line : '',
        },
      },
    }),
  );
  const c = store.getCluster(clusterId);
  if (c) out.push(clusterStateMessage(c));
  out.push(outputHostsMessage(opts.platform.outputHosts));
  if (session.currentCredential) for (const r of store.undeliveredRotations(clusterId)) out.push(rotationMessage(opts.registryHost, clusterId, r.purpose, r.value, r.oldValidUntil));
  sendBacklog(store, session, slog);
  const ackKnown = (h: Hello): void => {
    const known = store.knownUpdateIds(clusterId, h.pendingUpdateIds);
    if (known.length > 0) out.push(ack(known));
    slog.info({ agentVersion: h.agentVersion, kubernetesVersion: h.kubernetesVersion, versionSkew: skew.verdict, pending: h.pendingUpdateIds.length, alreadyStored: known.length }, 'hello');
  };
  ackKnown(hello);

  let lastHeard = Date.now();
  let lastTouch = 0;
  // an unconfirmed rotation is sent again while the session lives: an agent that could not store it
  // (its API server away) must not be left with a credential that expires under a session that stays up
  let lastRotationSend = Date.now();
  const resendMs = opts.rotationResendMs ?? 60_000;
  const ping = setInterval(() => {
    try {
      // A credential that expired or was revoked during the session ends it.
      const auth = store.authenticate('control', credential);
      if (!auth.ok) return out.fail(new ConnectError(authFailureMessage(auth), Code.Unauthenticated, { 'rlmesh-auth-cause': auth.cause }));
      out.push(create(ControlMessageSchema, { msg: { case: 'ping', value: { nonce: randomBase62(12), sentAt: timestampFromDate(new Date()) } } }));
      if (Date.now() - lastRotationSend >= resendMs) {
        lastRotationSend = Date.now();
        const c = store.getCluster(clusterId);
        if (c) out.push(clusterStateMessage(c));
        if (session.currentCredential) for (const r of store.undeliveredRotations(clusterId)) out.push(rotationMessage(opts.registryHost, clusterId, r.purpose, r.value, r.oldValidUntil));
      }
    } catch (err) {
      slog.error({ err }, 'ping failed');
      out.fail(new ConnectError('the control plane could not check the session; the agent should reconnect', Code.Unavailable));
    }
  }, opts.pingIntervalMs);
  const watchdog = setInterval(() => {
    if (Date.now() - lastHeard > opts.silenceTimeoutMs) {
      out.fail(new ConnectError(`no message from the agent for ${Math.round(opts.silenceTimeoutMs / 1000)} s; the session is closed and the agent should reconnect`, Code.DeadlineExceeded));
    }
  }, Math.max(100, Math.min(opts.pingIntervalMs, opts.silenceTimeoutMs / 3)));
  const onAbort = (): void => out.close();
  ctx.signal.addEventListener('abort', onAbort);

  const handle = (m: AgentMessage): void => {
    lastHeard = Date.now();
    const now = store.now().getTime();
    if (now - lastTouch >= 1000) {
      store.touch(clusterId);
      lastTouch = now;
    }
    switch (m.msg.case) {
      case 'hello': {
        acceptHello(m.msg.value);
        ackKnown(m.msg.value);
        return;
      }
      case 'evaluationUpdate': {
        const u = m.msg.value;
        if (!u.id || !u.evaluationId) {
          slog.warn({ evaluationId: u.evaluationId }, 'evaluation update without an id or evaluation id ignored; the agent must give every update both');
          return;
        }
        const outcome = store.applyUpdate(clusterId, {
          id: u.id,
          evaluationId: u.evaluationId,
          phase: u.phase,
          reason: u.reason,
          message: u.message,
          exitCode: u.hasExitCode ? u.exitCode : null,
          pod: u.pod,
          node: u.node,
          observedAt: u.observedAt ? timestampDate(u.observedAt).toISOString() : null,
          sequence: Number(u.sequence),
        });
        if (typeof outcome === 'object') {
          // Not stored and not acked: an Ack means "stored", and the protocol has no refusal message. The agent keeps
          // the update in its spool and offers it again after a reconnect, where it is refused again; the other
          // cluster's evaluation is never touched. A cluster reaches this only with an RLMeshEvaluation whose
          // evaluation id another cluster was given (copied or restored from that cluster).
          slog.warn(
            { updateId: u.id, evaluationId: u.evaluationId, ownerClusterId: outcome.ownerClusterId },
            `evaluation update refused (not stored, not acked): evaluation ${u.evaluationId} belongs to cluster ${outcome.ownerClusterId}, not to ${clusterId}, and a cluster reports only its own evaluations; delete the RLMeshEvaluation ${u.evaluationId} from cluster ${clusterId} if it was copied there`,
          );
          return;
        }
        if (outcome === 'duplicate') slog.debug({ updateId: u.id }, 'duplicate evaluation update acked again');
        out.push(ack([u.id]));
        return;
      }
      case 'nodeReport': {
        store.recordNodeReport(clusterId, toJson(NodeReportSchema, m.msg.value));
        if (m.msg.value.id) out.push(ack([m.msg.value.id]));
        return;
      }
      case 'preflightReport': {
        store.recordPreflight(clusterId, toJson(PreflightReportSchema, m.msg.value));
        if (m.msg.value.id) out.push(ack([m.msg.value.id]));
        return;
      }
      case 'operatorDrain': {
        // the operator's drain is the cluster's to decide: recorded and shown, and no new assignment is sent while it lasts
        const d = m.msg.value;
        const reported = d.since ? timestampDate(d.since) : undefined;
        const since = d.draining ? (reported && !Number.isNaN(reported.getTime()) ? reported : store.now()).toISOString() : null;
        const before = store.getCluster(clusterId);
        const after = store.setOperatorDrain(clusterId, since);
        if (Boolean(before?.operatorDrainingSince) === d.draining) return;
        slog.info({ operatorDrainingSince: since }, d.draining ? "the cluster's operator drained the cluster (rlmesh drain): no new assignments" : "the cluster's operator ended its drain");
        // what waited meanwhile goes out now, unless the platform drains too
        if (!d.draining && after && !after.drainingSince) sendBacklog(store, session, slog);
        return;
      }
      case 'credentialRotated':
        if (!session.currentCredential) {
          slog.warn({ purpose: m.msg.value.purpose }, 'CredentialRotated ignored: this session was opened with a superseded control credential and was sent no rotation to confirm');
          return;
        }
        store.confirmRotation(clusterId, m.msg.value.purpose);
        slog.info({ purpose: m.msg.value.purpose }, 'agent confirmed a credential rotation');
        return;
      case 'heartbeat':
      case 'pong':
      case undefined:
        return;
    }
  };

  void (async () => {
    for (let r = await incoming.next(); !r.done; r = await incoming.next()) handle(r.value);
    out.close();
  })().catch((err: unknown) => {
    if (!(err instanceof ConnectError)) slog.error({ err }, 'session failed while handling an agent message');
    out.fail(err instanceof ConnectError ? err : new ConnectError('the control plane failed to handle a message; the agent should reconnect', Code.Internal));
  });

  try {
    yield* out;
  } finally {
    clearInterval(ping);
    clearInterval(watchdog);
    ctx.signal.removeEventListener('abort', onAbort);
    try {
      if (sessions.release(session)) store.setConnected(clusterId, false);
    } catch (err) {
      // the store is already closed when the whole control plane shuts down; a restart marks every cluster Disconnected
      slog.debug({ err }, 'could not record the disconnect');
    }
    slog.info('session closed');
  }
}
