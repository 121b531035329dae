// Trading the join token: GET /v1/info (where the session endpoint is), then
// POST /v1/clusters/join once. Errors come back as JSON {code, message}; the
// agent turns each into one log line with the cause and the fix.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { z } from 'zod';
import type { Logger } from 'pino';
import { createBackoff, sleep } from '../lib/backoff.ts';
import type { RuntimeConfig } from '../lib/runtime-config.ts';
import type { JoinResult } from '../lib/credential-secret.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';
import { outboundProxy, proxyTunnelError, type OutboundProxy } from '../lib/outbound-proxy.ts';
import { controlPlaneCa } from '../lib/control-plane-trust.ts';
import { discoveryPhrase, NEW_INSTALL_COMMAND } from './readiness-phrases.ts';

export const infoSchema = z.object({
  grpc: z.object({ host: z.string().min(1), port: z.number().int().min(1).max(65535), tls: z.boolean().default(true) }),
  registryHost: z.string().optional(),
  outputHosts: z.array(z.string()).optional(),
  versions: z.record(z.string(), z.string()).optional(),
});
export type ControlPlaneInfo = z.infer<typeof infoSchema>;

const joinResultSchema = z.object({
  clusterId: z.string().min(1),
  control: z.string().min(1),
  pull: z.string().min(1),
  relay: z.string().min(1).optional(),
});


/** Why a join failed; `permanent` ones need a person (a new token), the rest are retried as they are. */
export class JoinError extends Error {
  readonly code: string;
  readonly permanent: boolean;
  constructor(code: string, message: string, permanent: boolean) {
    super(message);
    this.code = code;
    this.permanent = permanent;
  }
}

/**
 * `apiHost` and `apiPort` are what the agent was configured with (controlPlane.apiHost;
 * controlPlane.apiPort, which the chart always renders as 443 and only tests set to
 * the ephemeral port of their local control plane): the only endpoint it dials.
 */
export type ControlPlaneClient = {
  baseUrl: string;
  dispatcher: Agent;
  ca: string | undefined;
  apiHost: string;
  apiPort: number;
  /** controlPlane.registryHost: where this installation pulls the runtime's images from */
  registryHost: string;
  proxy: OutboundProxy | undefined;
};

export function controlPlaneClient(cfg: RuntimeConfig): ControlPlaneClient {
  const { apiHost, apiPort, caBundlePath, pinCaBundle } = cfg.controlPlane;
  let bundle: string | undefined;
  if (caBundlePath) {
    try {
      bundle = readFileSync(caBundlePath, 'utf8');
    } catch (err) {
      throw new Error(`cannot read controlPlane.caBundlePath ${caBundlePath}: ${errorMessage(err)}; mount the CA bundle there or unset it to trust the system roots`);
    }
  }
  const ca = controlPlaneCa(bundle, pinCaBundle);
  // behind a corporate proxy, discovery and the join go through a CONNECT tunnel, TLS inside it
  const configured = outboundProxy(cfg.controlPlane.proxy);
  const proxy = configured?.appliesTo(apiHost) ? configured : undefined;
  const connect = proxy ? proxy.undiciConnector({ ca, timeoutMs: 10_000 }) : { ...(ca ? { ca } : {}), timeout: 10_000 };
  const dispatcher = new Agent({ connect, headersTimeout: 15_000, bodyTimeout: 15_000 });
  return { baseUrl: `https://${apiHost}${apiPort === 443 ? '' : `:${apiPort}`}`, dispatcher, ca, apiHost, apiPort, registryHost: cfg.controlPlane.registryHost, proxy };
}

async function call(cp: ControlPlaneClient, method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  let res;
  try {
    res = await request(cp.baseUrl + path, {
      method,
      dispatcher: cp.dispatcher,
      headers: { 'content-type': 'application/json', accept: 'application/json', 'user-agent': 'rlmesh-cluster-agent' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (err) {
    // the corporate proxy's own answer says what to fix
    const tunnel = proxyTunnelError(err);
    if (tunnel) throw new JoinError('unreachable', `cannot reach the control plane at ${cp.baseUrl}: ${tunnel.message}`, false);
    const { err: message, code } = errorFields(err);
    throw new JoinError(
      'unreachable',
      `cannot reach the control plane at ${cp.baseUrl} (${code ?? message}): check that the cluster can open outbound HTTPS to it (firewall, proxy, DNS)` +
        (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code ?? '') ? ' and that controlPlane.caBundlePath holds its CA' : ''),
      false,
    );
  }
  const text = await res.body.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, json };
}

export async function fetchInfo(cp: ControlPlaneClient): Promise<ControlPlaneInfo> {
  const { status, json } = await call(cp, 'GET', '/v1/info');
  const parsed = infoSchema.safeParse(json);
  if (status !== 200 || !parsed.success) {
    throw new JoinError('bad_info', `GET ${cp.baseUrl}/v1/info answered ${status} without the session address; check controlPlane.apiHost points at the rlmesh API`, false);
  }
  checkSessionEndpoint(cp, parsed.data.grpc);
  checkRegistryHost(cp, parsed.data.registryHost);
  return parsed.data;
}

/**
 * The join's pull credential is for the control plane's registry, and the chart pulls the
 * runtime's images from controlPlane.registryHost: when the two differ (a staging API with the
 * production registry, or the other way round), every pull after the join would go to a host
 * the credential is not for. Refused here, before the token is spent, so fixing the value and
 * upgrading with the same token works.
 */
export function checkRegistryHost(cp: Pick<ControlPlaneClient, 'baseUrl' | 'registryHost'>, advertised: string | undefined): void {
  if (advertised === undefined || bareHost(advertised) === bareHost(cp.registryHost)) return;
  throw new JoinError(
    'registry_host_mismatch',
    `GET ${cp.baseUrl}/v1/info says this control plane's registry is ${advertised}, but the chart was installed with controlPlane.registryHost=${cp.registryHost}: ` +
      `its pull credential would be for ${advertised} while the runtime's images are pulled from ${cp.registryHost}, so the agent has not used the join token; ` +
      `set controlPlane.registryHost=${advertised} (helm upgrade --reuse-values --set controlPlane.registryHost=${advertised}), or check that controlPlane.apiHost is the control plane of the cell you meant`,
    true,
  );
}

const bareHost = (h: string) => h.trim().toLowerCase().replace(/\.$/, '').replace(/^\[(.*)\]$/, '$1');

/**
 * /v1/info is not trusted to say where the control credential goes: the session
 * endpoint it names must be the configured API host, on the configured port, with
 * TLS. Anything else (a compromised or impersonated API, a proxy rewriting the
 * answer) would otherwise receive the cluster's credential and send it work.
 */
export function checkSessionEndpoint(cp: Pick<ControlPlaneClient, 'baseUrl' | 'apiHost' | 'apiPort'>, grpc: ControlPlaneInfo['grpc']): void {
  const problems = [
    bareHost(grpc.host) !== bareHost(cp.apiHost) ? `host ${grpc.host} is not the configured API host ${cp.apiHost}` : '',
    grpc.port !== cp.apiPort ? `port ${grpc.port} is not the configured port ${cp.apiPort}` : '',
    grpc.tls ? '' : 'it asks for no TLS',
  ].filter(Boolean);
  if (problems.length === 0) return;
  throw new JoinError(
    'untrusted_session_endpoint',
    `GET ${cp.baseUrl}/v1/info named the session endpoint ${grpc.host}:${grpc.port}${grpc.tls ? '' : ' without TLS'}, which the agent refuses (${problems.join('; ')}): ` +
      `the control credential goes only to the API host the agent was installed with, on port ${cp.apiPort} over TLS, so a wrong or tampered answer cannot send it elsewhere; ` +
      'check that controlPlane.apiHost is the rlmesh API and that nothing between the cluster and it (a proxy, a DNS override) answers in its place; the agent retries',
    true,
  );
}

export async function join(cp: ControlPlaneClient, token: string, facts: Record<string, unknown>): Promise<JoinResult> {
  const { status, json } = await call(cp, 'POST', '/v1/clusters/join', { token, facts });
  if (status === 200 || status === 201) {
    const parsed = joinResultSchema.safeParse(json);
    if (!parsed.success) throw new JoinError('bad_response', `the control plane's join answer lacks ${parsed.error.issues[0]?.path.join('.')}; is controlPlane.apiHost the rlmesh API?`, false);
    return parsed.data;
  }
  const err = (json ?? {}) as { code?: string; message?: string };
  const code = err.code ?? `http_${status}`;
  const said = err.message ? `: ${err.message}` : '';
  switch (code) {
    case 'token_used':
      throw new JoinError(code, `join token already used${said}${mentionsFix(said)}`, true);
    case 'token_expired':
      throw new JoinError(code, `join token expired${said}${mentionsFix(said)}`, true);
    case 'token_invalid':
      throw new JoinError(code, `join token invalid${said}${mentionsFix(said)}`, true);
    default:
      throw new JoinError(code, `the control plane refused the join with HTTP ${status}${said}; the agent retries`, status >= 400 && status < 500);
  }
}

const mentionsFix = (said: string) => (/new install command/i.test(said) ? '' : `; ${NEW_INSTALL_COMMAND}`);

/** GET /v1/info until it answers (the control plane may be away at start); each failure says why, as the readiness problem too. */
export async function discoverUntilReachable(
  cp: ControlPlaneClient,
  o: { backoffBaseMs: number; backoffMaxMs: number; signal: AbortSignal; log: Logger; onProblem: (problem: string | undefined) => void },
): Promise<ControlPlaneInfo> {
  const backoff = createBackoff(o.backoffBaseMs, o.backoffMaxMs);
  for (;;) {
    try {
      const info = await fetchInfo(cp);
      o.onProblem(undefined);
      return info;
    } catch (err) {
      const delay = backoff.next();
      o.onProblem(discoveryPhrase(err instanceof JoinError ? err.code : undefined));
      o.log.error({ ...(err instanceof JoinError ? { code: err.code } : {}), retryInMs: delay }, err instanceof JoinError ? err.message : `GET /v1/info failed: ${errorMessage(err)}`);
      await sleep(delay, o.signal);
    }
  }
}
