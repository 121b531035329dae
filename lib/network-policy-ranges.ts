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
