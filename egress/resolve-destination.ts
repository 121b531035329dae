// Turns an allowed destination into the addresses the proxy may connect to:
// resolve A and AAAA once, classify every answer, keep those that pass. The
// caller connects to these exact addresses; nothing is resolved again between
// the check and the connect, so a rebinding DNS answer cannot slip through.
// Through a parent proxy the same holds: it is asked for one of these
// addresses, never the name (egress/parent-proxy.ts).
import { Resolver } from 'node:dns/promises';
import { networkInterfaces } from 'node:os';
import type { Destination } from './allow-list.ts';
import { classifyAddress, parseAddress, type AllowRange, type Classification, type ClusterRange } from './classify-address.ts';

export type Resolution =
  | { outcome: 'addresses'; addresses: string[]; rule: string }
  | { outcome: 'refused'; rule: string; reason: string }
  | { outcome: 'dns-failure'; rule: string; reason: string };

const DNS_CODES: Record<string, string> = {
  ENOTFOUND: 'the name does not exist (NXDOMAIN)',
  ENODATA: 'the name has no A or AAAA records',
  ETIMEOUT: 'the DNS server did not answer in time',
  ESERVFAIL: 'the DNS server failed (SERVFAIL)',
  EREFUSED: 'the DNS server refused the query',
  ECONNREFUSED: 'the DNS server could not be reached',
};

/** The addresses of this machine's interfaces: connecting there would reach the proxy itself. */
export function localAddresses(): Set<string> {
  const set = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const i of list ?? []) {
      const a = parseAddress(i.address);
      if (a) set.add(a.toString());
    }
  }
  return set;
}

export interface ResolverOptions {
  servers: readonly string[];
  timeoutMs: number;
  allowRanges: readonly AllowRange[];
  /** the cluster's own pod, Service and node ranges: refused, public or not, unless an allow-range inside one re-opens it */
  clusterRanges?: readonly ClusterRange[];
  /** addresses that are the proxy itself (its interfaces); refused whatever the ranges say */
  self: ReadonlySet<string>;
  /** why the cluster's own ranges are not known (their file is missing or empty): every destination is refused with it */
  rangesProblem?: () => string | undefined;
}

const MAX_CACHE_SECONDS = 30;
const MAX_CACHE_ENTRIES = 10_000;

export class DestinationResolver {
  private readonly resolver: Resolver;
  private options: ResolverOptions;
  // Answers are kept for their TTL (at most 30 s) and classified again on
  // every request; a TTL of 0 is never cached.
  private readonly cache = new Map<string, { answers: string[]; expires: number }>();
  // classification is a pure function of the address and the ranges (cleared when those change)
  private readonly verdicts = new Map<string, Classification>();

  constructor(options: ResolverOptions) {
    this.options = options;
    this.resolver = new Resolver({ timeout: Math.max(1, Math.ceil(options.timeoutMs / 2)), tries: 2 });
    if (options.servers.length > 0) this.resolver.setServers([...options.servers]);
  }

  async resolve(dest: Destination): Promise<Resolution> {
    // fail closed: without the cluster's own ranges a public address of the cluster would pass
    const unknown = this.options.rangesProblem?.();
    if (unknown) return { outcome: 'refused', rule: 'cluster-ranges-unknown', reason: unknown };
    if (dest.kind === 'ip') return this.decide(dest, [dest.host]);
    const cached = this.cache.get(dest.host);
    if (cached && cached.expires > Date.now()) return this.decide(dest, cached.answers);
    const [v4, v6] = await Promise.allSettled([
      this.resolver.resolve4(dest.host, { ttl: true }),
      this.resolver.resolve6(dest.host, { ttl: true }),
    ]);
    const records = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    const answers = records.map((r) => r.address);
    const ttl = Math.min(MAX_CACHE_SECONDS, ...records.map((r) => r.ttl));
    if (answers.length > 0 && ttl > 0) {
      if (this.cache.size >= MAX_CACHE_ENTRIES) this.cache.clear();
      this.cache.set(dest.host, { answers, expires: Date.now() + ttl * 1000 });
    }
    if (answers.length === 0) {
      const err = [v4, v6].find((r): r is PromiseRejectedResult => r.status === 'rejected' && r.reason?.code !== 'ENODATA');
      const code: string = err?.reason?.code ?? 'ENODATA';
      const why = DNS_CODES[code] ?? `the lookup failed (${code})`;
      return { outcome: 'dns-failure', rule: `dns-${code.toLowerCase()}`, reason: `'${dest.host}' did not resolve: ${why}` };
    }
    return this.decide(dest, answers);
  }

  /** Replaces the cluster's own ranges (the agent's ConfigMap changed); every address is classified again. */
  setClusterRanges(clusterRanges: readonly ClusterRange[]): void {
    this.options = { ...this.options, clusterRanges };
    this.verdicts.clear();
  }

  private classify(address: string): Classification {
    let c = this.verdicts.get(address);
    if (!c) {
      c = classifyAddress(address, this.options.allowRanges, this.options.clusterRanges);
      if (this.verdicts.size >= MAX_CACHE_ENTRIES) this.verdicts.clear();
      this.verdicts.set(address, c);
    }
    return c;
  }

  private decide(dest: Destination, answers: string[]): Resolution {
    const passed: string[] = [];
    const refused: { rule: string; reason: string }[] = [];
    let rule = 'public';
    for (const answer of answers) {
      const c = this.classify(answer);
      if (c.verdict !== 'refused' && this.options.self.has(c.address)) {
        refused.push({ rule: 'proxy-itself', reason: `${c.address} is an address of the egress proxy itself` });
      } else if (c.verdict === 'refused') {
        refused.push({ rule: c.rule, reason: c.reason });
      } else {
        if (passed.length === 0) rule = c.verdict;
        passed.push(c.address);
      }
    }
    if (passed.length > 0) return { outcome: 'addresses', addresses: passed, rule };
    const reasons = [...new Set(refused.map((r) => r.reason))];
    const shown = reasons.length > 3 ? [...reasons.slice(0, 3), `${reasons.length - 3} more`] : reasons;
    const inCluster = refused.every((r) => r.rule === 'cluster-range');
    const suffix = dest.kind !== 'name' ? ''
      : inCluster ? '; in-cluster services need an in-cluster route, not the egress proxy'
        : '; the proxy only connects to public addresses (in-cluster services need an in-cluster route)';
    return { outcome: 'refused', rule: refused[0]!.rule, reason: `${shown.join('; ')}${suffix}` };
  }
}
