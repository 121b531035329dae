// The image's /app for a benchmark to run outside the image: the entrypoints
// as the image ships them (esbuild bundles) or as it ran them before (tsc's
// output beside node_modules/), package.json, and a V8 compile cache filled by
// `--help` of the components the benchmark runs, as the image build fills it.
// tsc's output finds its packages in the repository's node_modules/, so `dir`
// must lie inside the repository for it (dist/ does). The image's cache is
// read-only; a process here would rewrite it at exit with what its run compiled
// (root ignores file modes), so env() hands each process a copy of the cache as
// filled.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleEntrypoints } from '../../scripts/image/bundle.ts';
import { ROOT } from '../support/runtime.ts';

export type AppBuild = { dir: string; env: () => Record<string, string>; main: (component: string) => string };

export async function buildApp(dir: string, from: 'bundles' | 'tsc', components: string[]): Promise<AppBuild> {
  rmSync(dir, { recursive: true, force: true });
  if (from === 'bundles') await bundleEntrypoints(dir);
  else execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', join(ROOT, 'tsconfig.build.json'), '--outDir', dir], { stdio: 'inherit' });
  writeFileSync(join(dir, 'package.json'), readFileSync(join(ROOT, 'package.json')));
  const cache = join(dir, '.node-compile-cache');
  const base = { NODE_ENV: 'production', NODE_COMPILE_CACHE_PORTABLE: '1' };
  for (const c of components) execFileSync(join(ROOT, 'node_modules/.bin/node'), [join(dir, 'bin/rlmesh-runtime.js'), c, '--help'], { env: { ...process.env, ...base, NODE_COMPILE_CACHE: cache }, stdio: 'ignore' });
  const env = () => {
    // NODE_COMPILE_CACHE_PORTABLE keys entries by the module's path relative to the cache, so the copy sits beside the original
    const copy = mkdtempSync(join(dir, '.node-compile-cache-'));
    cpSync(cache, copy, { recursive: true });
    return { ...base, NODE_COMPILE_CACHE: copy };
  };
  return { dir, env, main: (c) => join(dir, c, 'main.js') };
}
