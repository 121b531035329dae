// controlPlane.proxy of the runtime chart's values: how its url is read, what is
// refused, and the NetworkPolicy peer it gives (the proxy's addresses and port).
// The chart does the same with the same patterns: scripts/generators/chart-proxy.ts
// writes them into templates/_proxy.tpl (rlmesh.proxy), which _validate.tpl and the
// NetworkPolicies use. Every pattern here is valid in JavaScript and in Go's RE2.
import { z } from 'zod';
import { refuse } from './refusals.ts';
import { VALUES_REFUSALS } from './values-refusals.ts';

/** DNS labels, lowercase, dot-separated (a host name without its 253-character limit). */
export const HOST_LABELS = '[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*';

/**
 * A proxy URL, loosely, so that each way it can be wrong gets its own refusal. Groups:
 * 1 scheme, 2 userinfo with its @, 3 host (bracketed for IPv6), 4 :port, 5 path, query or fragment.
 */
export const PROXY_URL_PATTERN = '^([A-Za-z][A-Za-z0-9+.-]*)://([^@/?#]*@)?(\\[[^\\]/?#@]*\\]|[^:/?#@\\[\\]]*)(:[^/?#]*)?([/?#].*)?$';
export const HOST_NAME_PATTERN = `^${HOST_LABELS}$`;
export const IPV4_PATTERN = z.regexes.ipv4.source;
export const IPV6_PATTERN = z.regexes.ipv6.source;
/** An IPv4 or IPv6 CIDR, as z.cidrv4() and z.cidrv6() accept them. */
export const CIDR_PATTERN = `${z.regexes.cidrv4.source}|${z.regexes.cidrv6.source}`;
/** The port of a proxy URL that names none. */
export const DEFAULT_PROXY_PORTS = { http: 80, https: 443 } as const;

export type ProxyUrl = {
  /** whether the url has the shape scheme://[userinfo@]host[:port][rest] */
  matched: boolean;
  scheme: string;
  userinfo: boolean;
  host: string;
  hostKind: 'name' | 'ipv4' | 'ipv6' | 'invalid';
  /** the url's port, or the scheme's default; 0 when the port is not a number from 1 to 65535 */
  port: number;
  /** path, query or fragment after the host and port ('' or '/' is none) */
  rest: string;
};

const group = (m: RegExpMatchArray, i: number): string => m[i] ?? '';

/** The parts of a proxy URL (rlmesh.proxy in the chart reads it the same way). */
export function parseProxyUrl(url: string): ProxyUrl {
  const m = url.match(new RegExp(PROXY_URL_PATTERN));
  if (!m) return { matched: false, scheme: '', userinfo: false, host: '', hostKind: 'invalid', port: 0, rest: '' };
  const scheme = group(m, 1);
  const host = group(m, 3);
  const hostKind: ProxyUrl['hostKind'] = new RegExp(IPV4_PATTERN).test(host)
    ? 'ipv4'
    : /^\[.*\]$/.test(host) && new RegExp(IPV6_PATTERN).test(host.slice(1, -1))
      ? 'ipv6'
      : host.length <= 253 && new RegExp(HOST_NAME_PATTERN).test(host)
        ? 'name'
        : 'invalid';
  const portText = group(m, 4).replace(/^:/, '');
  let port = 0;
  if (group(m, 4) === '') port = DEFAULT_PROXY_PORTS[scheme as keyof typeof DEFAULT_PROXY_PORTS] ?? 0;
  else if (/^[0-9]{1,5}$/.test(portText) && Number(portText) >= 1 && Number(portText) <= 65535) port = Number(portText);
  return { matched: true, scheme, userinfo: group(m, 2) !== '', host, hostKind, port, rest: group(m, 5) };
}

export type ProxyValues = { url: string; noProxy: string[]; existingSecret: string; addresses: string[]; passUnresolvedNames?: boolean };

/**
 * The NetworkPolicy peer of the proxy: controlPlane.proxy.addresses, or the /32 or /128 of
 * an IP-literal host; and its port. null without a proxy.
 */
export function proxyPeer(p: ProxyValues): { addresses: string[]; port: number } | null {
  if (p.url === '') return null;
  const u = parseProxyUrl(p.url);
  const derived = u.hostKind === 'ipv4' ? [`${u.host}/32`] : u.hostKind === 'ipv6' ? [`${u.host.slice(1, -1)}/128`] : [];
  return { addresses: p.addresses.length > 0 ? p.addresses : derived, port: u.port };
}

/** The refusals of controlPlane.proxy (crossFieldErrors() in lib/values-schema.ts; _validate.tpl has the same rules). */
export function proxyErrors(p: ProxyValues): { path: string; message: string }[] {
  const R = VALUES_REFUSALS;
  const errors: { path: string; message: string }[] = [];
  if (p.url === '') {
    if (p.existingSecret !== '') errors.push(refuse(R.proxyUrlMissing, { key: 'existingSecret' }));
    if (p.noProxy.length > 0) errors.push(refuse(R.proxyUrlMissing, { key: 'noProxy' }));
    if (p.addresses.length > 0) errors.push(refuse(R.proxyUrlMissing, { key: 'addresses' }));
    if (p.passUnresolvedNames) errors.push(refuse(R.proxyUrlMissing, { key: 'passUnresolvedNames' }));
  } else {
    const u = parseProxyUrl(p.url);
    const http = u.scheme === 'http' || u.scheme === 'https';
    if (!http) errors.push(refuse(R.proxyUrlScheme));
    if (u.userinfo) errors.push(refuse(R.proxyUrlCredentials));
    if (u.rest !== '' && u.rest !== '/') errors.push(refuse(R.proxyUrlPath));
    if (http && (u.hostKind === 'invalid' || u.port === 0)) errors.push(refuse(R.proxyUrlHost));
    if (http && u.hostKind === 'name' && p.addresses.length === 0) errors.push(refuse(R.proxyAddressesMissing));
  }
  p.addresses.forEach((a, index) => {
    if (!new RegExp(CIDR_PATTERN).test(a)) errors.push(refuse(R.proxyAddressNotCidr, { index, address: a }));
  });
  return errors;
}
