// The private-via-proxy check against Debian's Squid on loopback: one
// Squid that opens every destination its authenticated clients ask for, one
// whose rules refuse private destinations (here loopback, where the private
// destination listens and stands in for the kubernetes Service's ClusterIP).
// The destination counts the connections it is given, so a 200 is seen to be
// a real tunnel and a refusal to reach nothing.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outboundProxy } from '../outbound-proxy.ts';
import { runtimeConfigSchema } from '../runtime-config.ts';
import { freePort } from '../../test/support/free-port.ts';
import { startSquid, type Squid } from '../../test/support/squid.ts';
import { tempDir } from '../../test/support/temp.ts';
import { until } from '../../test/support/until.ts';
import { PRIVATE_VIA_PROXY } from './checks/private-via-proxy.ts';
import { runPreflight } from './run.ts';
import { settingsFromRuntimeConfig } from './settings.ts';
import type { PreflightMode } from './types.ts';

let destination: Server;
let destinationPort = 0;
let connections = 0;
let opens: Squid;
let refuses: Squid;
let credentialsDir = '';

beforeAll(async () => {
  destination = createServer((s) => {
    connections++;
    s.end();
  });
  await new Promise<void>((r) => destination.listen(0, '127.0.0.1', r));
  destinationPort = (destination.address() as AddressInfo).port;
  opens = await startSquid({ listen: { host: '127.0.0.1', port: await freePort() }, hosts: {} });
  refuses = await startSquid({ listen: { host: '127.0.0.1', port: await freePort() }, hosts: {}, password: opens.password, refuse: ['127.0.0.0/8', '10.0.0.0/8'] });
  credentialsDir = join(tempDir('rlmesh-proxy-check-'), 'credentials');
  mkdirSync(credentialsDir);
  writeFileSync(join(credentialsDir, 'username'), opens.username);
  writeFileSync(join(credentialsDir, 'password'), opens.password);
}, 60_000);

afterAll(async () => {
  await opens?.stop();
  await refuses?.stop();
  destination?.close();
});

/** The check as the agent runs it (with the proxy's credentials) or as rlmesh preflight --check-outbound does (without). */
async function check(squid: Squid, mode: PreflightMode) {
  const settings = settingsFromRuntimeConfig(runtimeConfigSchema.parse({ controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {} }));
  const corporateProxy = outboundProxy({ url: squid.url, noProxy: [], ...(mode === 'agent' ? { credentialsDir } : {}) });
  const report = await runPreflight(
    { mode, kc: new k8s.KubeConfig(), settings: { ...settings, corporateProxy, kubernetesService: { host: '127.0.0.1', port: destinationPort } } },
    { outbound: true, only: [PRIVATE_VIA_PROXY] },
  );
  expect(report.checks).toHaveLength(1);
  return report.checks[0]!;
}

const squidLine = (squid: Squid, code: string) =>
  until(`Squid's ${code} line`, () => squid.accessLog().find((l) => l.includes(`CONNECT 127.0.0.1:${destinationPort}`) && l.includes(code)), { timeoutMs: 10_000, intervalMs: 50 });

describe('private-via-proxy', () => {
  it('FAIL, with what to do, against a Squid that opens a private destination (the tunnel reached it)', async () => {
    const before = connections;
    const r = await check(opens, 'agent');
    expect(r.verdict).toBe('fail');
    expect(r.found).toBe(`asked the corporate proxy ${opens.url} for CONNECT 127.0.0.1:${destinationPort} (the kubernetes Service's ClusterIP, a private address inside this cluster): it opened the tunnel (200), so it connects to private destinations inside the cluster when asked`);
    expect(r.fix).toContain('make the corporate proxy refuse CONNECT and requests to private, loopback, link-local (cloud metadata)');
    expect(r.fix).toMatch(/run preflight again\.$/);
    await until('the destination to see the tunnel', () => connections > before, { timeoutMs: 10_000, intervalMs: 20 });
    await squidLine(opens, 'TCP_TUNNEL/200');
  });

  it('OK against a Squid whose rules refuse private destinations, which reaches nothing', async () => {
    const before = connections;
    const r = await check(refuses, 'agent');
    expect(r).toMatchObject({ verdict: 'pass', found: `asked the corporate proxy ${refuses.url} for CONNECT 127.0.0.1:${destinationPort} (the kubernetes Service's ClusterIP, a private address inside this cluster): it refused (403)` });
    await squidLine(refuses, 'TCP_DENIED/403');
    expect(connections).toBe(before);
  });

  it('from the CLI, without credentials: OK where the refusal comes first, a warning where the proxy wants credentials', async () => {
    expect(await check(refuses, 'cli')).toMatchObject({ verdict: 'pass', found: expect.stringContaining('without credentials: it refused (403)') });
    const r = await check(opens, 'cli');
    expect(r).toMatchObject({ verdict: 'warn', found: expect.stringContaining('without credentials: it wants credentials (407)') });
    expect(r.fix).toContain("see the agent's own check");
  });

  it('without a corporate proxy there is nothing to ask', async () => {
    const settings = settingsFromRuntimeConfig(runtimeConfigSchema.parse({ controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {} }));
    const report = await runPreflight({ mode: 'agent', kc: new k8s.KubeConfig(), settings }, { only: [PRIVATE_VIA_PROXY] });
    expect(report.checks[0]).toMatchObject({ verdict: 'pass', found: 'no corporate proxy (controlPlane.proxy.url is empty): nothing to ask' });
  });
});
