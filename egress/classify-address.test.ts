import { BlockList } from 'node:net';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { classifyAddress, normaliseHost, parseAllowRange, parseClusterRange } from './classify-address.ts';
import { IPV4_ROWS, IPV6_ROWS } from '../lib/special-purpose-registry.ts';

function rule(address: string): string {
  const c = classifyAddress(address);
  return c.verdict === 'refused' ? c.rule : c.verdict;
}

describe('IPv4 families (hand-written, independent of the registry data)', () => {
  it.each([
    ['0.0.0.0', 'this-host'],
    ['0.1.2.3', 'this-network'],
    ['10.0.0.0', 'private-use'],
    ['10.0.0.7', 'private-use'],
    ['10.255.255.255', 'private-use'],
    ['172.16.0.1', 'private-use'],
    ['172.31.255.255', 'private-use'],
    ['192.168.1.1', 'private-use'],
    ['100.64.0.1', 'shared-address-space'],
    ['100.127.255.255', 'shared-address-space'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.169.254', 'cloud-metadata'],
    ['169.254.1.1', 'link-local'],
    ['192.0.0.1', 'service-continuity'],
    ['192.0.0.8', 'dummy-address'],
    ['192.0.0.9', 'anycast-service'],
    ['192.0.0.10', 'anycast-service'],
    ['192.0.0.100', 'ietf-protocol-assignments'],
    ['192.0.0.170', 'nat64-discovery'],
    ['192.0.0.171', 'nat64-discovery'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.255', 'documentation'],
    ['192.31.196.1', 'anycast-service'],
    ['192.52.193.1', 'anycast-service'],
    ['192.175.48.6', 'anycast-service'],
    ['192.88.99.1', '6to4-relay-anycast'],
    ['192.88.99.2', '6to4-relay-anycast'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.254', 'reserved'],
    ['255.255.255.255', 'broadcast'],
  ])('%s is refused as %s', (address, expected) => {
    expect(rule(address)).toBe(expected);
  });

  it.each([
    '1.1.1.1', '8.8.8.8', '9.255.255.255', '11.0.0.0', '100.63.255.255', '100.128.0.0', '126.255.255.255',
    '128.0.0.0', '169.253.255.255', '169.255.0.0', '172.15.255.255', '172.32.0.0', '192.0.1.0', '192.0.3.0',
    '192.167.255.255', '192.169.0.0', '198.17.255.255', '198.20.0.0', '198.51.99.255', '203.0.112.255',
    '203.0.114.0', '223.255.255.255',
  ])('%s is public unicast', (address) => {
    expect(classifyAddress(address)).toEqual({ verdict: 'public', address });
  });

  it('names the address and the registry rule in the reason', () => {
    expect(classifyAddress('10.0.0.7')).toEqual({
      verdict: 'refused', address: '10.0.0.7', rule: 'private-use', reason: '10.0.0.7 is private (RFC 1918)',
    });
  });
});

describe('IPv6 families (hand-written)', () => {
  it.each([
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['::7f00:1', 'ipv4-compatible'],
    ['::127.0.0.1', 'ipv4-compatible'],
    ['::ffff:127.0.0.1', 'ipv4-mapped'],
    ['::ffff:7f00:1', 'ipv4-mapped'],
    ['0:0:0:0:0:ffff:a00:7', 'ipv4-mapped'],
    ['::ffff:8.8.8.8', 'ipv4-mapped'],
    ['::ffff:0:10.0.0.7', 'ipv4-translated'],
    ['64:ff9b::10.0.0.7', 'nat64'],
    ['64:ff9b::808:808', 'nat64'],
    ['64:ff9b:1::a00:7', 'nat64'],
    ['100::1', 'discard-only'],
    ['100:0:0:1::1', 'dummy-address'],
    ['2001::1', 'teredo'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'teredo'],
    ['2001:1::1', 'anycast-service'],
    ['2001:1::2', 'anycast-service'],
    ['2001:1::3', 'anycast-service'],
    ['2001:1::4', 'ietf-protocol-assignments'],
    ['2001:2::1', 'benchmarking'],
    ['2001:3::1', 'anycast-service'],
    ['2001:4:112::1', 'anycast-service'],
    ['2001:10::1', 'orchid'],
    ['2001:20::1', 'orchid'],
    ['2001:30::1', 'drone-remote-id'],
    ['2001:1ff::1', 'ietf-protocol-assignments'],
    ['2001:db8::1', 'documentation'],
    ['2001:DB8:FFFF::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2002:a00:7::1', '6to4'],
    ['2002:808:808::1', '6to4'],
    ['2620:4f:8000::1', 'anycast-service'],
    ['5f00::1', 'srv6-sid'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['feff::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['ff0e::1', 'multicast'],
    ['1::1', 'not-global-unicast'],
    ['1fff:ffff::1', 'not-global-unicast'],
    ['4000::1', 'not-global-unicast'],
    ['e000::1', 'not-global-unicast'],
  ])('%s is refused as %s', (address, expected) => {
    expect(rule(address)).toBe(expected);
  });

  it.each(['2606:4700:4700::1111', '2a00:1450:4001::1', '2001:200::1', '2001:4860:4860::8888', '3ffe::1', '2620:4f:8001::1'])(
    '%s is public unicast',
    (address) => {
      expect(classifyAddress(address).verdict).toBe('public');
    },
  );

  it('names the IPv4 address an embedding hides, and its rule', () => {
    const c = classifyAddress('::ffff:10.0.0.7');
    expect(c.verdict === 'refused' && c.reason).toContain('embedding 10.0.0.7, which is private (RFC 1918)');
    const teredo = classifyAddress('2001:0:c000:0201::f5ff:fff8'); // server 192.0.2.1, client ~0a000007
    expect(teredo.verdict === 'refused' && teredo.reason).toContain('192.0.2.1, which is documentation');
    expect(teredo.verdict === 'refused' && teredo.reason).toContain('10.0.0.7, which is private');
  });
});

// Every registry row, by construction: its first, middle and last address are
// refused, and every refused IPv4 row is refused again in each odd IPv4
// spelling and inside each IPv6 embedding.
function lastAddress(cidr: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const [net, bits] = ipaddr.parseCIDR(cidr);
  const bytes = net.toByteArray().map((b, i) => b | (0xff >> Math.max(0, Math.min(8, bits - i * 8))));
  return ipaddr.fromByteArray(bytes);
}
function middleAddress(cidr: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const [net, bits] = ipaddr.parseCIDR(cidr);
  const bytes = net.toByteArray();
  const byte = Math.min(bytes.length - 1, Math.floor(bits / 8));
  if (bits < bytes.length * 8) bytes[byte] = bytes[byte]! | (0x80 >> (bits % 8));
  return ipaddr.fromByteArray(bytes);
}

describe('every registry row is refused (generated from the data)', () => {
  const rows = [...IPV4_ROWS, ...IPV6_ROWS];
  it.each(rows.map((r) => [r.cidr, r]))('%s', (cidr) => {
    for (const a of [ipaddr.parseCIDR(cidr)[0], middleAddress(cidr), lastAddress(cidr)]) {
      expect(classifyAddress(a.toString()).verdict, a.toString()).toBe('refused');
    }
  });
});

function spellings(v4: string): Record<string, string> {
  const o = v4.split('.').map(Number) as [number, number, number, number];
  const n = ((o[0] << 24) >>> 0) + (o[1] << 16) + (o[2] << 8) + o[3];
  const hex = (x: number) => x.toString(16).padStart(2, '0');
  const h = (x: number) => `${hex(x >> 24 & 0xff)}${hex(x >> 16 & 0xff)}:${hex(x >> 8 & 0xff)}${hex(x & 0xff)}`;
  const inv = (~n) >>> 0;
  return {
    decimal: String(n),
    octal: o.map((x) => `0${x.toString(8)}`).join('.'),
    hex: `0x${n.toString(16)}`,
    'hex dotted': o.map((x) => `0x${x.toString(16)}`).join('.'),
    shortened: `${o[0]}.${(o[1] << 16) + (o[2] << 8) + o[3]}`,
    'shortened 3': `${o[0]}.${o[1]}.${(o[2] << 8) + o[3]}`,
    'trailing dot': `${v4}.`,
    'mapped dotted': `[::ffff:${v4}]`,
    'mapped hex': `[::ffff:${h(n)}]`,
    'mapped long': `[0:0:0:0:0:ffff:${h(n)}]`,
    compatible: `[::${v4}]`,
    translated: `[::ffff:0:${v4}]`,
    'nat64 well-known': `[64:ff9b::${v4}]`,
    'nat64 local-use': `[64:ff9b:1::${h(n)}]`,
    '6to4': `[2002:${h(n)}::1]`,
    'teredo server': `[2001:0:${h(n)}:0:0:ffff:ffff]`,
    'teredo client': `[2001:0:0808:0808:0:0:${h(inv)}]`,
  };
}

describe('refused IPv4 in every spelling and embedding', () => {
  const samples = IPV4_ROWS.map((r) => middleAddress(r.cidr).toString());
  const cases = samples.flatMap((v4) => Object.entries(spellings(v4)).map(([form, text]) => [v4, form, text] as const));
  it.each(cases)('%s as %s (%s)', (v4, form, text) => {
    const host = normaliseHost(text);
    expect(host, `${text} normalises`).toBeDefined();
    const c = classifyAddress(host!);
    expect(c.verdict).toBe('refused');
    if (c.verdict !== 'refused') return;
    // ::0.0.0.0 and ::0.0.0.1 are the unspecified and loopback addresses themselves
    if (!text.startsWith('[')) expect(c.rule).toBe(rule(v4));
    else if (!['unspecified', 'loopback'].includes(c.rule)) expect(c.reason).toContain(`${v4}, which is`);
  });

  it('normalises odd IPv4 spellings to dotted decimal', () => {
    expect(normaliseHost('2130706433')).toBe('127.0.0.1');
    expect(normaliseHost('0177.0.0.1')).toBe('127.0.0.1');
    expect(normaliseHost('0x7f.1')).toBe('127.0.0.1');
    expect(normaliseHost('127.1')).toBe('127.0.0.1');
    expect(normaliseHost('0x7f000001')).toBe('127.0.0.1');
    expect(normaliseHost('1.2.3.4.5')).toBeUndefined();
    expect(normaliseHost('256.0.0.1')).toBeUndefined();
  });

  it('does not take non-canonical text as an address', () => {
    for (const text of ['0x7f.1', '127.1', '2130706433', '010.0.0.1', 'fe80::1%eth0', '', 'localhost']) {
      expect(classifyAddress(text)).toMatchObject({ verdict: 'refused', rule: 'invalid-address' });
    }
  });
});

describe('allow-ranges', () => {
  it.each(['10.0.0.0/8', '10.20.0.0/16', '172.16.0.0/12', '192.168.5.0/24', '100.64.0.0/10', '198.18.0.0/15', '198.18.0.2/32', 'fc00::/7', 'fd00:1::/64', '2001:2::/48'])(
    'accepts %s', (cidr) => {
      expect(parseAllowRange(cidr).cidr).toBe(cidr);
    },
  );

  it.each([
    ['0.0.0.0/0', 'reaches beyond'],
    ['::/0', 'reaches beyond'],
    ['0.0.0.0/1', 'reaches beyond'],
    ['10.0.0.0/7', 'reaches beyond'],
    ['8.0.0.0/6', 'reaches beyond'],
    ['8.8.8.0/24', 'reaches beyond'],
    ['127.0.0.0/8', 'reaches beyond'],
    ['169.254.169.254/32', 'reaches beyond'],
    ['224.0.0.0/4', 'reaches beyond'],
    ['240.0.0.0/4', 'reaches beyond'],
    ['fe80::/10', 'reaches beyond'],
    ['2000::/3', 'reaches beyond'],
    ['::ffff:0:0/96', 'IPv4 embeddings'],
    ['::ffff:10.0.0.0/104', 'IPv4 embeddings'],
    ['64:ff9b::/96', 'IPv4 embeddings'],
    ['2002:a00::/24', 'IPv4 embeddings'],
    ['2001::/32', 'IPv4 embeddings'],
    ['10.0.0.1/8', 'host bits'],
    ['fd00::1/8', 'host bits'],
    ['10.0.0.0/33', 'not a CIDR'],
    ['10.0.0.0', 'not a CIDR'],
    ['10.0.0.0/8/8', 'not a CIDR'],
    ['010.0.0.0/8', 'not a CIDR'],
    ['10.0.0.0/-1', 'not a CIDR'],
  ])('refuses %s (%s)', (cidr, why) => {
    expect(() => parseAllowRange(cidr)).toThrow(why);
  });

  it('lets an address in a range pass and nothing else', () => {
    const ranges = [parseAllowRange('198.18.0.0/15')];
    expect(classifyAddress('198.18.0.2', ranges)).toEqual({ verdict: 'allow-range', address: '198.18.0.2', range: '198.18.0.0/15' });
    expect(classifyAddress('10.0.0.7', ranges).verdict).toBe('refused');
    expect(classifyAddress('::ffff:198.18.0.2', ranges).verdict).toBe('refused');
    expect(classifyAddress('64:ff9b::198.18.0.2', ranges).verdict).toBe('refused');
    expect(classifyAddress('2002:c612:2::1', ranges).verdict).toBe('refused');
  });
});

describe('cluster ranges', () => {
  // an IPv6 cluster whose pods, Services and nodes have global unicast addresses
  const cluster = ['2600:1f14:e22:b400::/56', '2600:1f14:e22:b4ff::/108', '10.96.0.0/12', '34.118.224.0/20'].map(parseClusterRange);

  it.each(['2600:1f14:e22:b400::/56', '10.244.0.0/16', '34.118.224.0/20', '10.96.0.1/32', '2001:db8::/32', '192.0.2.0/24'])('accepts %s, in any block', (cidr) => {
    expect(parseClusterRange(cidr).cidr).toBe(cidr);
  });

  it('writes an IPv6 range canonically', () => {
    expect(parseClusterRange('2600:1F14:0E22:B400:0:0:0:0/56').cidr).toBe('2600:1f14:e22:b400::/56');
  });

  it.each([
    ['0.0.0.0/0', 'every destination'],
    ['::/0', 'every destination'],
    ['10.244.1.0/16', 'host bits set; write its network address, 10.244.0.0/16'],
    ['2600:1f14:e22:b401::/56', 'host bits set; write its network address, 2600:1f14:e22:b400::/56'],
    ['10.244.0.0', 'not a CIDR'],
    ['10.244.0.0/33', 'not a CIDR'],
    ['pods.example/16', 'not a CIDR'],
  ])('refuses %s (%s)', (cidr, why) => {
    expect(() => parseClusterRange(cidr)).toThrow(`cluster-range '${cidr}'`);
    expect(() => parseClusterRange(cidr)).toThrow(why);
  });

  it('refuses a public address inside a cluster range, saying which range and why', () => {
    expect(classifyAddress('2600:1f14:e22:b400::5').verdict).toBe('public');
    const c = classifyAddress('2600:1F14:E22:B400::5', [], cluster);
    expect(c).toEqual({
      verdict: 'refused', address: '2600:1f14:e22:b400::5', rule: 'cluster-range',
      reason: "2600:1f14:e22:b400::5 is in 2600:1f14:e22:b400::/56, one of the cluster's own ranges (its pods, Services or nodes; --cluster-range), which the proxy never connects to, public or not",
    });
    expect(classifyAddress('2600:1f14:e22:b4ff::a', [], cluster)).toMatchObject({ verdict: 'refused', rule: 'cluster-range' });
    expect(classifyAddress('34.118.230.7', [], cluster)).toMatchObject({ verdict: 'refused', rule: 'cluster-range' });
    // the neighbours stay public
    expect(classifyAddress('2600:1f14:e22:b500::5', [], cluster).verdict).toBe('public');
    expect(classifyAddress('34.118.240.1', [], cluster).verdict).toBe('public');
  });

  it('names the cluster range for a private address in it, and a wider allow-range does not re-open it', () => {
    const wide = [parseAllowRange('10.0.0.0/8')];
    expect(classifyAddress('10.96.0.10', [], cluster)).toMatchObject({ verdict: 'refused', rule: 'cluster-range' });
    expect(classifyAddress('10.96.0.10', wide, cluster)).toMatchObject({ verdict: 'refused', rule: 'cluster-range' });
    expect(classifyAddress('10.20.0.5', wide, cluster)).toEqual({ verdict: 'allow-range', address: '10.20.0.5', range: '10.0.0.0/8' });
  });

  it('an allow-range wholly inside a cluster range re-opens that part only (an explicit in-cluster route)', () => {
    const route = [parseAllowRange('10.96.5.10/32')];
    expect(classifyAddress('10.96.5.10', route, cluster)).toEqual({ verdict: 'allow-range', address: '10.96.5.10', range: '10.96.5.10/32' });
    expect(classifyAddress('10.96.5.11', route, cluster)).toMatchObject({ verdict: 'refused', rule: 'cluster-range' });
  });

  it('IPv4 embeddings of a cluster address are still refused by their own row', () => {
    expect(classifyAddress('::ffff:10.96.0.10', [], cluster)).toMatchObject({ verdict: 'refused', rule: 'ipv4-mapped' });
  });
});

// An independent matcher as oracle: node:net BlockList built from the same
// registry rows (plus everything outside 2000::/3), checked against random
// addresses across the whole space.
describe('agrees with node:net BlockList on random addresses', () => {
  const v4 = new BlockList();
  const v6 = new BlockList();
  for (const r of IPV4_ROWS) {
    const [net, bits] = ipaddr.parseCIDR(r.cidr);
    v4.addSubnet(net.toString(), bits, 'ipv4');
  }
  for (const r of [...IPV6_ROWS.map((row) => row.cidr), '::/3', '4000::/2', '8000::/1']) {
    const [net, bits] = ipaddr.parseCIDR(r);
    v6.addSubnet(net.toString(), bits, 'ipv6');
  }
  let seed = 12345;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed;
  };
  const byte = () => random() & 0xff;

  it('IPv4: 200,000 addresses', () => {
    let mismatches = 0;
    for (let i = 0; i < 200_000; i++) {
      const a = `${byte()}.${byte()}.${byte()}.${byte()}`;
      if ((classifyAddress(a).verdict === 'refused') !== v4.check(a, 'ipv4')) mismatches++;
    }
    expect(mismatches).toBe(0);
  });

  it('IPv6: 100,000 addresses, half of them near special blocks', () => {
    const prefixes = ['2001:0', '2001:1', '2001:2', '2001:3', '2001:4', '2001:1f', '2002', '2620:4f', '3fff', '5f00', 'fc00', 'fe80', 'fec0', 'ff00', '64:ff9b', '100', '2001:db8', '0'];
    let mismatches = 0;
    for (let i = 0; i < 100_000; i++) {
      const groups = Array.from({ length: 8 }, () => ((random() & 0xffff) >>> 0).toString(16));
      if (i % 2) {
        const p = prefixes[random() % prefixes.length]!.split(':');
        p.forEach((g, j) => (groups[j] = g));
      }
      const a = ipaddr.parse(groups.join(':')).toString();
      if ((classifyAddress(a).verdict === 'refused') !== v6.check(a, 'ipv6')) mismatches++;
    }
    expect(mismatches).toBe(0);
  });
});

describe('addresses no allow-range re-opens', () => {
  // the blocks around them are re-opened as widely as an allow-range may be
  const reopened = ['10.0.0.0/8', '100.64.0.0/10', '172.16.0.0/12', '192.168.0.0/16', '198.18.0.0/15', 'fc00::/7'].map(parseAllowRange);

  it.each([
    ['100.100.100.200', 'the Alibaba Cloud instance metadata service'],
    ['fd00:ec2::254', 'the AWS instance metadata service (IPv6)'],
    ['fd00:ec2::23', 'the Amazon EKS Pod Identity agent (IPv6)'],
    ['fd20:ce::254', 'the Google Cloud metadata server (IPv6)'],
    ['fd00:c1::a9fe:a9fe', 'the Oracle Cloud instance metadata service (IPv6)'],
    ['169.254.169.254', 'the instance metadata service of AWS, Azure, Google Cloud, Oracle Cloud and OpenStack'],
    ['169.254.170.2', 'the Amazon ECS task metadata and credentials endpoint'],
    ['169.254.170.23', 'the Amazon EKS Pod Identity agent (IAM credentials)'],
    ['168.63.129.16', "Azure's platform endpoint (WireServer: VM agent, extensions, health probes)"],
  ])('%s (%s) stays refused as cloud-metadata while its block is re-opened', (address, what) => {
    const c = classifyAddress(address, reopened);
    expect(c).toMatchObject({ verdict: 'refused', rule: 'cloud-metadata' });
    expect((c as { reason: string }).reason).toContain(`is ${what}`);
  });

  it('its neighbours in the re-opened block pass', () => {
    expect(classifyAddress('100.100.100.201', reopened)).toMatchObject({ verdict: 'allow-range', range: '100.64.0.0/10' });
    expect(classifyAddress('fd00:ec2::253', reopened)).toMatchObject({ verdict: 'allow-range', range: 'fc00::/7' });
    expect(classifyAddress('168.63.129.17')).toEqual({ verdict: 'public', address: '168.63.129.17' });
  });

  it.each(['100.100.100.200/32', 'fd00:ec2::254/128', 'fd00:c1::a9fe:a9fe/128'])('an allow-range of %s itself is refused, naming why', (cidr) => {
    expect(() => parseAllowRange(cidr)).toThrow(/cloud-metadata|stays refused inside any re-opened block/);
  });

  it.each([
    ['64:ff9b::10.1.2.3', 'nat64', '10.1.2.3, which is private'],
    ['64:ff9b::100.100.100.200', 'nat64', '100.100.100.200, which is the Alibaba Cloud instance metadata service'],
    ['64:ff9b:1::a01:203', 'nat64', '10.1.2.3, which is private'],
    ['64:ff9b:1:ffff::808:808', 'nat64', '8.8.8.8'],
    ['::ffff:10.1.2.3', 'ipv4-mapped', '10.1.2.3, which is private'],
  ])('the NAT64 prefixes and other IPv4 embeddings stay refused while the IPv4 block is re-opened: %s', (address, rule, hidden) => {
    const c = classifyAddress(address, reopened);
    expect(c).toMatchObject({ verdict: 'refused', rule });
    expect((c as { reason: string }).reason).toContain(hidden);
  });
});
