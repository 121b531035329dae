import { describe, expect, it } from 'vitest';
import { proxyService, withClusterIp } from './proxy-address.ts';

describe('the egress proxy address', () => {
  it('names the Service of an in-cluster URL, and no Service for an address', () => {
    expect(proxyService('http://rlmesh-egress-proxy.rlmesh-system.svc:3128')).toEqual({ name: 'rlmesh-egress-proxy', namespace: 'rlmesh-system' });
    expect(proxyService('http://rlmesh-egress-proxy.ns-1.svc.cluster.local:3128')).toEqual({ name: 'rlmesh-egress-proxy', namespace: 'ns-1' });
    expect(proxyService('http://10.96.0.20:3128')).toBeUndefined();
    expect(proxyService('http://proxy.example.com:3128')).toBeUndefined();
  });

  it('puts the ClusterIP in place of the name, keeping scheme and port', () => {
    expect(withClusterIp('http://rlmesh-egress-proxy.rlmesh-system.svc:3128', '10.96.0.20')).toBe('http://10.96.0.20:3128');
    expect(withClusterIp('http://rlmesh-egress-proxy.rlmesh-system.svc:3128', 'fd00::20')).toBe('http://[fd00::20]:3128');
  });
});
