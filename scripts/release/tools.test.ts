import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findTool, projectBinDir } from './tools.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-tools-'));
  dirs.push(dir);
  return dir;
}
function program(dir: string, name: string): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  writeFileSync(file, '#!/bin/sh\n');
  chmodSync(file, 0o755);
  return file;
}

describe('findTool', () => {
  it('takes the one on PATH first', () => {
    const t = tempDir();
    const onPath = program(join(t, 'path'), 'helm');
    program(join(t, 'testbin/v1.0.0/bin'), 'helm');
    expect(findTool('helm', { PATH: join(t, 'path'), RLMESH_TESTBIN: join(t, 'testbin'), K8S_VERSION: 'v1.0.0' })).toBe(onPath);
  });

  it('falls back to what test/cluster/build-binaries.sh built', () => {
    const t = tempDir();
    const built = program(join(t, 'testbin/v1.0.0/bin'), 'helm');
    expect(findTool('helm', { PATH: join(t, 'empty'), RLMESH_TESTBIN: join(t, 'testbin'), K8S_VERSION: 'v1.0.0' })).toBe(built);
  });

  it('falls back to the cosign test/support/build-cosign.sh built', () => {
    const t = tempDir();
    const built = program(join(t, 'testbin/cosign-v9.9.9'), 'cosign');
    expect(findTool('cosign', { PATH: join(t, 'empty'), RLMESH_TESTBIN: join(t, 'testbin'), COSIGN_VERSION: 'v9.9.9' })).toBe(built);
    expect(() => findTool('cosign', { PATH: join(t, 'empty'), RLMESH_TESTBIN: join(t, 'testbin') })).toThrow('bash test/support/build-cosign.sh');
  });

  it('uses the version build-binaries.sh builds by default', () => {
    expect(projectBinDir({ RLMESH_TESTBIN: '/x' })).toMatch(/^\/x\/v1\.\d+\.\d+\/bin$/);
  });

  it('says where it looked and how to get the tool', () => {
    const t = tempDir();
    const env = { PATH: join(t, 'empty'), RLMESH_TESTBIN: join(t, 'testbin'), K8S_VERSION: 'v1.0.0' };
    expect(() => findTool('helm', env)).toThrow(`helm is not on PATH nor in ${join(t, 'testbin/v1.0.0/bin')}`);
    expect(() => findTool('helm', env)).toThrow('bash test/cluster/build-binaries.sh');
    expect(() => findTool('skopeo', env)).toThrow('apt-get install skopeo');
  });
});
