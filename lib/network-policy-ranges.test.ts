import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { allowRangePrefix, exceptList, NON_PUBLIC_RANGES, WIDEST_REOPENABLE } from './network-policy-ranges.ts';
import { IPV4_ROWS, IPV6_GLOBAL_UNICAST, IPV6_ROWS } from './special-purpose-registry.ts';

const inside = (cidr: string, outer: string): boolean => {
  const [n, bits] = ipaddr.parseCIDR(cidr);
  const [o, obits] = ipaddr.parseCIDR(outer);
  return n.kind() === o.kind() && bits >= obits && n.match(o, obits);
};

describe('the NetworkPolicy ranges derived from the registry', () => {
  it.each([
    ['IPv4', IPV4_ROWS, '0.0.0.0/0', NON_PUBLIC_RANGES.ipv4],
    ['IPv6', IPV6_ROWS, IPV6_GLOBAL_UNICAST, NON_PUBLIC_RANGES.ipv6],
  ] as const)('%s: every row inside the block is excepted, by registry rows only, none inside another', (_, rows, block, except) => {
    const cidrs = rows.map((r) => r.cidr);
    for (const c of cidrs.filter((c) => inside(c, block))) expect(except.some((e) => inside(c, e)), c).toBe(true);
    for (const e of except) {
      expect(cidrs).toContain(e);
      expect(except.filter((o) => o !== e && inside(e, o)), e).toEqual([]);
    }
  });

  it('leaves out rows outside the block (IPv6 outside 2000::/3 is refused wholesale)', () => {
    expect(NON_PUBLIC_RANGES.ipv6).not.toContain('fc00::/7');
    expect(NON_PUBLIC_RANGES.ipv6).not.toContain('5f00::/16');
    expect(exceptList([{ cidr: '10.0.0.0/8', rule: 'r', description: 'd', rfc: 'x' }], '192.168.0.0/16')).toEqual([]);
  });

  it('allow-ranges may be as wide as the widest reopenable row, no wider', () => {
    expect(WIDEST_REOPENABLE).toEqual({ ipv4: { cidr: '10.0.0.0/8', bits: 8 }, ipv6: { cidr: 'fc00::/7', bits: 7 } });
    expect(allowRangePrefix('ipv4').test('10.0.0.0/8')).toBe(true);
    expect(allowRangePrefix('ipv4').test('10.0.0.0/7')).toBe(false);
    expect(allowRangePrefix('ipv6').test('fc00::/7')).toBe(true);
    expect(allowRangePrefix('ipv6').test('fc00::/6')).toBe(false);
  });
});
