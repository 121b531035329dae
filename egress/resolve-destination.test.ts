import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type TestDnsServer } from '../test/egress/dns-server.ts';
import { parseAllowRange, parseClusterRange } from './classify-address.ts';
import { DestinationResolver } from './resolve-destination.ts';

let dns: TestDnsServer;
let resolver: DestinationResolver;
const name = (host: string) => ({ host, port: 443, kind: 'name' as const });

beforeAll(async () => {
  dns = await startDnsServer({
    'public.example': { A: ['93.184.216.34'], AAAA: ['2606:2800:220:1::1'] },
    'cached.example': (asked) => ({ A: [asked === 0 ? '93.184.216.34' : '10.0.0.1'], ttl: 30 }),
    'uncached.example': (asked) => ({ A: [asked === 0 ? '93.184.216.34' : '10.0.0.1'], ttl: 0 }),
    'private.example': { A: ['10.0.0.7', '192.168.1.1'], AAAA: ['fd00::1'] },
    'ranged.example': { A: ['10.20.0.5'] },
    'mixed.example': { A: ['93.184.216.34', '10.0.0.7'] },
    'servfail.example': { servfail: true },
    'empty.example': {},
    'pods6.example': { AAAA: ['2600:1f14:e22:b400::5'] },
    'dual.example': { A: ['34.118.224.9'], AAAA: ['2600:1f14:e22:b400::6', '2606:2800:220:1::1'] },
  });
  resolver = new DestinationResolver({
    servers: [dns.address], timeoutMs: 2_000, allowRanges: [parseAllowRange('10.20.0.0/16')], self: new Set(['93.184.216.35']),
  });
});
afterAll(() => dns.close());

describe('DestinationResolver', () => {
  it('resolves A and AAAA once and keeps the public addresses, IPv4 first', async () => {
    expect(await resolver.resolve(name('public.example'))).toEqual({
      outcome: 'addresses', addresses: ['93.184.216.34', '2606:2800:220:1::1'], rule: 'public',
    });
    expect(dns.queries('public.example', 'A')).toBe(1);
    expect(dns.queries('public.example', 'AAAA')).toBe(1);
  });

  it('refuses when no answer passes, naming every refused address', async () => {
    const r = await resolver.resolve(name('private.example'));
    expect(r.outcome).toBe('refused');
    expect(r).toMatchObject({ rule: 'private-use' });
    if (r.outcome === 'refused') {
      expect(r.reason).toContain('10.0.0.7 is private (RFC 1918)');
      expect(r.reason).toContain('192.168.1.1 is private (RFC 1918)');
      expect(r.reason).toContain('fd00::1 is unique-local');
    }
  });

  it('keeps the public answers of a mixed name, the only addresses connected to (directly or through a parent)', async () => {
    expect(await resolver.resolve(name('mixed.example'))).toEqual({ outcome: 'addresses', addresses: ['93.184.216.34'], rule: 'public' });
  });

  it('lets an allow-range address through and says so', async () => {
    expect(await resolver.resolve(name('ranged.example'))).toEqual({ outcome: 'addresses', addresses: ['10.20.0.5'], rule: 'allow-range' });
  });

  it('reuses answers for their TTL but classifies them again; a TTL of 0 is asked again', async () => {
    expect((await resolver.resolve(name('cached.example'))).outcome).toBe('addresses');
    expect((await resolver.resolve(name('cached.example'))).outcome).toBe('addresses');
    expect(dns.queries('cached.example', 'A')).toBe(1);
    expect((await resolver.resolve(name('uncached.example'))).outcome).toBe('addresses');
    expect(await resolver.resolve(name('uncached.example'))).toMatchObject({ outcome: 'refused', rule: 'private-use' });
    expect(dns.queries('uncached.example', 'A')).toBe(2);
  });

  it('refuses addresses of the proxy itself', async () => {
    const own = new DestinationResolver({ servers: [dns.address], timeoutMs: 2_000, allowRanges: [], self: new Set(['93.184.216.34']) });
    expect(await own.resolve(name('public.example'))).toEqual({ outcome: 'addresses', addresses: ['2606:2800:220:1::1'], rule: 'public' });
  });

  it('refuses an answer inside the cluster\'s own ranges, public or not, and keeps the others', async () => {
    const inCluster = new DestinationResolver({
      servers: [dns.address], timeoutMs: 2_000, allowRanges: [], self: new Set(),
      clusterRanges: ['2600:1f14:e22:b400::/56', '34.118.224.0/20'].map(parseClusterRange),
    });
    const r = await inCluster.resolve(name('pods6.example'));
    expect(r).toEqual({
      outcome: 'refused', rule: 'cluster-range',
      reason: "2600:1f14:e22:b400::5 is in 2600:1f14:e22:b400::/56, one of the cluster's own ranges (its pods, Services or nodes; --cluster-range), " +
        'which the proxy never connects to, public or not; in-cluster services need an in-cluster route, not the egress proxy',
    });
    expect(await inCluster.resolve(name('dual.example'))).toEqual({ outcome: 'addresses', addresses: ['2606:2800:220:1::1'], rule: 'public' });
    // without the ranges the same answers are public
    expect(await resolver.resolve(name('pods6.example'))).toMatchObject({ outcome: 'addresses', addresses: ['2600:1f14:e22:b400::5'] });
  });

  it('reports DNS failures by cause', async () => {
    expect(await resolver.resolve(name('missing.example'))).toMatchObject({ outcome: 'dns-failure', rule: 'dns-enotfound' });
    expect(await resolver.resolve(name('servfail.example'))).toMatchObject({ outcome: 'dns-failure', rule: 'dns-eservfail' });
    expect(await resolver.resolve(name('empty.example'))).toMatchObject({ outcome: 'dns-failure', rule: 'dns-enodata' });
  });

  it('classifies an IP-literal destination without DNS', async () => {
    expect(await resolver.resolve({ host: '127.0.0.1', port: 443, kind: 'ip' })).toMatchObject({ outcome: 'refused', rule: 'loopback' });
  });
});
