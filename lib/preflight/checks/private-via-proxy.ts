// Whether the corporate proxy (controlPlane.proxy) opens a private destination
// when asked: CONNECT to the `kubernetes` Service's ClusterIP on its port. That
// address exists in every cluster, is handed to every pod (KUBERNETES_SERVICE_HOST,
// no API read), lies in the cluster's own Service range (private, inside the
// cluster) and belongs to no destination on the internet, so a proxy with
// rules for private destinations refuses it; the API server answers on it
// wherever the proxy can route to the cluster (a proxy on a node or in the
// cluster reaches it through kube-proxy). Only the CONNECT is sent: an opened
// tunnel is closed at once, nothing passes through it.
//
// The egress proxy asks the corporate proxy only for addresses it checked, so
// a proxy that opens private destinations is no hole in the evaluations'
// fence by itself; it is one for names passed unchecked
// (controlPlane.proxy.passUnresolvedNames) and for anything else that reaches
// the proxy by name.
import * as k8s from '@kubernetes/client-node';
import { errorMessage } from '../../error-fields.ts';
import { ProxyTunnelError, type OutboundProxy } from '../../outbound-proxy.ts';
import type { CheckResult, PreflightContext } from '../types.ts';

export const PRIVATE_VIA_PROXY = 'private-via-proxy';

export type PrivateProbe = {
  /** the CONNECT target, host:port (IPv6 in brackets) */
  target: string;
  proxy: string;
  /** the tunnel opened (200) */
  opened: boolean;
  /** the proxy's status when it did not */
  status?: number;
  /** why there is no answer (unreachable, timeout) */
  error?: string;
  /** the CONNECT carried no credentials (the CLI reads no Secret) */
  withoutCredentials: boolean;
};

const REFUSE_PRIVATE =
  'make the corporate proxy refuse CONNECT and requests to private, loopback, link-local (cloud metadata) and your cluster\'s ranges (Squid: acl private dst 10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 169.254.0.0/16 127.0.0.0/8 fc00::/7 fe80::/10, then http_access deny private before any allow)';

export async function probePrivate(proxy: OutboundProxy, host: string, port: number, withoutCredentials: boolean, timeoutMs = 5000): Promise<PrivateProbe> {
  const target = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const base = { target, proxy: proxy.shown, withoutCredentials };
  try {
    const socket = await proxy.tunnel(host, port, { timeoutMs });
    socket.destroy();
    return { ...base, opened: true };
  } catch (err) {
    if (err instanceof ProxyTunnelError && err.status !== undefined) return { ...base, opened: false, status: err.status };
    return { ...base, opened: false, error: errorMessage(err) };
  }
}

export function privateDestinationVerdict(p: PrivateProbe): CheckResult {
  const id = PRIVATE_VIA_PROXY;
  const asked = `asked the corporate proxy ${p.proxy} for CONNECT ${p.target} (the kubernetes Service's ClusterIP, a private address inside this cluster)${p.withoutCredentials ? ' without credentials' : ''}`;
  if (p.opened) {
    return {
      id, verdict: 'fail',
      found: `${asked}: it opened the tunnel (200), so it connects to private destinations inside the cluster when asked`,
      fix: `The egress proxy hands it only addresses it checked, but a name it resolves itself (controlPlane.proxy.passUnresolvedNames) or any other client can reach your cluster and private network through it: ${REFUSE_PRIVATE}; then run preflight again.`,
    };
  }
  if (p.status === 407) {
    return {
      id, verdict: 'warn',
      found: `${asked}: it wants credentials (407) before it says whether it would`,
      fix: p.withoutCredentials
        ? 'rlmesh preflight reads no Secret: see the agent\'s own check, with the Secret controlPlane.proxy.existingSecret, in rlmesh status (or run rlmesh preflight where the proxy needs no credentials).'
        : 'Put the username and password the proxy accepts in the Secret controlPlane.proxy.existingSecret (the outbound-443 check says the same).',
    };
  }
  if (p.status !== undefined && p.status >= 400 && p.status < 500) {
    return { id, verdict: 'pass', found: `${asked}: it refused (${p.status})`, fix: 'Nothing to do: keep its rules refusing private destinations.' };
  }
  const answer = p.status !== undefined ? `it answered ${p.status}: it tried to connect and could not, rather than refusing by its rules` : `no answer (${p.error ?? 'unknown error'})`;
  return {
    id, verdict: 'warn',
    found: `${asked}: ${answer}, so it may open private destinations it can reach`,
    fix: p.status !== undefined ? `Check its rules: ${REFUSE_PRIVATE}.` : 'Check that the corporate proxy is reachable (the outbound-443 check says why it is not), then run preflight again.',
  };
}

/** The kubernetes Service's ClusterIP and port: given to every pod in the agent, read from the API by the CLI. */
async function kubernetesService(ctx: PreflightContext): Promise<{ host: string; port: number } | undefined> {
  if (ctx.settings.kubernetesService) return ctx.settings.kubernetesService;
  const env = process.env;
  if (ctx.mode === 'agent' && env.KUBERNETES_SERVICE_HOST) return { host: env.KUBERNETES_SERVICE_HOST, port: Number(env.KUBERNETES_SERVICE_PORT) || 443 };
  const svc = await ctx.kc.makeApiClient(k8s.CoreV1Api).readNamespacedService({ namespace: 'default', name: 'kubernetes' });
  const host = svc.spec?.clusterIP;
  if (!host || host === 'None') return undefined;
  return { host, port: svc.spec?.ports?.find((p) => p.name === 'https')?.port ?? svc.spec?.ports?.[0]?.port ?? 443 };
}

export async function checkPrivateViaProxy(ctx: PreflightContext): Promise<CheckResult> {
  const proxy = ctx.settings.corporateProxy;
  const id = PRIVATE_VIA_PROXY;
  if (!proxy) return { id, verdict: 'pass', found: 'no corporate proxy (controlPlane.proxy.url is empty): nothing to ask', fix: 'Nothing to do.' };
  const svc = await kubernetesService(ctx);
  if (!svc) {
    return { id, verdict: 'warn', found: 'the kubernetes Service in namespace default has no ClusterIP to ask the corporate proxy for', fix: 'Ask the proxy\'s operators whether it refuses private destinations.' };
  }
  return privateDestinationVerdict(await probePrivate(proxy, svc.host, svc.port, ctx.mode === 'cli' && !proxy.sendsCredentials));
}
