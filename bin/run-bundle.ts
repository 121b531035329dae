// Runs a component's bundle (scripts/image/bundle.ts) as one script, compiled
// with the V8 code cache the image build wrote beside it after running the
// component's --help. Node's own compile cache (NODE_COMPILE_CACHE) serializes
// a module as soon as it is compiled, so it holds only the functions V8
// compiles up front. This cache is taken after the bundle's top-level code
// has run, so it also holds every function that code called: the Kubernetes
// client's models, zod's schemas, the protobuf descriptors (the agent's is
// 3.3 MB against 1.6 MB, and its start to the first request costs about 40 ms
// less CPU). A cache V8 does not accept (another Node version or V8 flags) is
// ignored and the bundle compiles as it would without one.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { constants, Script } from 'node:vm';

/** The code cache of a bundle: the bundle's path and this. */
export const CODE_CACHE_SUFFIX = '.cache';

/** The image build sets this to 1 to have the cache written when the process exits; nothing else does. */
export const WRITE_CODE_CACHE_ENV = 'RLMESH_WRITE_CODE_CACHE';

/** The wrapper esbuild puts around a component's code: the bundle evaluates to this function. */
export type BundleMain = (require: NodeJS.Require, importMetaUrl: string) => Promise<void>;

export async function runBundle(file: string): Promise<void> {
  const cacheFile = file + CODE_CACHE_SUFFIX;
  const writing = process.env[WRITE_CODE_CACHE_ENV] === '1';
  const script = new Script(readFileSync(file, 'latin1'), {
    filename: file,
    cachedData: writing ? undefined : readIfPresent(cacheFile),
    importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  if (writing) process.once('exit', () => writeFileSync(cacheFile, script.createCachedData()));
  const url = pathToFileURL(file).href;
  await (script.runInThisContext() as BundleMain)(createRequire(url), url);
}

function readIfPresent(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
