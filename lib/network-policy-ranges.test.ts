import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { allowRangePrefix, CLOSED_INSIDE_REOPENABLE, exceptList, NON_PUBLIC_RANGES, WIDEST_REOPENABLE } from './network-policy-ranges.ts';
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

  it("an allow-range's ipBlock excepts each cloud metadata address inside a re-openable block, for every block an allow-range may name around it", () => {
    expect(Object.keys(CLOSED_INSIDE_REOPENABLE)).toEqual(['100.100.100.200/32', 'fd00:ec2::254/128', 'fd00:ec2::23/128', 'fd20:ce::254/128', 'fd00:c1::a9fe:a9fe/128']);
    const alibaba = CLOSED_INSIDE_REOPENABLE['100.100.100.200/32']!;
    expect(alibaba.length).toBe(32 - 10);
    expect(alibaba.slice(0, 3)).toEqual(['100.64.0.0/10', '100.96.0.0/11', '100.96.0.0/12']);
    expect(alibaba.slice(-2)).toEqual(['100.100.100.200/30', '100.100.100.200/31']);
    const aws = CLOSED_INSIDE_REOPENABLE['fd00:ec2::254/128']!;
    expect(aws.length).toBe(128 - 7);
    expect(aws).toContain('fc00::/7');
    expect(aws).toContain('fd00:ec2::/32');
    expect(aws).not.toContain('fd00:ec2::254/128');
    for (const [address, supernets] of Object.entries(CLOSED_INSIDE_REOPENABLE)) for (const s of supernets) expect(inside(address, s) && s !== address, `${address} in ${s}`).toBe(true);
  });
});
