// Which destinations evaluations may name: the allow-list of hosts and ports.
//
// Entries are exact names (`api.rlmesh.dev`), wildcards (`*.example.org`:
// every name with at least one more label, such as `a.example.org` and
// `a.b.example.org`, but NOT `example.org` itself; list both when both are
// wanted), or IP literals (only then may an evaluation name that address).
// Names compare case-insensitively, without a trailing dot, in punycode.
// A destination that passes here is still resolved and every address checked
// by classify-address.ts.
import { domainToASCII } from 'node:url';
import { normaliseHost, parseAddress } from './classify-address.ts';
import { shownTarget } from './shown.ts';
import { isHostname, RAW_HOST } from '../lib/hostname.ts';

export interface Destination {
  /** normalised: lowercase punycode name without trailing dot, or canonical IP */
  host: string;
  port: number;
  kind: 'name' | 'ip';
}

export interface Refusal {
  rule: string;
  reason: string;
}


function refuse(rule: string, reason: string): Refusal {
  return { rule, reason };
}

function normaliseName(raw: string): { host: string; kind: 'name' | 'ip' } | Refusal {
  // a CONNECT authority can carry '?' and '#' here: shown without what follows them
  const shown = shownTarget(raw);
  if (raw.startsWith('[') && raw.endsWith(']')) {
    const ip = parseAddress(raw.slice(1, -1));
    return ip ? { host: ip.toString(), kind: 'ip' } : refuse('invalid-name', `'${shown}' is not a valid IPv6 address`);
  }
  if (!RAW_HOST.test(raw)) {
    return refuse('invalid-name', `the host contains characters outside a hostname's alphabet (letters, digits, '-' and '.')`);
  }
  const normalised = normaliseHost(raw);
  if (normalised === undefined) return refuse('invalid-name', `'${shown}' is not a valid hostname or IP address`);
  const ip = parseAddress(normalised);
  if (ip) return { host: ip.toString(), kind: 'ip' };
  const host = normalised.endsWith('.') ? normalised.slice(0, -1) : normalised;
  if (!isHostname(host)) {
    return refuse('invalid-name', `'${shown}' is not a valid hostname (labels of letters, digits and '-', at most 63 characters each)`);
  }
  return { host, kind: 'name' };
}

/**
 * Parses the authority a client asked for (`host:port`, `[v6]:port`): the
 * CONNECT target, or the authority of an absolute-form URL with its scheme's
 * default port.
 */
export function parseAuthority(authority: string, defaultPort?: number): Destination | Refusal {
  if (authority.includes('@')) return refuse('userinfo', 'credentials in the destination (user@host) are refused');
  const match = /^(\[[^\]]*\]|[^:[\]]*)(?::(.*))?$/s.exec(authority);
  if (!match || match[1] === '') return refuse('invalid-name', 'the destination has no host; ask for host:port');
  const portText = match[2];
  let port: number;
  if (portText === undefined) {
    if (defaultPort === undefined) return refuse('missing-port', 'the destination has no port; ask for host:port, e.g. example.com:443');
    port = defaultPort;
  } else {
    port = /^\d{1,5}$/.test(portText) ? Number(portText) : NaN;
    if (!(port >= 1 && port <= 65535)) return refuse('invalid-port', 'the destination port is not a number from 1 to 65535');
  }
  const name = normaliseName(match[1]!);
  return 'rule' in name ? name : { ...name, port };
}

/** The authority of an absolute-form request target (`http://host[:port]/path`). */
export function parseAbsoluteUrl(target: string): Destination | Refusal {
  const match = /^http:\/\/([^/?#]*)/i.exec(target);
  if (!match) {
    return refuse('unsupported-request', 'only CONNECT host:port and absolute http:// URLs are proxied; use CONNECT for https');
  }
  return parseAuthority(match[1]!, 80);
}

export interface AllowListConfig {
  /** exact names, `*.suffix` wildcards and IP literals */
  entries: readonly string[];
  ports: readonly number[];
}

export class AllowList {
  readonly exact = new Set<string>();
  readonly suffixes: string[] = [];
  readonly ips = new Set<string>();
  readonly ports: ReadonlySet<number>;
  /** the platform's output hosts (lib/output-hosts.ts), replaced whenever the agent's ConfigMap changes */
  private platform: ReadonlySet<string> = new Set();

  constructor(config: AllowListConfig) {
    for (const entry of config.entries) this.add(entry);
    if (config.ports.length === 0) throw new Error('the egress allow-list has no allowed ports; allow at least 443');
    for (const p of config.ports) {
      if (!Number.isInteger(p) || p < 1 || p > 65535) throw new Error(`allowed port '${p}' is not a number from 1 to 65535`);
    }
    this.ports = new Set(config.ports);
  }

  private add(raw: string): void {
    const entry = raw.trim().toLowerCase();
    const ip = parseAddress(entry.replace(/^\[(.*)\]$/, '$1'));
    if (ip) {
      this.ips.add(ip.toString());
      return;
    }
    const wildcard = entry.startsWith('*.');
    const name = domainToASCII((wildcard ? entry.slice(2) : entry).replace(/\.$/, ''));
    if (!name || !isHostname(name) || name.includes('*')) {
      throw new Error(
        `allow-list entry '${raw}' is not a hostname, a '*.suffix' wildcard or an IP address; write e.g. my-inputs.s3.eu-west-1.amazonaws.com or *.example.org`,
      );
    }
    if (wildcard && !name.includes('.')) {
      throw new Error(`allow-list entry '${raw}' would allow a whole top-level domain; name the domain, e.g. *.example.org`);
    }
    if (wildcard) this.suffixes.push(`.${name}`);
    else this.exact.add(name);
  }

  /** Hosts checked by lib/output-hosts.ts: exact, normalised names. */
  setPlatformHosts(hosts: readonly string[]): void {
    this.platform = new Set(hosts);
  }

  /** Undefined when the destination may be resolved and checked; else why not. */
  check(dest: Destination): Refusal | undefined {
    if (dest.kind === 'ip' && !this.ips.has(dest.host)) {
      return refuse('ip-literal', `${dest.host} is an IP address and IP-literal destinations are refused; connect by name, or add the address to the allow-list`);
    }
    if (dest.kind === 'name' && !this.exact.has(dest.host) && !this.platform.has(dest.host) && !this.suffixes.some((s) => dest.host.endsWith(s))) {
      return refuse('not-allowed', `'${dest.host}' is not on the egress allow-list; add it to egress.extraDomains if evaluations need it`);
    }
    if (!this.ports.has(dest.port)) {
      return refuse('port-not-allowed', `port ${dest.port} is not an allowed egress port (allowed: ${[...this.ports].join(', ')})`);
    }
    return undefined;
  }
}
