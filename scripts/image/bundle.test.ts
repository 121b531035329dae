// The image's bundles: each entrypoint runs from its one file with no
// node_modules/ anywhere above it, and carries only the packages it uses.
// Nothing test-only ships: no file under test/ and no unit test goes into a
// bundle, whatever a product file imports, and neither that code nor the
// charts know the local cluster's ways of steering kwok
// (test/cluster/kwok-stages.yaml).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { Script } from 'node:vm';
import { join, relative, resolve } from 'node:path';
import type { Metafile } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLES, bundleEntrypoints, packagesIn } from './bundle.ts';
import { COMPONENTS } from '../../bin/components.ts';
import { CODE_CACHE_SUFFIX, WRITE_CODE_CACHE_ENV } from '../../bin/run-bundle.ts';

const root = resolve(import.meta.dirname, '../..');
let dir: string;
let metafile: Metafile;

beforeAll(async () => {
  // under the system's temporary folder: no node_modules/ of this repository to fall back on
  dir = mkdtempSync(join(tmpdir(), 'rlmesh-bundle-'));
  metafile = await bundleEntrypoints(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'rlmesh-runtime', version: '0.0.0-test', private: true, type: 'module' }));
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (args: string[]) => spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });

describe('the image bundles', () => {
  it('gives each module entrypoint one file at the path its source has, and each component one at <name>/main.js', () => {
    // esbuild names outputs relative to its working directory, the repository
    expect(Object.keys(metafile.outputs).map((p) => relative(dir, resolve(root, p))).sort()).toEqual([...BUNDLES].sort());
    expect(BUNDLES).toEqual(expect.arrayContaining(['bin/rlmesh-runtime.js', 'lib/preflight/netprobe.js', 'agent/main.js', 'cli/main.js']));
  });

  it('makes each component one script that evaluates to its main function, with no ES module syntax left', () => {
    for (const c of COMPONENTS) {
      const code = readFileSync(join(dir, c, 'main.js'), 'latin1');
      expect(typeof new Script(code, { filename: `${c}/main.js` }).runInThisContext(), c).toBe('function');
      expect(code, c).not.toMatch(/\bimport\.meta\b/);
    }
  });

  for (const c of COMPONENTS) {
    it(`starts ${c} from its bundle alone (--help)`, () => {
      const r = run([join(dir, 'bin/rlmesh-runtime.js'), c, '--help']);
      expect(r.stderr).not.toMatch(/ERR_MODULE_NOT_FOUND|Cannot find (module|package)|Dynamic require/);
      expect([r.status, `${r.stdout}${r.stderr}`]).toEqual([0, expect.stringMatching(/usage|Usage/)]);
    });
  }

  it('writes a component\'s code cache after its code ran, only when asked; V8 accepts it, and it holds more than a cache taken at compile time', () => {
    const bundle = join(dir, 'agent/main.js');
    const cacheFile = bundle + CODE_CACHE_SUFFIX;
    const dispatch = (env: Record<string, string>) =>
      spawnSync(process.execPath, [join(dir, 'bin/rlmesh-runtime.js'), 'agent', '--help'], { cwd: dir, encoding: 'utf8', env: { PATH: process.env.PATH ?? '', ...env } });
    rmSync(cacheFile, { force: true });
    expect(dispatch({}).status).toBe(0);
    expect(() => statSync(cacheFile)).toThrow(/ENOENT/);
    expect(dispatch({ [WRITE_CODE_CACHE_ENV]: '1' }).status).toBe(0);
    const written = statSync(cacheFile);
    // a start that reads it leaves it as it is
    expect(dispatch({}).stdout).toMatch(/usage|Usage/);
    expect(statSync(cacheFile).mtimeMs).toBe(written.mtimeMs);
    // each in a process of its own: V8 would hand the second Script of one source the first one's functions
    const probe = (cachedData: string) => {
      const code = [
        "const { Script } = require('node:vm'); const { readFileSync } = require('node:fs');",
        `const file = ${JSON.stringify(bundle)};`,
        `const s = new Script(readFileSync(file, 'latin1'), { filename: file, cachedData: ${cachedData} });`,
        'console.log(JSON.stringify({ rejected: s.cachedDataRejected, atCompile: s.createCachedData().length }));',
      ].join('\n');
      return JSON.parse(spawnSync(process.execPath, ['-e', code], { encoding: 'utf8' }).stdout) as { rejected: boolean | undefined; atCompile: number };
    };
    const { rejected } = probe(`readFileSync(${JSON.stringify(cacheFile)})`);
    const { atCompile } = probe('undefined');
    expect(rejected).toBe(false);
    expect(written.size).toBeGreaterThan(1.5 * atCompile);
  });

  it('is pure ASCII, so V8 holds each bundle as a one-byte string, and the licence text a comment carries still reads the same', () => {
    for (const e of BUNDLES) {
      const code = readFileSync(join(dir, e), 'utf8');
      expect(code.match(/[^\x00-\x7f]/g), e).toBeNull();
    }
    // a licence notice esbuild keeps as written (formdata-polyfill's, in undici), its one non-ASCII letter escaped
    expect(readFileSync(join(dir, 'agent/main.js'), 'utf8')).toContain('W\\u00e4rting');
  });

  it('imports built-ins through require(), so Node builds no ES module facade that reads their lazy exports', () => {
    for (const e of BUNDLES) {
      const code = readFileSync(join(dir, e), 'utf8');
      // the banner's node:module import is the one ES module import a module entrypoint keeps
      const imported = [...code.matchAll(/(?:^|[;\n])\s*import\s*[^;"'()]*?from\s*["']([^"']+)["']/g)].map((m) => m[1]!.replace(/^node:/, ''));
      expect(imported.filter((m) => builtinModules.includes(m) && m !== 'module'), e).toEqual([]);
    }
  });

  it('runs the NetworkPolicy probe from its bundle (a usage error without arguments)', () => {
    const r = run([join(dir, 'lib/preflight/netprobe.js')]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^usage: /);
  });

  it('leaves out what an entrypoint does not use', () => {
    expect(packagesIn(metafile, 'agent/main.js')).not.toContain('@aws-sdk/client-s3');
    expect(packagesIn(metafile, 'egress/main.js')).not.toContain('@kubernetes/client-node');
    expect(packagesIn(metafile, 'egress/main.js')).not.toContain('@connectrpc/connect');
    expect(packagesIn(metafile, 'lib/preflight/netprobe.js')).toEqual([]);
    expect(packagesIn(metafile, 'bin/rlmesh-runtime.js')).toEqual([]);
    // and what each does use is there
    expect(packagesIn(metafile, 'controller/main.js')).toContain('@aws-sdk/client-s3');
    expect(packagesIn(metafile, 'agent/main.js')).toContain('@connectrpc/connect');
  });

  it('ships the license of every bundled package', () => {
    const notices = readFileSync(join(dir, 'THIRD-PARTY-NOTICES.txt'), 'utf8');
    const all = new Set(BUNDLES.flatMap((e) => packagesIn(metafile, e)));
    expect(all.size).toBeGreaterThan(20);
    for (const p of all) expect(notices, p).toContain(`\n${p} `);
  });
});

const filesUnder = (d: string): string[] => readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? filesUnder(join(d, n)) : [join(d, n)]));

describe('what the bundles take in', () => {
  // files of this repository (not node_modules/, not the built-in shims in esbuild's builtin-require: namespace)
  const ours = () => Object.keys(metafile.inputs).filter((f) => !f.includes('node_modules/') && !f.startsWith('builtin-require:'));

  it('is the components and nothing under test/ or any unit test', () => {
    expect(ours()).toContain('controlplane/server.ts');
    expect(ours()).toContain('controller/pod-spec.ts');
    expect(ours().filter((f) => f.startsWith('test/') || f.startsWith('../') || f.endsWith('.test.ts'))).toEqual([]);
  });

  it('has no rlmesh.dev/test-* annotation or kwok outcome variable in its code or charts', () => {
    const charts = filesUnder(join(root, 'charts')).map((f) => relative(root, f));
    const mentions = [...ours(), ...charts].filter((f) => /rlmesh\.dev\/test-|TEST_EXIT_CODE|TEST_DURATION/.test(readFileSync(join(root, f), 'utf8')));
    expect(mentions).toEqual([]);
  });
});
