import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from './config.ts';

describe('egress config', () => {
  it('runs from flags alone', () => {
    const c = parseConfig(['--listen', '127.0.0.1:3128', '--allow', 'example.com', '--allow', '*.example.org', '--ports', '443,80',
      '--allow-range', '198.18.0.0/15', '--dns', '127.0.0.1:5353'], {});
    expect(c).toMatchObject({
      listen: { host: '127.0.0.1', port: 3128 }, allow: ['example.com', '*.example.org'], ports: [443, 80],
      allowRanges: ['198.18.0.0/15'], dns: ['127.0.0.1:5353'],
    });
  });

  it('takes the allow-list, ports and ranges from the runtime config, and adds flags to them', () => {
    const dir = mkdtempSync(join(tmpdir(), 'egress-config-'));
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
    expect(c.listen).toEqual({ host: '0.0.0.0', port: 3129 });
    expect(c.healthListen).toEqual({ host: '0.0.0.0', port: 8181 });
    expect(c.metricsListen).toEqual({ host: '0.0.0.0', port: 9191 });
  });

  it('says what is wrong with a flag', () => {
    expect(() => parseConfig(['--allow', 'x.example', '--listen', 'nope'], {})).toThrow(/--listen 'nope' is not HOST:PORT/);
    expect(() => parseConfig(['--allow', 'x.example', '--ports', '443,0'], {})).toThrow(/--ports/);
    expect(() => parseConfig(['--allow', 'x.example', '--max-tunnels=-1'], {})).toThrow(/positive whole number/);
    expect(() => parseConfig(['--bogus'], {})).toThrow(/bogus/);
  });

  it('without flags reads the mounted runtime config and names it when missing', () => {
    expect(() => parseConfig([], {})).toThrow(/cannot read the runtime config \/etc\/rlmesh\/config\/config.json/);
  });
});
