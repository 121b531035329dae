// Nothing test-only ships: the product build (tsconfig.build.json, what the
// image's dist/ is compiled from) takes in no file under test/ and no unit
// test, whatever a product file imports, and neither that code nor the charts
// know the local cluster's ways of steering kwok (test/cluster/kwok-stages.yaml).
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');

function productFiles(): string[] {
  const r = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json'), '--listFilesOnly'], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tsc --listFilesOnly failed: ${r.stdout}${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((f) => f && !f.includes('/node_modules/'))
    .map((f) => relative(root, f));
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe('the product build', () => {
  const files = productFiles();

  it('compiles the components and nothing under test/ or any unit test', () => {
    expect(files).toContain('controlplane/server.ts');
    expect(files).toContain('controller/pod-spec.ts');
    expect(files.filter((f) => f.startsWith('test/') || f.startsWith('../') || f.endsWith('.test.ts'))).toEqual([]);
  });

  it('has no rlmesh.dev/test-* annotation or kwok outcome variable in its code or charts', () => {
    const charts = filesUnder(join(root, 'charts')).map((f) => relative(root, f));
    const mentions = [...files, ...charts].filter((f) => /rlmesh\.dev\/test-|TEST_EXIT_CODE|TEST_DURATION/.test(readFileSync(join(root, f), 'utf8')));
    expect(mentions).toEqual([]);
  });
});
