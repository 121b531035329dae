import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
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
    const local = join(dir, 'local.yaml');
    writeFileSync(local, 'controlPlane:\n  apiHost: localhost\n  registryHost: localhost\n');
    const r = await cli(['--kubeconfig', kubeconfig, '-f', local, '-o', 'json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out) as { checks: { id: string; verdict: string; found: string }[] };
    expect(report.checks.find((c) => c.id === 'kubernetes-version')).toMatchObject({ verdict: 'warn', found: expect.stringContaining('could not check') });
  });
});
