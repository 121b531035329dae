// /v1/info is not trusted to say where the session goes: the gRPC endpoint must
// be the configured API host on the configured port (443 in the chart) with TLS.
// Checked on its own, and through fetchInfo against a real control plane that
// advertises another host or port.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runtimeConfigSchema } from '../lib/runtime-config.ts';
import { startTestControlPlane, type TestControlPlane } from '../test/support/control-plane.ts';
import { checkRegistryHost, checkSessionEndpoint, controlPlaneClient, fetchInfo, JoinError } from './join.ts';

const cp443 = { baseUrl: 'https://api.rlmesh.dev', apiHost: 'api.rlmesh.dev', apiPort: 443 };
const refusal = (f: () => void): JoinError => {
  try {
    f();
  } catch (err) {
    if (err instanceof JoinError) return err;
    throw err;
  }
  throw new Error('not refused');
};

describe('the session endpoint /v1/info names', () => {
  it('is accepted on the configured host and port with TLS (host case and a trailing dot aside)', () => {
    expect(() => checkSessionEndpoint(cp443, { host: 'api.rlmesh.dev', port: 443, tls: true })).not.toThrow();
    expect(() => checkSessionEndpoint(cp443, { host: 'API.rlmesh.dev.', port: 443, tls: true })).not.toThrow();
  });

  it('is refused on another host, another port or without TLS, in one line with what, why and what to do', () => {
    const host = refusal(() => checkSessionEndpoint(cp443, { host: 'grpc.attacker.example', port: 443, tls: true }));
    expect(host.code).toBe('untrusted_session_endpoint');
    expect(host.permanent).toBe(true);
    expect(host.message).toMatch(/^GET https:\/\/api\.rlmesh\.dev\/v1\/info named the session endpoint grpc\.attacker\.example:443, which the agent refuses \(host grpc\.attacker\.example is not the configured API host api\.rlmesh\.dev\)/);
    expect(host.message).toMatch(/the control credential goes only to the API host the agent was installed with, on port 443 over TLS/);
    expect(host.message).toMatch(/check that controlPlane\.apiHost is the rlmesh API/);
    expect(host.message).not.toContain('\n');
    // a subdomain or a suffix match is another host
    expect(refusal(() => checkSessionEndpoint(cp443, { host: 'api.rlmesh.dev.attacker.example', port: 443, tls: true })).code).toBe('untrusted_session_endpoint');
    expect(refusal(() => checkSessionEndpoint(cp443, { host: 'api.rlmesh.dev', port: 8443, tls: true })).message).toMatch(/port 8443 is not the configured port 443/);
    expect(refusal(() => checkSessionEndpoint(cp443, { host: 'api.rlmesh.dev', port: 443, tls: false })).message).toMatch(/api\.rlmesh\.dev:443 without TLS.*it asks for no TLS/);
  });
});

describe("the control plane's registry /v1/info names", () => {
  const installed = { baseUrl: 'https://api.staging.example', registryHost: 'registry.staging.example' };
  it('is accepted when it is controlPlane.registryHost (case and a trailing dot aside), or not named', () => {
    expect(() => checkRegistryHost(installed, 'registry.staging.example')).not.toThrow();
    expect(() => checkRegistryHost(installed, 'Registry.Staging.Example.')).not.toThrow();
    expect(() => checkRegistryHost(installed, undefined)).not.toThrow();
  });

  it('is refused when it is another host, naming both, saying the token is unused and the value to set', () => {
    const e = refusal(() => checkRegistryHost(installed, 'registry.rlmesh.dev'));
    expect(e.code).toBe('registry_host_mismatch');
    expect(e.permanent).toBe(true);
    expect(e.message).toMatch(/registry is registry\.rlmesh\.dev, but the chart was installed with controlPlane\.registryHost=registry\.staging\.example/);
    expect(e.message).toMatch(/has not used the join token/);
    expect(e.message).toMatch(/set controlPlane\.registryHost=registry\.rlmesh\.dev/);
    expect(e.message).not.toContain('\n');
  });
});

describe('fetchInfo against a control plane', () => {
  let cps: TestControlPlane[] = [];
  afterEach(async () => {
    for (const cp of cps) await cp.close().catch(() => {});
    for (const cp of cps) rmSync(cp.dir, { recursive: true, force: true });
    cps = [];
  });
  const client = (cp: TestControlPlane) =>
    controlPlaneClient(
      runtimeConfigSchema.parse({
        controlPlane: { apiHost: '127.0.0.1', apiPort: cp.port, caBundlePath: cp.caFile },
        credentials: {},
        observability: {},
        gpuFeatureDiscovery: {},
        egress: {},
        artifactCache: {},
      }),
    );

  it('returns the info when it names the configured host and port', async () => {
    const cp = await startTestControlPlane();
    cps.push(cp);
    const info = await fetchInfo(client(cp));
    expect(info.grpc).toEqual({ host: '127.0.0.1', port: cp.port, tls: true });
  });

  it("refuses a control plane whose registry is not controlPlane.registryHost, before any join", async () => {
    const staging = await startTestControlPlane({ registryHost: 'registry.staging.example' });
    cps.push(staging);
    await expect(fetchInfo(client(staging))).rejects.toMatchObject({ code: 'registry_host_mismatch', permanent: true, message: expect.stringMatching(/registry is registry\.staging\.example, but the chart was installed with controlPlane\.registryHost=registry\.rlmesh\.dev/) });
  });

  it('refuses an advertised host or port other than the configured ones', async () => {
    const otherHost = await startTestControlPlane({ advertiseHost: 'localhost' });
    const otherPort = await startTestControlPlane({ advertisePort: 443 });
    cps.push(otherHost, otherPort);
    await expect(fetchInfo(client(otherHost))).rejects.toMatchObject({ code: 'untrusted_session_endpoint', message: expect.stringMatching(/host localhost is not the configured API host 127\.0\.0\.1/) });
    await expect(fetchInfo(client(otherPort))).rejects.toMatchObject({ code: 'untrusted_session_endpoint', message: expect.stringMatching(new RegExp(`port 443 is not the configured port ${otherPort.port}`)) });
  });
});

// Node's `ca` option replaces the roots it trusts: the bundle must be added to them, as the chart documents,
// unless controlPlane.pinCaBundle. The CA in NODE_EXTRA_CA_CERTS stands for a root the system trusts (Node
// counts it among its default roots); each control plane's CA is one of its own.
describe('controlPlane.caBundle: in addition to the system roots, or pinned', () => {
  let cps: TestControlPlane[] = [];
  afterEach(async () => {
    for (const cp of cps) await cp.close().catch(() => {});
    for (const cp of cps) rmSync(cp.dir, { recursive: true, force: true });
    cps = [];
  });

  /** fetchInfo in a process of its own, whose default roots include `rootCaFile`: 'ok' or the error's code. */
  const infoWith = async (cp: TestControlPlane, o: { rootCaFile: string; bundleFile: string; pinned: boolean }): Promise<string> => {
    const config = { controlPlane: { apiHost: '127.0.0.1', apiPort: cp.port, caBundlePath: o.bundleFile, pinCaBundle: o.pinned }, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {} };
    const script = `
      import { runtimeConfigSchema } from './lib/runtime-config.ts';
      import { controlPlaneClient, fetchInfo } from './agent/join.ts';
      const cp = controlPlaneClient(runtimeConfigSchema.parse(${JSON.stringify(config)}));
      fetchInfo(cp).then(() => console.log('ok'), (e) => console.log(e.code ?? e.message)).finally(() => cp.dispatcher.close());`;
    // asynchronously: the control plane answers from this process
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('..', import.meta.url).pathname, env: { PATH: process.env.PATH ?? '', NODE_EXTRA_CA_CERTS: o.rootCaFile }, encoding: 'utf8', timeout: 30_000 });
    return stdout.trim();
  };

  it('a control plane signed by a system root is reached with a bundle for another CA set; with pinCaBundle only the bundle counts', async () => {
    const platform = await startTestControlPlane();
    const other = await startTestControlPlane(); // its CA stands for a TLS-inspecting proxy's
    cps.push(platform, other);
    expect(await infoWith(platform, { rootCaFile: platform.caFile, bundleFile: other.caFile, pinned: false })).toBe('ok');
    expect(await infoWith(platform, { rootCaFile: platform.caFile, bundleFile: other.caFile, pinned: true })).toBe('unreachable');
    expect(await infoWith(platform, { rootCaFile: other.caFile, bundleFile: platform.caFile, pinned: true })).toBe('ok');
  });
});
