// The image's /app for a benchmark to run outside the image, as it ships now
// (esbuild bundles, each component's V8 code cache written after its --help,
// as the image build writes it) or as it ran before (tsc's output beside
// node_modules/, with Node's compile cache filled by the same --help runs).
// tsc's output finds its packages in the repository's node_modules/, so `dir`
// must lie inside the repository for it (dist/ does). Node's compile cache
// would be rewritten at exit by every process (root ignores file modes), so
// env() hands each "before" process a copy of the cache as filled.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleEntrypoints } from '../../scripts/image/bundle.ts';
import { WRITE_CODE_CACHE_ENV } from '../../bin/run-bundle.ts';
import { ROOT } from '../support/runtime.ts';

export type AppBuild = { dir: string; env: () => Record<string, string>; main: (component: string) => string };

const NODE = join(ROOT, 'node_modules/.bin/node');

export async function buildApp(dir: string, from: 'bundles' | 'tsc', components: string[]): Promise<AppBuild> {
  rmSync(dir, { recursive: true, force: true });
  if (from === 'bundles') await bundleEntrypoints(dir);
  else execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', join(ROOT, 'tsconfig.build.json'), '--outDir', dir], { stdio: 'inherit' });
  writeFileSync(join(dir, 'package.json'), readFileSync(join(ROOT, 'package.json')));
  const dispatcher = join(dir, 'bin/rlmesh-runtime.js');
  const production = { NODE_ENV: 'production' };
  if (from === 'bundles') {
    for (const c of components) {
      execFileSync(NODE, [dispatcher, c, '--help'], { env: { ...process.env, ...production, [WRITE_CODE_CACHE_ENV]: '1' }, stdio: 'ignore' });
      // what the image's entrypoint does with `<c> [flags]`, as a file the harnesses can start with their flags
      writeFileSync(join(dir, `start-${c}.js`), `process.argv.splice(2, 0, ${JSON.stringify(c)});\nawait import('./bin/rlmesh-runtime.js');\n`);
    }
    return { dir, env: () => production, main: (c) => join(dir, `start-${c}.js`) };
  }
  const cache = join(dir, '.node-compile-cache');
  const base = { ...production, NODE_COMPILE_CACHE_PORTABLE: '1' };
  for (const c of components) execFileSync(NODE, [join(dir, c, 'main.js'), '--help'], { env: { ...process.env, ...base, NODE_COMPILE_CACHE: cache }, stdio: 'ignore' });
  const env = () => {
    // NODE_COMPILE_CACHE_PORTABLE keys entries by the module's path relative to the cache, so the copy sits beside the original
    const copy = mkdtempSync(join(dir, '.node-compile-cache-'));
    cpSync(cache, copy, { recursive: true });
    return { ...base, NODE_COMPILE_CACHE: copy };
  };
  return { dir, env, main: (c) => join(dir, c, 'main.js') };
}
