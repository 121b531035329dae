import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLUSTER_RANGES_FILE, parseConfig } from './config.ts';
import { tempDir } from '../test/support/temp.ts';

describe('egress config', () => {
  it('runs from flags alone', () => {
    const c = parseConfig(['--port', '3128', '--allow', 'example.com', '--allow', '*.example.org', '--ports', '443,80',
      '--allow-range', '198.18.0.0/15', '--dns', '127.0.0.1:5353'], { RLMESH_LISTEN_HOST: '127.0.0.1' });
    expect(c).toMatchObject({
      listen: { host: '127.0.0.1', port: 3128 }, allow: ['example.com', '*.example.org'], ports: [443, 80],
      allowRanges: ['198.18.0.0/15'], dns: ['127.0.0.1:5353'],
    });
  });

  it('takes the allow-list, ports and ranges from the runtime config, and adds flags to them', () => {
    const dir = tempDir('egress-config-');
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({
      controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, artifactCache: {},
      egress: { allowedDomains: ['api.rlmesh.dev'], allowedPorts: [443, 8443], allowRanges: ['10.20.0.0/16'], proxyUrl: 'http://rlmesh-egress-proxy.rlmesh-system.svc:3129' },
      ports: { metrics: 9191, health: 8181 },
    }));
    const c = parseConfig(['--allow', 'extra.example'], { RLMESH_CONFIG: file });
    expect(c.allow).toEqual(['api.rlmesh.dev', 'extra.example']);
    expect(c.ports).toEqual([443, 8443]);
    expect(c.allowRanges).toEqual(['10.20.0.0/16']);
    // no host: every interface of every address family the pod has (lib/listen-address.ts)
    expect(c.listen).toEqual({ port: 3129 });
    expect(c.healthListen).toEqual({ port: 8181 });
    expect(c.metricsListen).toEqual({ port: 9191 });
  });

  it('says what is wrong with a flag', () => {
    expect(() => parseConfig(['--allow', 'x.example', '--port', 'nope'], {})).toThrow("--port 'nope' is not a port from 0 to 65535 (0: any free port)");
    expect(() => parseConfig(['--allow', 'x.example', '--health-port', '70000'], {})).toThrow(/--health-port '70000' is not a port/);
    expect(() => parseConfig(['--allow', 'x.example', '--idle-timeout', '5'], {})).toThrow(/idle-timeout/);
    expect(() => parseConfig(['--allow', 'x.example', '--ports', '443,0'], {})).toThrow(/--ports/);
    expect(() => parseConfig(['--allow', 'x.example', '--max-tunnels=-1'], {})).toThrow(/positive whole number/);
    expect(() => parseConfig(['--bogus'], {})).toThrow(/bogus/);
  });

  it('without flags reads the mounted runtime config and names it when missing', () => {
    expect(() => parseConfig([], {})).toThrow(/cannot read the runtime config \/etc\/rlmesh\/config\/config.json/);
  });

  function runtimeConfig(egress: Record<string, unknown>): string {
    const dir = tempDir('egress-config-');
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({
      controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, artifactCache: {},
      egress: { allowedDomains: ['api.rlmesh.dev'], ...egress }, ports: {},
    }));
    return file;
  }

  it('listens on port 80 when the proxy URL names it (new URL() leaves the default port empty)', () => {
    const file = runtimeConfig({ proxyUrl: 'http://rlmesh-egress-proxy.rlmesh-system.svc:80' });
    expect(parseConfig([], { RLMESH_CONFIG: file }).listen).toEqual({ port: 80 });
    expect(parseConfig([], { RLMESH_CONFIG: runtimeConfig({ proxyUrl: 'http://p.svc' }) }).listen.port).toBe(80);
    expect(parseConfig([], { RLMESH_CONFIG: runtimeConfig({}) }).listen.port).toBe(3128);
    expect(() => parseConfig([], { RLMESH_CONFIG: runtimeConfig({ proxyUrl: 'https://p.svc:3128' }) })).toThrow(/egress\.proxyUrl 'https:\/\/p\.svc:3128' .* not http:\/\//);
  });

  it('caps connections from accept: defaults a quarter above the tunnel limits, never below them', () => {
    expect(parseConfig(['--allow', 'x.example'], {})).toMatchObject({
      maxTunnels: 2048, maxTunnelsPerClient: 256, maxConnections: 2560, maxConnectionsPerClient: 320,
    });
    expect(parseConfig(['--allow', 'x.example', '--max-tunnels', '5', '--max-tunnels-per-client', '3'], {}))
      .toMatchObject({ maxConnections: 7, maxConnectionsPerClient: 4 });
    expect(parseConfig(['--allow', 'x.example', '--max-connections', '20000', '--max-connections-per-client', '512'], {}))
      .toMatchObject({ maxConnections: 20_000, maxConnectionsPerClient: 512 });
    expect(() => parseConfig(['--allow', 'x.example', '--max-connections-per-client', '100'], {}))
      .toThrow('--max-connections-per-client 100 is below --max-tunnels-per-client 256');
    expect(() => parseConfig(['--allow', 'x.example', '--max-connections', '0'], {})).toThrow(/positive whole number/);
  });

  it('sizes the relay buffers and the default tunnel limits from the memory limit: the flag, else the chart\'s variable, else 256 MiB', () => {
    const MiB = 1024 * 1024;
    expect(parseConfig(['--allow', 'x.example'], {}).buffers).toMatchObject({ memoryLimitBytes: 256 * MiB, totalBytes: 64 * MiB, perClientBytes: 8 * MiB });
    const fromChart = parseConfig(['--allow', 'x.example'], { RLMESH_MEMORY_LIMIT_MIB: '1024' });
    expect(fromChart.buffers).toMatchObject({ memoryLimitBytes: 1024 * MiB, totalBytes: 256 * MiB, perClientBytes: 32 * MiB });
    expect(fromChart).toMatchObject({ maxTunnels: 8192, maxTunnelsPerClient: 1024 });
    expect(parseConfig(['--allow', 'x.example', '--memory-limit-mib', '512'], { RLMESH_MEMORY_LIMIT_MIB: '1024' }).buffers.memoryLimitBytes).toBe(512 * MiB);
    expect(parseConfig(['--allow', 'x.example', '--memory-limit-mib', '512', '--max-tunnels-per-client', '900'], {}).maxTunnelsPerClient).toBe(900);
    expect(() => parseConfig(['--allow', 'x.example'], { RLMESH_MEMORY_LIMIT_MIB: '256Mi' }))
      .toThrow("RLMESH_MEMORY_LIMIT_MIB '256Mi' must be the container's memory limit in MiB");
    expect(() => parseConfig(['--allow', 'x.example', '--memory-limit-mib', '0'], {})).toThrow(/--memory-limit-mib '0' must be a positive whole number/);
  });

  it('takes the cluster ranges from flags and the kubernetes Service address every pod is given', () => {
    expect(parseConfig(['--allow', 'x.example'], {}).clusterRanges).toEqual([]);
    expect(parseConfig(['--allow', 'x.example', '--cluster-range', '10.244.0.0/16', '--cluster-range', '2600:1f14:e22:b400::/56'], {}).clusterRanges)
      .toEqual(['10.244.0.0/16', '2600:1f14:e22:b400::/56']);
    expect(parseConfig(['--cluster-range', '10.244.0.0/16'], { RLMESH_CONFIG: runtimeConfig({}), KUBERNETES_SERVICE_HOST: '10.96.0.1' }).clusterRanges)
      .toEqual(['10.244.0.0/16', '10.96.0.1/32']);
    expect(parseConfig(['--allow', 'x.example'], { KUBERNETES_SERVICE_HOST: 'fd00:10:96::1' }).clusterRanges).toEqual(['fd00:10:96::1/128']);
    expect(parseConfig(['--allow', 'x.example'], { KUBERNETES_SERVICE_HOST: 'kubernetes.default.svc' }).clusterRanges).toEqual([]);
  });

  it("in the cluster takes egress.clusterRanges from the runtime config and follows the agent's ranges file where the chart mounts it", () => {
    const inCluster = parseConfig([], { RLMESH_CONFIG: runtimeConfig({ clusterRanges: ['2600:1f14:e22:b400::/56'] }) });
    expect(inCluster.clusterRanges).toEqual(['2600:1f14:e22:b400::/56']);
    expect(inCluster.clusterRangesFile).toBe(CLUSTER_RANGES_FILE);
    expect(parseConfig(['--allow', 'x.example'], {}).clusterRangesFile).toBeUndefined();
    expect(parseConfig(['--allow', 'x.example', '--cluster-ranges-file', '/tmp/r'], {}).clusterRangesFile).toBe('/tmp/r');
  });

  it('takes the parent proxy from controlPlane.proxy, or from flags that replace it with their own credentials', () => {
    const dir = tempDir('egress-config-');
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({
      controlPlane: { proxy: { url: 'http://proxy.corp.example:3128', noProxy: ['.corp.example'], credentialsDir: '/etc/rlmesh/proxy-credentials', credentialsSecret: 'corp-proxy' } },
      credentials: {}, observability: {}, gpuFeatureDiscovery: {}, artifactCache: {}, egress: { allowedDomains: ['api.rlmesh.dev'] }, ports: {},
    }));
    expect(parseConfig([], { RLMESH_CONFIG: file }).parentProxy).toEqual({
      url: 'http://proxy.corp.example:3128', noProxy: ['.corp.example'], credentialsDir: '/etc/rlmesh/proxy-credentials', credentialsSecret: 'corp-proxy',
    });
    expect(parseConfig(['--no-proxy', 'a.example, 10.0.0.0/8'], { RLMESH_CONFIG: file }).parentProxy?.noProxy).toEqual(['a.example', '10.0.0.0/8']);
    // another proxy never gets the configured one's credentials
    expect(parseConfig(['--parent-proxy', 'http://other.example:8080'], { RLMESH_CONFIG: file }).parentProxy).toEqual({ url: 'http://other.example:8080', noProxy: [] });
    expect(parseConfig(['--allow', 'x.example', '--parent-proxy', 'https://p.example:3129', '--parent-proxy-credentials', '/creds', '--no-proxy', 'in.example'], {}).parentProxy)
      .toEqual({ url: 'https://p.example:3129', noProxy: ['in.example'], credentialsDir: '/creds' });
    expect(parseConfig(['--allow', 'x.example'], {}).parentProxy).toBeUndefined();
  });

  it('passes names the cluster cannot resolve to the parent only when told to (controlPlane.proxy.passUnresolvedNames, or the flag)', () => {
    const file = join(tempDir('egress-config-'), 'config.json');
    const proxy = { url: 'http://proxy.corp.example:3128', noProxy: [] };
    const rest = { credentials: {}, observability: {}, gpuFeatureDiscovery: {}, artifactCache: {}, egress: { allowedDomains: ['api.rlmesh.dev'] }, ports: {} };
    writeFileSync(file, JSON.stringify({ controlPlane: { proxy: { ...proxy, passUnresolvedNames: true } }, ...rest }));
    expect(parseConfig([], { RLMESH_CONFIG: file }).parentProxy?.passUnresolvedNames).toBe(true);
    // a proxy named by flag takes nothing of the configured one
    expect(parseConfig(['--parent-proxy', 'http://other.example:8080'], { RLMESH_CONFIG: file }).parentProxy?.passUnresolvedNames).toBeUndefined();
    writeFileSync(file, JSON.stringify({ controlPlane: { proxy: { ...proxy, passUnresolvedNames: false } }, ...rest }));
    expect(parseConfig([], { RLMESH_CONFIG: file }).parentProxy?.passUnresolvedNames).toBe(false);
    expect(parseConfig(['--allow', 'x.example', '--parent-proxy', 'http://p.example:3128', '--parent-proxy-pass-unresolved-names'], {}).parentProxy?.passUnresolvedNames).toBe(true);
    expect(() => parseConfig(['--allow', 'x.example', '--parent-proxy-pass-unresolved-names'], {}))
      .toThrow('--parent-proxy-pass-unresolved-names needs a parent proxy: give --parent-proxy URL (or controlPlane.proxy.url in the runtime config)');
  });

  it('says what is wrong with the parent proxy, without showing a password', () => {
    expect(() => parseConfig(['--allow', 'x.example', '--parent-proxy-credentials', '/creds'], {}))
      .toThrow('--parent-proxy-credentials needs a parent proxy: give --parent-proxy URL (or controlPlane.proxy.url in the runtime config)');
    expect(() => parseConfig(['--allow', 'x.example', '--no-proxy', 'a.example'], {})).toThrow(/--no-proxy needs a parent proxy/);
    const withPassword = () => parseConfig(['--allow', 'x.example', '--parent-proxy', 'http://user:hunter2@p.example:3128'], {});
    expect(withPassword).toThrow("--parent-proxy (http://p.example:3128 with credentials) is not http(s)://host:port without credentials or path");
    expect(withPassword).not.toThrow(/hunter2/);
    expect(() => parseConfig(['--allow', 'x.example', '--parent-proxy', 'socks5://p.example:1080'], {})).toThrow(/--parent-proxy \(socks5:\/\/p\.example:1080\) is not http\(s\)/);
    expect(() => parseConfig(['--allow', 'x.example', '--parent-proxy', 'p.example:3128'], {})).toThrow(/--parent-proxy .*is not http\(s\):\/\/host:port/);
  });
});
