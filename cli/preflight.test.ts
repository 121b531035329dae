import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { preflight } from './preflight.ts';
import { tempDir } from '../test/support/temp.ts';

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await preflight(args, { stdout, stderr });
  return { code, out, err };
}

const dir = tempDir('rlmesh-preflight-cli-');
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(
  kubeconfig,
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
    users: [{ name: 'u', user: {} }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'ctx',
  }),
);

/** PATH with a `helm` first that prints this version, as `helm version --template {{.Version}}` does. */
function helmPrinting(version: string): string {
  const bin = tempDir('rlmesh-preflight-helm-');
  writeFileSync(join(bin, 'helm'), `#!/bin/sh\nprintf ${version}\n`);
  chmodSync(join(bin, 'helm'), 0o755);
  return `${bin}:${process.env.PATH}`;
}
afterEach(() => vi.unstubAllEnvs());

describe('rlmesh preflight arguments', () => {
  it('prints help and exits 0', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('Usage: rlmesh preflight');
  });
  it('refuses an unknown output format or flag with exit 2 and a pointer to --help', async () => {
    expect(await cli(['--output', 'yaml'])).toMatchObject({ code: 2, err: 'rlmesh preflight: --output must be table or json, not "yaml"; run rlmesh preflight --help\n' });
    const unknown = await cli(['--bogus']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("Unknown option '--bogus'");
  });
  it('names a values file it cannot read and a value that is invalid', async () => {
    const missing = await cli(['--kubeconfig', kubeconfig, '-f', join(dir, 'nope.yaml')]);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain(`cannot read values file ${join(dir, 'nope.yaml')}`);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'network:\n  dnsPorts: [0]\n');
    const invalid = await cli(['--kubeconfig', kubeconfig, '-f', bad]);
    expect(invalid.code).toBe(2);
    expect(invalid.err).toContain('invalid values: network.dnsPorts.0:');
  });
  it('names a context the kubeconfig does not have', async () => {
    const r = await cli(['--kubeconfig', kubeconfig, '--context', 'prod']);
    expect(r).toMatchObject({ code: 2, err: expect.stringContaining('the kubeconfig has no context "prod" (it has: ctx)') });
  });
  it('reports an unreachable API server as warnings, not a crash', async () => {
    vi.stubEnv('PATH', helmPrinting('v3.17.0'));
    const local = join(dir, 'local.yaml');
    writeFileSync(local, 'controlPlane:\n  apiHost: localhost\n  registryHost: localhost\n');
    const r = await cli(['--kubeconfig', kubeconfig, '-f', local, '-o', 'json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out) as { checks: { id: string; verdict: string; found: string }[] };
    expect(report.checks.find((c) => c.id === 'kubernetes-version')).toMatchObject({ verdict: 'warn', found: expect.stringContaining('could not check') });
  });
  it('fails, exit 1, on a helm older than 3.14 on PATH, naming it and the fix', async () => {
    vi.stubEnv('PATH', helmPrinting('v3.13.2'));
    const local = join(dir, 'local-old-helm.yaml');
    writeFileSync(local, 'controlPlane:\n  apiHost: localhost\n  registryHost: localhost\n');
    const r = await cli(['--kubeconfig', kubeconfig, '-f', local]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('Helm v3.13.2; the New install command needs 3.14 or newer');
    expect(r.out).toContain('Install Helm 3.14 or newer');
  });
});
