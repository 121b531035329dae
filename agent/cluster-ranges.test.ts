import { describe, expect, it } from 'vitest';
import { nodeRanges } from './cluster-ranges.ts';

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
