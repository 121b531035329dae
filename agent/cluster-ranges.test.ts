import { describe, expect, it } from 'vitest';
import { clusterRangesText, endpointSliceRanges, nodeRanges, serviceRanges } from './cluster-ranges.ts';
import { unknownRangesText, unknownReason } from '../lib/cluster-ranges-text.ts';

describe("the cluster's own ranges from a node", () => {
  it('are its pod ranges and its internal and external addresses, never its hostname', () => {
    expect(
      nodeRanges({
        spec: { podCIDR: '10.244.3.0/24', podCIDRs: ['10.244.3.0/24', '2600:1f14:e22:b403::/64'] },
        status: { addresses: [{ type: 'InternalIP', address: '10.0.1.7' }, { type: 'InternalIP', address: '2600:1f14:e22:b400::7' }, { type: 'ExternalIP', address: '34.1.2.3' }, { type: 'Hostname', address: 'node-7' }] },
      }),
    ).toEqual(['10.244.3.0/24', '2600:1f14:e22:b403::/64', '10.0.1.7/32', '2600:1f14:e22:b400::7/128', '34.1.2.3/32']);
  });

  it('fall back to spec.podCIDR, and are empty for a node without either', () => {
    expect(nodeRanges({ spec: { podCIDR: '10.244.9.0/24' } })).toEqual(['10.244.9.0/24']);
    expect(nodeRanges({})).toEqual([]);
  });
});

describe("the cluster's own ranges from Services and the API server's endpoints", () => {
  it("are a Service's external IPs, its load balancer IP and its load balancer ingress IPs, never a host name", () => {
    expect(
      serviceRanges({
        spec: { externalIPs: ['198.51.100.7', '2001:db8::7'], loadBalancerIP: '203.0.113.9' },
        status: { loadBalancer: { ingress: [{ ip: '34.1.2.3' }, { ip: '2600:1f14::1' }, {}] } },
      }),
    ).toEqual(['198.51.100.7/32', '2001:db8::7/128', '203.0.113.9/32', '34.1.2.3/32', '2600:1f14::1/128']);
    // a load balancer known only by name (AWS ELB) gives no address; junk is not a range
    expect(serviceRanges({ spec: { externalIPs: ['not-an-ip', ''] }, status: { loadBalancer: { ingress: [{ hostname: 'a.elb.example' } as { ip?: string }] } } })).toEqual([]);
    expect(serviceRanges({})).toEqual([]);
  });

  it("are the addresses of the API server's EndpointSlice", () => {
    expect(endpointSliceRanges({ endpoints: [{ addresses: ['35.200.1.2'] }, { addresses: ['2600:1900::5', 'x'] }] })).toEqual(['35.200.1.2/32', '2600:1900::5/128']);
    expect(endpointSliceRanges({})).toEqual([]);
  });

  it('join the polled ranges once each, sorted', () => {
    expect(clusterRangesText(['10.96.0.0/12', '34.1.2.3/32'], [{ spec: { externalIPs: ['34.1.2.3'] } }, { status: { loadBalancer: { ingress: [{ ip: '203.0.113.9' }] } } }]))
      .toBe('10.96.0.0/12\n203.0.113.9/32\n34.1.2.3/32');
  });

  it('are written as unknown with the reason, which the proxy reads back', () => {
    const text = unknownRangesText('the agent may not read them\n(services is forbidden)');
    expect(text).toBe('unknown: the agent may not read them (services is forbidden)');
    expect(unknownReason(text)).toBe('the agent may not read them (services is forbidden)');
    expect(unknownReason('10.96.0.0/12\n34.1.2.3/32')).toBeUndefined();
  });
});
