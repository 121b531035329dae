import { once } from 'node:events';
import { createServer, connect, type AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import { hostPort, listenHost, peerAddress, podAddress, shownListen, urlHost } from './listen-address.ts';

function iface(address: string, family: 'IPv4' | 'IPv6', internal = false) {
  return { address, family, internal, netmask: '', mac: '00:00:00:00:00:00', cidr: null, ...(family === 'IPv6' ? { scopeid: 0 } : {}) } as NonNullable<ReturnType<typeof networkInterfaces>[string]>[number];
}

describe('the listen host', () => {
  it('is every interface unless RLMESH_LISTEN_HOST names one; an IPv6 override may be bracketed', () => {
    expect(listenHost({})).toBeUndefined();
    expect(listenHost({ RLMESH_LISTEN_HOST: '  ' })).toBeUndefined();
    expect(listenHost({ RLMESH_LISTEN_HOST: '127.0.0.1' })).toBe('127.0.0.1');
    expect(listenHost({ RLMESH_LISTEN_HOST: '::1' })).toBe('::1');
    expect(listenHost({ RLMESH_LISTEN_HOST: '[fd00::7]' })).toBe('fd00::7');
    expect(listenHost({ RLMESH_LISTEN_HOST: 'localhost' })).toBe('localhost');
  });

  it('refuses an override that looks like IPv6 and is not, naming the variable', () => {
    expect(() => listenHost({ RLMESH_LISTEN_HOST: 'fd00::zz' })).toThrow(/RLMESH_LISTEN_HOST='fd00::zz' is not an IPv6 address; set an IP address/);
    expect(() => listenHost({ RLMESH_LISTEN_HOST: '127.0.0.1:8080' })).toThrow(/RLMESH_LISTEN_HOST/);
  });

  // what the default relies on: Node binds :: dual-stack when no host is given. A machine without
  // ::1 cannot show it, and fails here rather than pass unproven.
  it('without a host, one server answers on IPv4 and on IPv6', async () => {
    const loopback = Object.values(networkInterfaces()).flatMap((l) => l ?? []).map((a) => a.address);
    expect(loopback, 'this machine has no ::1 on an interface: enable IPv6 on lo (sysctl net.ipv6.conf.lo.disable_ipv6=0) to run this test').toContain('::1');
    const server = createServer((s) => s.end(`${peerAddress(s.remoteAddress)}\n`));
    server.listen({ port: 0, host: listenHost({}) });
    await once(server, 'listening');
    const { port, address } = server.address() as AddressInfo;
    expect(address).toBe('::');
    const ask = async (host: string) => {
      const c = connect({ host, port });
      let text = '';
      c.on('data', (d: Buffer) => (text += d.toString()));
      await once(c, 'end');
      return text.trim();
    };
    // the IPv4 client reads as itself, not as ::ffff:127.0.0.1
    expect(await ask('127.0.0.1')).toBe('127.0.0.1');
    expect(await ask('::1')).toBe('::1');
    server.close();
  });
});

describe('host:port and URLs', () => {
  it('brackets an IPv6 literal, and nothing else', () => {
    expect(urlHost('fd00::20')).toBe('[fd00::20]');
    expect(urlHost('[fd00::20]')).toBe('[fd00::20]');
    expect(urlHost('10.96.0.20')).toBe('10.96.0.20');
    expect(urlHost('rlmesh-egress-proxy.rlmesh-system.svc')).toBe('rlmesh-egress-proxy.rlmesh-system.svc');
    expect(hostPort('2001:db8::1', 9090)).toBe('[2001:db8::1]:9090');
    expect(hostPort('10.244.1.7', '9090')).toBe('10.244.1.7:9090');
    expect(new URL(`http://${hostPort('fd00::20', 3128)}`).port).toBe('3128');
  });

  it('shows where a server listens', () => {
    expect(shownListen(undefined, 8081)).toBe('every interface, port 8081');
    expect(shownListen('::1', 8081)).toBe('[::1]:8081');
    expect(shownListen('127.0.0.1', 8081)).toBe('127.0.0.1:8081');
  });

  it('reads an IPv4-mapped peer as its IPv4 address, and leaves others alone', () => {
    expect(peerAddress('::ffff:10.244.0.9')).toBe('10.244.0.9');
    expect(peerAddress('::FFFF:10.244.0.9')).toBe('10.244.0.9');
    expect(peerAddress('fd00::9')).toBe('fd00::9');
    expect(peerAddress('::ffff:a00:9')).toBe('::ffff:a00:9');
    expect(peerAddress(undefined)).toBe('unknown');
  });
});

describe("the pod's own address", () => {
  it('is its IPv4 address on an IPv4 or dual-stack pod', () => {
    expect(podAddress({ lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)], eth0: [iface('fd00:10:244::5', 'IPv6'), iface('10.244.0.5', 'IPv4')] })).toBe('10.244.0.5');
  });

  it('is its IPv6 address, not the link-local one, on an IPv6-only pod', () => {
    expect(podAddress({ lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)], eth0: [iface('fe80::1', 'IPv6'), iface('fd00:10:244::5', 'IPv6')] })).toBe('fd00:10:244::5');
  });

  it('is unknown with loopback only', () => {
    expect(podAddress({ lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)] })).toBeUndefined();
  });
});
