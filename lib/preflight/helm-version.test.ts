// The helm-version check against helm scripts on PATH that print what a helm of
// that version prints for `helm version --template {{.Version}}`.
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkHelmVersion, helmVersionVerdict } from './checks/helm-version.ts';
import { tempDir } from '../../test/support/temp.ts';

/** A folder holding only a `helm` that runs this shell body. */
function helmOnPath(body: string): string {
  const dir = tempDir('rlmesh-helm-version-');
  const helm = join(dir, 'helm');
  writeFileSync(helm, `#!/bin/sh\n${body}\n`);
  chmodSync(helm, 0o755);
  return dir;
}

afterEach(() => vi.unstubAllEnvs());

describe('helm-version', () => {
  it('passes at 3.14 and later, fails below with the reason and the fix', () => {
    expect(helmVersionVerdict({ stdout: 'v3.14.0' })).toEqual({ id: 'helm-version', verdict: 'pass', found: 'Helm v3.14.0 (floor 3.14)', fix: 'Nothing to do.' });
    expect(helmVersionVerdict({ stdout: 'v4.0.1\n' }).verdict).toBe('pass');
    const old = helmVersionVerdict({ stdout: 'v3.13.3' });
    expect(old.verdict).toBe('fail');
    expect(old.found).toContain('Helm v3.13.3; the New install command needs 3.14 or newer (helm upgrade --reset-then-reuse-values');
    expect(old.fix).toMatch(/^Install Helm 3\.14 or newer .*then run rlmesh preflight again\.$/);
    expect(helmVersionVerdict({ stdout: 'v2.17.0' }).verdict).toBe('fail');
    expect(helmVersionVerdict({ stdout: 'something' })).toMatchObject({ verdict: 'warn', found: 'helm version printed "something", which is not a version' });
  });

  it('runs the helm on PATH: an old one fails, a current one passes', async () => {
    vi.stubEnv('PATH', `${helmOnPath('[ "$1 $2 $3" = "version --template {{.Version}}" ] && printf v3.12.1')}:/usr/bin:/bin`);
    expect(await checkHelmVersion()).toMatchObject({ verdict: 'fail', found: expect.stringContaining('Helm v3.12.1;') });
    vi.stubEnv('PATH', `${helmOnPath('printf v3.16.2')}:/usr/bin:/bin`);
    expect(await checkHelmVersion()).toMatchObject({ verdict: 'pass', found: 'Helm v3.16.2 (floor 3.14)' });
  });

  it('fails without helm on PATH, and names what a failing helm said', async () => {
    vi.stubEnv('PATH', tempDir('rlmesh-no-helm-'));
    expect(await checkHelmVersion()).toMatchObject({ verdict: 'fail', found: 'no helm on PATH; the install commands the platform prints run helm', fix: expect.stringContaining('Install Helm 3.14') });
    vi.stubEnv('PATH', `${helmOnPath('echo "Error: unknown flag: --template" >&2; exit 1')}:/usr/bin:/bin`);
    expect(await checkHelmVersion()).toMatchObject({ verdict: 'fail', found: 'helm version failed: Error: unknown flag: --template' });
  });
});
