// Decides whether the proxy may connect to one IP address. An address passes
// when it is plainly public unicast (in no row of the special-purpose
// registries, and for IPv6 inside 2000::/3), or when it sits in an operator's
// allow-range. Allow-ranges can only re-open private-style blocks (see
// `reopenable` in special-purpose-registry.ts), so no setting widens the
// proxy to loopback, link-local, multicast, an IPv4 embedding, a cloud metadata
// address inside a re-opened block, or "everything".
import ipaddr from 'ipaddr.js';
import {
  IPV4_ROWS,
  IPV6_GLOBAL_UNICAST,
  IPV6_OUTSIDE_GLOBAL_UNICAST,
  IPV6_ROWS,
  type RegistryRow,
} from '../lib/special-purpose-registry.ts';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

interface CompiledRow extends RegistryRow {
  network: Address;
  bits: number;
}

function compile(rows: readonly RegistryRow[]): CompiledRow[] {
  return rows
    .map((row) => {
      const [network, bits] = ipaddr.parseCIDR(row.cidr);
      return { ...row, network, bits };
    })
    .sort((a, b) => b.bits - a.bits); // most specific row names the refusal
}

const V4_ROWS = compile(IPV4_ROWS);
const V6_ROWS = compile(IPV6_ROWS);
const V6_GLOBAL = ipaddr.parseCIDR(IPV6_GLOBAL_UNICAST);

export interface AllowRange {
  cidr: string;
  network: Address;
  bits: number;
}

export type Classification =
  | { verdict: 'public'; address: string }
  | { verdict: 'allow-range'; address: string; range: string }
  | { verdict: 'refused'; address: string; rule: string; reason: string };

/**
 * Parses an IP address in its plain spelling only: dotted four-part decimal
 * IPv4, or IPv6 without a zone. Odd spellings (decimal, octal, hex, shortened)
 * must go through `normaliseHost` first; here they are not addresses.
 */
export function parseAddress(text: string): Address | undefined {
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return ipaddr.IPv4.parse(text);
  if (!text.includes(':') || text.includes('%') || !ipaddr.IPv6.isValid(text)) return undefined;
  // ipaddr.js reads '::a.b.c.d' as IPv4-mapped; the WHATWG parser reads it as
  // the OS does (IPv4-compatible), so canonicalise through it first.
  const canonical = normaliseHost(`[${text}]`);
  return canonical === undefined ? undefined : ipaddr.IPv6.parse(canonical);
}

function matches(address: Address, network: Address, bits: number): boolean {
  return address.kind() === network.kind() && (address as ipaddr.IPv4).match(network as ipaddr.IPv4, bits);
}

function rowFor(address: Address): CompiledRow | undefined {
  const rows = address.kind() === 'ipv4' ? V4_ROWS : V6_ROWS;
  const row = rows.find((r) => matches(address, r.network, r.bits));
  if (row) return row;
  if (address.kind() === 'ipv6' && !matches(address, V6_GLOBAL[0], V6_GLOBAL[1])) {
    return { ...IPV6_OUTSIDE_GLOBAL_UNICAST, network: V6_GLOBAL[0], bits: 0 };
  }
  return undefined;
}

function embeddedIPv4(address: ipaddr.IPv6, bitOffset: number, inverted = false): ipaddr.IPv4 {
  const bytes = address.toByteArray().slice(bitOffset / 8, bitOffset / 8 + 4);
  return new ipaddr.IPv4(bytes.map((b) => (inverted ? b ^ 0xff : b)));
}

function describe(row: RegistryRow): string {
  return `${row.description} (${row.rfc})`;
}

function refusalReason(address: Address, row: CompiledRow): string {
  const text = address.toString();
  if (!row.embedsIPv4 || address.kind() !== 'ipv6') return `${text} is ${describe(row)}`;
  const hidden = row.embedsIPv4.map((e) => {
    const v4 = embeddedIPv4(address as ipaddr.IPv6, e.bitOffset, e.inverted);
    const v4row = rowFor(v4);
    return v4row ? `${v4.toString()}, which is ${describe(v4row)}` : v4.toString();
  });
  return `${text} is ${describe(row)} embedding ${hidden.join(' and ')}; IPv4 embeddings are never connected to`;
}

export function classifyAddress(
  text: string,
  allowRanges: readonly AllowRange[] = [],
  clusterRanges: readonly ClusterRange[] = [],
): Classification {
  const address = parseAddress(text);
  if (!address) return { verdict: 'refused', address: text, rule: 'invalid-address', reason: `'${text}' is not an IP address` };
  const canonical = address.toString();
  const cluster = clusterRangeOf(address, clusterRanges, allowRanges);
  if (cluster) {
    return {
      verdict: 'refused', address: canonical, rule: 'cluster-range',
      reason: `${canonical} is in ${cluster.cidr}, one of the cluster's own ranges (its pods, Services or nodes; --cluster-range), which the proxy never connects to, public or not`,
    };
  }
  const row = rowFor(address);
  if (!row) return { verdict: 'public', address: canonical };
  // the most specific row decides: a metadata address inside a re-opened block stays refused
  const range = row.reopenable ? allowRanges.find((r) => matches(address, r.network, r.bits)) : undefined;
  if (range) return { verdict: 'allow-range', address: canonical, range: range.cidr };
  return { verdict: 'refused', address: canonical, rule: row.rule, reason: refusalReason(address, row) };
}

const REOPENABLE = [...V4_ROWS, ...V6_ROWS].filter((r) => r.reopenable);

/** Parses `network/prefix` (what = the setting, for messages); the address must be the network address. */
function parseCidr(what: string, text: string, example: string): AllowRange {
  const [addrText, bitsText, extra] = text.trim().split('/');
  const address = addrText === undefined ? undefined : parseAddress(addrText);
  const bits = Number(bitsText);
  const max = address?.kind() === 'ipv4' ? 32 : 128;
  if (!address || extra !== undefined || !/^\d{1,3}$/.test(bitsText ?? '') || bits > max) {
    throw new Error(`${what} '${text}' is not a CIDR range; write it as network/prefix, e.g. ${example}`);
  }
  const network = address.kind() === 'ipv4'
    ? ipaddr.IPv4.networkAddressFromCIDR(`${address.toString()}/${bits}`)
    : new ipaddr.IPv6(networkParts(address as ipaddr.IPv6, bits));
  if (network.toString() !== address.toString()) {
    throw new Error(`${what} '${text}' has host bits set; write its network address, ${network.toString()}/${bits}`);
  }
  return { cidr: `${network.toString()}/${bits}`, network, bits };
}

/**
 * Parses an operator allow-range. It must be a network address in CIDR form
 * lying wholly inside one re-openable block (private-use, shared address
 * space, benchmarking, unique-local); anything else throws a message that says
 * why and what to write instead.
 */
export function parseAllowRange(text: string): AllowRange {
  const range = parseCidr('allow-range', text, '10.20.0.0/16 or fd00:1::/64');
  const { network, bits } = range;
  const home = REOPENABLE.find((r) => bits >= r.bits && matches(network, r.network, r.bits));
  const closed = home && rowFor(network);
  if (closed && !closed.reopenable && bits >= closed.bits) {
    throw new Error(`allow-range '${text}' lies in ${closed.cidr}, ${describe(closed)}, which stays refused inside any re-opened block; list the range around it instead`);
  }
  if (home) return range;
  const blocks = REOPENABLE.map((r) => r.cidr).join(', ');
  const row = rowFor(network);
  if (row?.embedsIPv4) {
    throw new Error(
      `allow-range '${text}' lies in ${describe(row)}: IPv4 embeddings are refused wholesale and cannot be re-opened; list the IPv4 range itself`,
    );
  }
  throw new Error(
    `allow-range '${text}' reaches beyond the blocks an allow-range may re-open (${blocks}); ` +
      'public addresses need no range, and loopback, link-local, multicast and reserved space stay closed; narrow the range',
  );
}

/** One of the cluster's own pod, Service or node ranges: never connected to, public or not. */
export type ClusterRange = AllowRange;

/**
 * Parses a cluster range (`--cluster-range`): any family, any block, written
 * as its network address. Only a range of everything (/0) is refused, since it
 * would refuse every destination.
 */
export function parseClusterRange(text: string): ClusterRange {
  const range = parseCidr('cluster-range', text, '10.244.0.0/16 or 2600:1f14:e22:b400::/56');
  if (range.bits === 0) {
    throw new Error(`cluster-range '${text}' covers every address and would refuse every destination; list the cluster's pod, Service and node ranges`);
  }
  return range;
}

/**
 * The cluster range an address sits in, unless an allow-range lying wholly
 * inside that cluster range re-opens it (an explicit in-cluster route): a
 * wider allow-range (10.0.0.0/8 for a corporate network) does not.
 */
function clusterRangeOf(address: Address, clusterRanges: readonly ClusterRange[], allowRanges: readonly AllowRange[]): ClusterRange | undefined {
  for (const c of clusterRanges) {
    if (!matches(address, c.network, c.bits)) continue;
    const reopened = allowRanges.some((r) => r.bits >= c.bits && matches(address, r.network, r.bits) && matches(r.network, c.network, c.bits));
    if (!reopened) return c;
  }
  return undefined;
}

function networkParts(address: ipaddr.IPv6, bits: number): number[] {
  const bytes = address.toByteArray().map((b, i) => {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    return b & ((0xff << (8 - keep)) & 0xff);
  });
  const parts: number[] = [];
  for (let i = 0; i < 16; i += 2) parts.push((bytes[i]! << 8) | bytes[i + 1]!);
  return parts;
}

/**
 * Normalises a host the way a browser does (WHATWG URL host parser): IPv4 in
 * decimal, octal, hex or shortened spelling becomes dotted decimal, IPv6
 * becomes canonical, names are lowercased and punycoded. Returns undefined
 * when the URL parser rejects the host.
 */
export function normaliseHost(host: string): string | undefined {
  try {
    const hostname = new URL(`http://${host}/`).hostname;
    return hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  } catch {
    return undefined;
  }
}
