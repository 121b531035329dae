// The control plane's HTTP API. Public: /v1/info and the join. Everything else
// is the admin API (what the dashboard does), behind "Bearer <admin token>".
// Errors are JSON {code, message}; the message says what happened and what to do.
import type { ServerResponse } from 'node:http';
import { fromJson, type JsonValue } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectNodeAdapterOptions } from '@connectrpc/connect-node';
import type { Logger } from 'pino';
import { z } from 'zod';
import { AssignmentSchema } from '../lib/gen/rlmesh/v1/session_pb.ts';
import type { LiveSessions } from './live-sessions.ts';
import type { RelaySeriesStore } from './metrics-relay.ts';
import { helmCommand, installCommands as installCommandsFor } from './install-command.ts';
import { credentialWireValue } from './pull-secret.ts';
import { CREDENTIAL_PURPOSES, dockerConfigJson, type CredentialPurpose } from '../lib/credential-secret.ts';
import { looksLikeJoinToken, sameSecret } from './secrets.ts';
import { cancellationMessage, clusterStateMessage, deliverAssignment, outputHostsMessage, rotationMessage, sendBacklog } from './agent-session.ts';
import { splitSecrets, type Cluster, type Evaluation, type Store } from './store.ts';
import { errorMessage } from '../lib/error-fields.ts';

export type ApiOptions = {
  store: Store;
  sessions: LiveSessions;
  log: Logger;
  adminToken: string;
  grpc: { host: string; port: number };
  registryHost: string;
  /** what /v1/info and the sessions name as output hosts; PUT /v1/output-hosts changes it (in memory: a restart goes back to --output-host) */
  platform: { outputHosts: string[] };
  chartRef: string;
  chartVersion: string;
  controlPlaneVersion: string;
  relay: RelaySeriesStore;
  /** Present only when started with --test-clock: POST /v1/test/clock/advance moves time forward. */
  advanceClock?: (ms: number) => Date;
  /**
   * Only with --test-ignore-drain: a new evaluation for a draining cluster is stored and sent anyway, as a buggy or
   * hostile platform would, so that tests can show the cluster's own drain refusing it.
   */
  ignoreDrain?: boolean;
};

type NodeHandlerFn = NonNullable<ConnectNodeAdapterOptions['fallback']>;
type Req = Parameters<NodeHandlerFn>[0];
type Res = Parameters<NodeHandlerFn>[1];

class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly extra: Record<string, unknown>;
  constructor(status: number, code: string, message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.extra = extra;
  }
}

const NEW_INSTALL_COMMAND = 'a used or expired token needs a new install command: open Clusters → New install command and run it (as helm upgrade --install on an installed cluster)';
const MAX_BODY = 1024 * 1024;

const joinBody = z.object({ token: z.string(), facts: z.record(z.string(), z.unknown()).default({}) });
const createClusterBody = z.object({ name: z.string().min(1).max(100).optional() }).default({});
const cancelBody = z.object({ reason: z.string().max(1000).optional() }).default({});
const advanceBody = z.object({ ms: z.number().int().nonnegative() });
// any strings: the agent judges them, and tests send it what a hostile platform would
const outputHostsBody = z.object({ hosts: z.array(z.string().max(300)).max(1000) });

export function createApiHandler(opts: ApiOptions): NodeHandlerFn {
  const { store, sessions, log } = opts;

  const requireAdmin = (req: Req): void => {
    const m = /^Bearer\s+(\S+)$/i.exec(String(req.headers.authorization ?? ''));
    if (!m) throw new ApiError(401, 'unauthenticated', 'the admin API needs the header "authorization: Bearer <admin token>"; the control plane prints adminToken when it starts (or set it with --admin-token)');
    if (!sameSecret(m[1]!, opts.adminToken)) throw new ApiError(401, 'unauthenticated', 'the admin token is not this control plane\'s; use the adminToken it printed at start (or the --admin-token it was started with)');
  };

  const cluster = (id: string): Cluster => {
    const c = store.getCluster(id);
    if (!c) throw new ApiError(404, 'not_found', `no cluster ${id}; list clusters with GET /v1/clusters`);
    return c;
  };
  const liveCluster = (id: string): Cluster => {
    const c = cluster(id);
    if (c.status === 'Archived') throw new ApiError(409, 'cluster_archived', `cluster ${id} was archived at ${c.archivedAt} and cannot be changed; connect it again with POST /v1/clusters`);
    return c;
  };
  const evaluation = (id: string): Evaluation => {
    const e = store.getEvaluation(id);
    if (!e) throw new ApiError(404, 'not_found', `no evaluation ${id}; evaluations are submitted with POST /v1/clusters/{id}/evaluations`);
    return e;
  };

  const installCommands = (clusterId: string, upgrade: boolean) => {
    const { token, expiresAt } = store.issueJoinToken(clusterId);
    const helm = helmCommand({ chartRef: opts.chartRef, chartVersion: opts.chartVersion, existing: upgrade });
    // installCommandPrompt keeps the token out of shell history: paste it at the hidden prompt (bash, zsh or sh)
    return { clusterId, joinToken: token, expiresAt, ...installCommandsFor(helm, token) };
  };

  const clusterView = (c: Cluster) => {
    // the agent's last preflight says whether the cluster can run evaluations (NetworkPolicy enforcement seen)
    const p = store.preflight(c.id) as { evaluationsBlocked?: boolean; evaluationsBlockedReason?: string } | null;
    const blocked = p?.evaluationsBlocked ? { evaluationsBlockedReason: p.evaluationsBlockedReason ?? '' } : {};
    return {
      ...c,
      live: sessions.get(c.id) !== undefined,
      draining: c.drainingSince !== null,
      operatorDraining: c.operatorDrainingSince !== null,
      unfinishedEvaluations: store.unfinishedEvaluations(c.id),
      acceptsEvaluations: p ? !p.evaluationsBlocked : null,
      ...blocked,
    };
  };
  /** Drain on or off: stored, then told to the live session; a drain's end sends what waited meanwhile. */
  const setDraining = (id: string, draining: boolean) => {
    const c = store.setDraining(liveCluster(id).id, draining)!;
    const live = sessions.get(c.id);
    sessions.send(c.id, clusterStateMessage(c));
    if (!draining && live) sendBacklog(store, live, log);
    log.info({ clusterId: c.id, draining }, draining ? 'cluster draining: no new assignments' : 'cluster drain ended');
    return clusterView(c);
  };
  const evaluationView = (e: Evaluation) => ({ ...e, spec: redactSpec(e.spec), updates: store.listUpdates(e.id) });

  type Route = { method: string; path: RegExp; admin: boolean; handle: (m: string[], body: () => Promise<unknown>, query: URLSearchParams) => unknown };
  const routes: Route[] = [
    { method: 'GET', path: /^\/healthz$/, admin: false, handle: () => ({ ok: true }) },
    {
      method: 'GET',
      path: /^\/v1\/info$/,
      admin: false,
      handle: () => ({
        grpc: { host: opts.grpc.host, port: opts.grpc.port, tls: true },
        registryHost: opts.registryHost,
        outputHosts: opts.platform.outputHosts,
        versions: { controlPlane: opts.controlPlaneVersion, protocol: 'rlmesh.v1', chart: opts.chartVersion },
      }),
    },
    {
      method: 'POST',
      path: /^\/v1\/clusters\/join$/,
      admin: false,
      handle: async (_m, body) => {
        const parsed = joinBody.safeParse(await body());
        if (!parsed.success) throw new ApiError(400, 'invalid_request', 'the join body must be JSON {"token": "rlm_jt_…", "facts": {…}}');
        const { token, facts } = parsed.data;
        if (!looksLikeJoinToken(token)) {
          throw new ApiError(401, 'token_invalid', `this is not an rlmesh join token (expected rlm_jt_ followed by 32 or more letters and digits); copy the whole token from the install command, or get a new one: open Clusters → New install command`);
        }
        const r = store.redeemJoinToken(token, facts, facts.observability === true);
        if (!r.ok) {
          switch (r.problem) {
            case 'token_used':
              throw new ApiError(409, 'token_used', `this join token was already used at ${r.at} (a join token works once); ${NEW_INSTALL_COMMAND}`);
            case 'token_expired':
              throw new ApiError(401, 'token_expired', `this join token expired at ${r.at} (a join token is valid for one hour); ${NEW_INSTALL_COMMAND}`);
            case 'token_revoked':
              throw new ApiError(401, 'token_invalid', `this join token was revoked at ${r.at} because cluster ${r.clusterId} was archived; connect the cluster again: open Clusters → Connect your cluster`, { cause: 'revoked' });
            case 'token_invalid':
              throw new ApiError(401, 'token_invalid', `this join token is not known to this control plane (mistyped, or issued by another control plane); copy it again from the install command, or get a new one: open Clusters → New install command`);
          }
        }
        log.info({ clusterId: r.cluster.id, observability: r.credentials.relay !== undefined }, 'cluster joined');
        return {
          clusterId: r.cluster.id,
          control: r.credentials.control,
          pull: dockerConfigJson(opts.registryHost, r.cluster.id, r.credentials.pull!),
          ...(r.credentials.relay ? { relay: r.credentials.relay } : {}),
          registryHost: opts.registryHost,
        };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/clusters$/,
      admin: true,
      handle: async (_m, body) => {
        const parsed = createClusterBody.safeParse((await body()) ?? {});
        if (!parsed.success) throw new ApiError(400, 'invalid_request', 'the body must be JSON {"name": "<1-100 characters>"} or empty');
        const c = store.createCluster(parsed.data.name ?? `cluster-${store.listClusters().length + 1}`);
        log.info({ clusterId: c.id }, 'cluster registered');
        return [201, { name: c.name, ...installCommands(c.id, false) }];
      },
    },
    { method: 'GET', path: /^\/v1\/clusters$/, admin: true, handle: () => ({ clusters: store.listClusters().map(clusterView) }) },
    {
      method: 'GET',
      path: /^\/v1\/clusters\/(c_[0-9a-z]+)$/,
      admin: true,
      handle: ([, id]) => {
        const c = cluster(id!);
        return {
          ...clusterView(c),
          credentials: store.credentialSummary(c.id),
          nodeReport: store.nodeReport(c.id),
          preflight: store.preflight(c.id),
          updates: store.updateCounts(c.id),
        };
      },
    },
    { method: 'POST', path: /^\/v1\/clusters\/(c_[0-9a-z]+)\/install-command$/, admin: true, handle: ([, id]) => installCommands(liveCluster(id!).id, true) },
    {
      method: 'POST',
      path: /^\/v1\/clusters\/(c_[0-9a-z]+)\/credentials\/([a-z]+)\/rotate$/,
      admin: true,
      handle: ([, id, purposeIn]) => {
        const c = liveCluster(id!);
        if (!(CREDENTIAL_PURPOSES as readonly string[]).includes(purposeIn!)) {
          throw new ApiError(400, 'invalid_request', `unknown credential purpose "${purposeIn}"; rotate one of ${CREDENTIAL_PURPOSES.join(', ')}`);
        }
        const purpose = purposeIn as CredentialPurpose;
        if (!store.credentialSummary(c.id).some((k) => k.purpose === purpose && k.current)) {
          throw new ApiError(409, 'no_credential', `cluster ${c.id} has no ${purpose} credential to rotate: ${purpose === 'relay' ? 'it joined without observability; install with --set observability.enabled=true and a new install command' : 'it has not joined yet; run its install command first'}`);
        }
        const r = store.rotateCredential(c.id, purpose);
        const delivered = sessions.sendRotation(c.id, rotationMessage(opts.registryHost, c.id, purpose, r.value, r.oldValidUntil));
        log.info({ clusterId: c.id, purpose, deliveredToSession: delivered }, 'credential rotated');
        return { clusterId: c.id, purpose, value: credentialWireValue(opts.registryHost, c.id, purpose, r.value), oldValidUntil: r.oldValidUntil, deliveredToSession: delivered };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/clusters\/(c_[0-9a-z]+)\/archive$/,
      admin: true,
      handle: ([, id]) => {
        const c = store.archiveCluster(cluster(id!).id)!;
        sessions.get(c.id)?.outbox.fail(
          new ConnectError(`control credential revoked: cluster ${c.id} was archived at ${c.archivedAt}, which revokes all its credentials; connect the cluster again with Clusters → Connect your cluster`, Code.Unauthenticated, { 'rlmesh-auth-cause': 'archived' }),
        );
        log.info({ clusterId: c.id }, 'cluster archived; all its tokens and credentials are revoked');
        return clusterView(store.getCluster(c.id)!);
      },
    },
    { method: 'POST', path: /^\/v1\/clusters\/(c_[0-9a-z]+)\/drain$/, admin: true, handle: ([, id]) => setDraining(id!, true) },
    { method: 'POST', path: /^\/v1\/clusters\/(c_[0-9a-z]+)\/resume$/, admin: true, handle: ([, id]) => setDraining(id!, false) },
    {
      method: 'POST',
      path: /^\/v1\/clusters\/(c_[0-9a-z]+)\/evaluations$/,
      admin: true,
      handle: async ([, id], body) => {
        const c = liveCluster(id!);
        if (c.drainingSince && !opts.ignoreDrain) {
          throw new ApiError(409, 'cluster_draining', `cluster ${c.id} is draining (since ${c.drainingSince}) and takes no new evaluations; submit to another cluster, or end the drain with POST /v1/clusters/${c.id}/resume`);
        }
        if (c.operatorDrainingSince && !opts.ignoreDrain) {
          throw new ApiError(
            409,
            'cluster_drained_by_operator',
            `cluster ${c.id} was drained by its operator on the cluster's side (rlmesh drain, since ${c.operatorDrainingSince}) and refuses new evaluations; submit to another cluster, or ask the cluster's operator to run rlmesh drain --undo`,
          );
        }
        const spec = await body();
        if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) throw new ApiError(400, 'invalid_spec', 'the evaluation spec must be a JSON object (an Assignment in protobuf JSON, without evaluationId)');
        try {
          const a = fromJson(AssignmentSchema, { ...(spec as Record<string, JsonValue>), evaluationId: '' });
          if (!a.image) throw new Error('field image is required');
        } catch (err) {
          throw new ApiError(400, 'invalid_spec', `invalid evaluation spec: ${errorMessage(err)}; fields are image, command, args, env, secretEnv, cpu, memory, gpuCount, gpuVendor, artifacts, deadlineSeconds, nodeSelector`);
        }
        const e = store.createEvaluation(c.id, spec as Record<string, unknown>);
        const live = sessions.get(c.id);
        if (live) deliverAssignment(store, live, e, log);
        log.info({ clusterId: c.id, evaluationId: e.id }, 'evaluation submitted');
        return [201, evaluationView(store.getEvaluation(e.id)!)];
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/clusters\/(c_[0-9a-z]+)\/evaluations$/,
      admin: true,
      handle: ([, id]) => ({ evaluations: store.listEvaluations(cluster(id!).id).map((e) => ({ ...e, spec: redactSpec(e.spec) })) }),
    },
    {
      // what the metrics relay received from the cluster's Prometheus; query parameters filter series by label (e.g. ?__name__=up)
      method: 'GET',
      path: /^\/v1\/clusters\/(c_[0-9a-z]+)\/metrics$/,
      admin: true,
      handle: ([, id], _body, query) => {
        const c = cluster(id!);
        return { ...opts.relay.stats(c.id), matching: opts.relay.series(c.id, Object.fromEntries(query)) };
      },
    },
    { method: 'GET', path: /^\/v1\/evaluations\/([0-9a-z-]+)$/, admin: true, handle: ([, id]) => evaluationView(evaluation(id!)) },
    {
      method: 'POST',
      path: /^\/v1\/evaluations\/([0-9a-z-]+)\/cancel$/,
      admin: true,
      handle: async ([, id], body) => {
        const parsed = cancelBody.safeParse((await body()) ?? {});
        if (!parsed.success) throw new ApiError(400, 'invalid_request', 'the body must be JSON {"reason": "…"} or empty');
        const e = store.requestCancel(evaluation(id!).id, parsed.data.reason ?? 'cancelled by the user')!;
        if (store.pendingCancellations(e.clusterId).some((p) => p.id === e.id)) sessions.send(e.clusterId, cancellationMessage(e));
        log.info({ evaluationId: e.id, clusterId: e.clusterId }, 'evaluation cancel requested');
        return evaluationView(e);
      },
    },
    {
      method: 'PUT',
      path: /^\/v1\/output-hosts$/,
      admin: true,
      handle: async (_m, body) => {
        const parsed = outputHostsBody.safeParse(await body());
        if (!parsed.success) throw new ApiError(400, 'invalid_request', 'the body must be JSON {"hosts": ["outputs.example.com", …]}');
        opts.platform.outputHosts = parsed.data.hosts;
        const sent = sessions.sendAll(outputHostsMessage(parsed.data.hosts));
        log.info({ outputHosts: parsed.data.hosts, sessions: sent }, 'output hosts changed: told every live session');
        return { outputHosts: parsed.data.hosts, sessions: sent };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/test\/clock\/advance$/,
      admin: true,
      handle: async (_m, body) => {
        if (!opts.advanceClock) throw new ApiError(404, 'not_found', 'the test clock is off; start the control plane with --test-clock to move time in tests');
        const parsed = advanceBody.safeParse(await body());
        if (!parsed.success) throw new ApiError(400, 'invalid_request', 'the body must be JSON {"ms": <non-negative integer>}');
        return { now: opts.advanceClock(parsed.data.ms).toISOString() };
      },
    },
  ];

  return (req, res) => {
    const url = new URL(req.url ?? '/', 'https://control-plane');
    const route = routes.find((r) => r.path.test(url.pathname) && r.method === req.method);
    const respond = async (): Promise<[number, unknown]> => {
      if (!route) {
        const other = routes.some((r) => r.path.test(url.pathname));
        throw other
          ? new ApiError(405, 'method_not_allowed', `${req.method} is not supported on ${url.pathname}; see controlplane/README.md for the API`)
          : new ApiError(404, 'not_found', `no endpoint ${req.method} ${url.pathname}; see controlplane/README.md for the API`);
      }
      if (route.admin) requireAdmin(req);
      const out = await route.handle(route.path.exec(url.pathname)!.slice(), () => readJson(req), url.searchParams);
      return Array.isArray(out) && typeof out[0] === 'number' ? (out as [number, unknown]) : [200, out];
    };
    respond().then(
      ([status, body]) => send(res, status, body),
      (err: unknown) => {
        if (err instanceof ApiError) return send(res, err.status, { code: err.code, message: err.message, ...err.extra });
        log.error({ err, path: url.pathname }, 'request failed');
        send(res, 500, { code: 'internal', message: 'the control plane failed to handle this request; retry, and check the control plane log if it persists' });
      },
    );
  };
}

function send(res: Res, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  (res as ServerResponse).writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  (res as ServerResponse).end(text);
}

async function readJson(req: Req): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new ApiError(413, 'too_large', `the request body exceeds ${MAX_BODY} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ApiError(400, 'invalid_json', 'the request body is not valid JSON');
  }
}

/** Artifact credentials in a spec are delivered to the cluster but never shown back (the store keeps them apart, sealed, already). */
function redactSpec(spec: Record<string, unknown> | null): Record<string, unknown> | null {
  return spec ? splitSecrets(spec).spec : spec;
}
