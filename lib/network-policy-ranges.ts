// What the egress proxy's NetworkPolicy and the chart's values derive from the
// registry rows the proxy enforces (special-purpose-registry.ts), so a row added
// there reaches the chart on `npm run generate`.
import ipaddr from 'ipaddr.js';
import { numberRangePattern } from './number-range-pattern.ts';
import { IPV4_ROWS, IPV6_GLOBAL_UNICAST, IPV6_ROWS, type RegistryRow } from './special-purpose-registry.ts';

const parse = (cidr: string): [ipaddr.IPv4 | ipaddr.IPv6, number] => ipaddr.parseCIDR(cidr);
/** Whether block `inner` lies inside block `outer` (same family). */
function within(inner: string, outer: string): boolean {
  const [net, bits] = parse(inner);
  const [outerNet, outerBits] = parse(outer);
  return net.kind() === outerNet.kind() && bits >= outerBits && net.match(outerNet, outerBits);
}

/**
 * The `except` list of an ipBlock over `cidr`: the registry's rows inside it, without
 * those another row already covers, in registry order.
 */
export function exceptList(rows: readonly RegistryRow[], cidr: string): string[] {
  const inside = [...new Set(rows.map((r) => r.cidr).filter((c) => within(c, cidr)))];
  return inside.filter((c) => !inside.some((other) => other !== c && within(c, other)));
}

/**
 * The proxy NetworkPolicy's public blocks: 0.0.0.0/0 and global unicast 2000::/3 (outside
 * it, IPv6 is refused wholesale), each minus its registry rows.
 */
export const NON_PUBLIC_RANGES = {
  ipv4: exceptList(IPV4_ROWS, '0.0.0.0/0'),
  ipv6Cidr: IPV6_GLOBAL_UNICAST,
  ipv6: exceptList(IPV6_ROWS, IPV6_GLOBAL_UNICAST),
};

/**
 * The rows that stay refused inside a re-openable block (the cloud metadata
 * addresses), each with every block an allow-range may name that holds it
 * strictly (its supernets from the reopenable row's prefix on, canonically
 * written): the chart excepts the address from an allow-range's ipBlock whose
 * CIDR is one of them. Keyed by the address's CIDR.
 */
export function closedInsideReopenable(rows: readonly RegistryRow[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const row of rows) {
    const home = rows.find((r) => r.reopenable && within(row.cidr, r.cidr));
    if (row.reopenable || !home) continue;
    const [address, bits] = parse(row.cidr);
    const from = parse(home.cidr)[1];
    const supernets: string[] = [];
    for (let b = from; b < bits; b++) supernets.push(`${networkOf(address, b)}/${b}`);
    out[row.cidr] = supernets;
  }
  return out;
}

/** The network address of `address` at prefix `bits`, canonically written. */
function networkOf(address: ipaddr.IPv4 | ipaddr.IPv6, bits: number): string {
  const bytes = address.toByteArray().map((byte, i) => byte & ((0xff << (8 - Math.max(0, Math.min(8, bits - i * 8)))) & 0xff));
  return ipaddr.fromByteArray(bytes).toString();
}

export const CLOSED_INSIDE_REOPENABLE = { ...closedInsideReopenable(IPV4_ROWS), ...closedInsideReopenable(IPV6_ROWS) };

/** The widest reopenable row of a family: an allow-range may be no wider. */
export function widestReopenable(rows: readonly RegistryRow[]): { cidr: string; bits: number } {
  const widest = rows
    .filter((r) => r.reopenable)
    .map((r) => ({ cidr: r.cidr, bits: parse(r.cidr)[1] }))
    .sort((a, b) => a.bits - b.bits)[0];
  if (!widest) throw new Error('special-purpose-registry.ts has no reopenable row for a family: allow-ranges would have nothing to re-open');
  return widest;
}
export const WIDEST_REOPENABLE = { ipv4: widestReopenable(IPV4_ROWS), ipv6: widestReopenable(IPV6_ROWS) };

/** The end of a CIDR no wider than the family's widest reopenable row: /8 to /32, /7 to /128. */
export const allowRangePrefix = (family: 'ipv4' | 'ipv6'): RegExp =>
  new RegExp(`\\/${numberRangePattern(WIDEST_REOPENABLE[family].bits, family === 'ipv4' ? 32 : 128)}$`);
