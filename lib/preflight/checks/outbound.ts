// Outbound TCP 443 with TLS to the control-plane API and the registry: a
// connect and a verified handshake, nothing sent. From the agent this is the
// cluster's own egress; from the CLI it only says what this machine reaches.
import { isIP } from 'node:net';
import { connect } from 'node:tls';
import type { CheckResult, PreflightContext } from '../types.ts';
import { errorMessage } from '../../error-fields.ts';
import { proxyTunnelError, type OutboundProxy } from '../../outbound-proxy.ts';

const ID = 'outbound-443';

export type TlsOutcome = { target: string; ok: boolean; ms: number; error?: string; proxy?: string };

export async function probeTls(host: string, port: number, ca: string | undefined, timeoutMs = 5000, proxy?: OutboundProxy): Promise<TlsOutcome> {
  const target = `${host}:${port}`;
  const started = performance.now();
  const through = proxy?.appliesTo(host) ? proxy : undefined;
  return new Promise((resolve) => {
    const tls = { ...(isIP(host) ? {} : { servername: host }), ...(ca ? { ca } : {}), ALPNProtocols: ['h2', 'http/1.1'] };
    const socket = through ? through.tlsThroughTunnel(host, port, tls) : connect({ host, port, ...tls });
    socket.setTimeout(timeoutMs);
    const done = (error?: string): void => {
      socket.destroy();
      const via = through ? ` through the corporate proxy ${through.shown}` : '';
      resolve({ target, ok: error === undefined, ms: Math.round(performance.now() - started), ...(error ? { error: `${error}${via}` } : {}), ...(through ? { proxy: through.shown } : {}) });
    };
    socket.once('secureConnect', () => done());
    socket.once('timeout', () => done(`no TLS handshake within ${timeoutMs / 1000} s (dropped by a firewall or no route)`));
    socket.once('error', (err: NodeJS.ErrnoException) => done(proxyTunnelError(err)?.message ?? tlsFailure(err)));
  });
}

/** Why a TLS connection failed, in the terms of what usually causes it. */
function tlsFailure(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `the name does not resolve (${err.code})`;
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset (often a proxy or firewall closing it)';
    case 'ETIMEDOUT':
    case 'ENETUNREACH':
    case 'EHOSTUNREACH':
      return `no route (${err.code})`;
    default:
      if (err.code?.startsWith('ERR_TLS') || /certificate|self.signed|CERT/i.test(err.message))
        return `TLS certificate not trusted (${err.code ?? err.message}): a TLS-inspecting proxy, or a private endpoint without controlPlane.caBundle`;
      return errorMessage(err);
  }
}

export function outboundVerdict(outcomes: TlsOutcome[], mode: PreflightContext['mode']): CheckResult {
  const from = mode === 'agent' ? 'from the agent pod' : 'from this machine (the cluster may differ; the agent checks again from inside)';
  const lines = outcomes.map((o) => (o.ok ? `${o.target} TLS ok in ${o.ms} ms${o.proxy ? ` through the corporate proxy ${o.proxy}` : ''}` : `${o.target} ${o.error}`));
  const failed = outcomes.filter((o) => !o.ok);
  if (failed.length === 0) return { id: ID, verdict: 'pass', found: `${from}: ${lines.join('; ')}`, fix: 'Nothing to do.' };
  const certOnly = failed.every((o) => o.error?.startsWith('TLS certificate'));
  return {
    id: ID,
    verdict: mode === 'agent' ? 'fail' : 'warn',
    found: `${from}: ${lines.join('; ')}`,
    fix: certOnly
      ? 'Let TLS to these hosts pass uninspected, or set controlPlane.caBundle to the CA that signs their certificates.'
      : failed.some((o) => o.proxy)
        ? 'Fix what the corporate proxy said above (controlPlane.proxy: its url, its Secret, its rules for these hosts).'
        : `Allow outbound TCP 443 from the cluster's nodes to ${failed.map((o) => o.target.replace(/:443$/, '')).join(' and ')} in your firewall or egress gateway.`,
  };
}

export async function checkOutbound(ctx: PreflightContext): Promise<CheckResult> {
  const s = ctx.settings;
  const targets = [...new Map([[`${s.apiHost}:${s.apiPort}`, { host: s.apiHost, port: s.apiPort }], [`${s.registryHost}:443`, { host: s.registryHost, port: 443 }]]).values()];
  return outboundVerdict(await Promise.all(targets.map((t) => probeTls(t.host, t.port, s.ca, 5000, s.proxy))), ctx.mode);
}
