// Clock skew against the control plane, from the Date header of GET /v1/info.
// Credentials expire and join tokens last an hour, so a clock far off makes
// valid credentials look expired (or the reverse).
import { Agent, request } from 'undici';
import type { CheckResult, PreflightContext } from '../types.ts';
import type { OutboundProxy } from '../../outbound-proxy.ts';
import { errorMessage } from '../../error-fields.ts';

const ID = 'clock-skew';
export const SKEW_WARN_MS = 30_000;
export const SKEW_FAIL_MS = 5 * 60_000;

export function skewVerdict(skewMs: number, url: string): CheckResult {
  const abs = Math.abs(skewMs);
  const s = Math.round(abs / 1000);
  const dir = skewMs > 0 ? 'behind' : 'ahead of';
  const found = abs < 1000 ? `this clock is within 1 s of ${url} (Date header)` : `this clock is ${s} s ${dir} ${url} (Date header)`;
  if (abs > SKEW_FAIL_MS) {
    return { id: ID, verdict: 'fail', found: `${found}; more than ${SKEW_FAIL_MS / 60_000} min makes credentials and join tokens look expired or not yet valid`, fix: 'Synchronise the clocks with NTP (chrony or systemd-timesyncd) on the nodes, then run preflight again.' };
  }
  if (abs > SKEW_WARN_MS) return { id: ID, verdict: 'warn', found: `${found}; more than ${SKEW_WARN_MS / 1000} s`, fix: 'Synchronise the clocks with NTP (chrony or systemd-timesyncd) on the nodes.' };
  return { id: ID, verdict: 'pass', found, fix: 'Nothing to do.' };
}

/** Server time minus local time at the request's midpoint, in ms. */
export async function measureSkew(url: string, ca: string | undefined, now: () => number = Date.now, timeoutMs = 5000, proxy?: OutboundProxy): Promise<number> {
  const connect = proxy?.appliesTo(new URL(url).hostname) ? proxy.undiciConnector({ ca, timeoutMs }) : { ...(ca ? { ca } : {}), timeout: timeoutMs };
  const dispatcher = new Agent({ connect, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  try {
    const t0 = now();
    const res = await request(url, { dispatcher, method: 'GET' });
    const t1 = now();
    await res.body.dump();
    const date = res.headers['date'];
    const server = typeof date === 'string' ? Date.parse(date) : Number.NaN;
    if (Number.isNaN(server)) throw new Error(`${url} answered without a Date header`);
    // the header has 1 s resolution: server time lies in [server, server + 1 s)
    return server + 500 - (t0 + t1) / 2;
  } finally {
    await dispatcher.close();
  }
}

export async function checkClockSkew(ctx: PreflightContext): Promise<CheckResult> {
  const s = ctx.settings;
  const url = `https://${s.apiHost}${s.apiPort === 443 ? '' : `:${s.apiPort}`}/v1/info`;
  try {
    return skewVerdict(await measureSkew(url, s.ca, ctx.now, 5000, s.proxy), url);
  } catch (err) {
    return {
      id: ID,
      verdict: 'warn',
      found: `could not read the time of ${url}: ${errorMessage(err)}`,
      fix: 'Make the control plane reachable (see check outbound-443), then run preflight again.',
    };
  }
}
