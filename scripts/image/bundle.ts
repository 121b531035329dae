// The image's JavaScript: each entrypoint bundled by esbuild into one file,
// holding only the code that entrypoint reaches. The agent carries no S3
// client and the proxy no Kubernetes client (scripts/image/bundle.test.ts), and
// a start reads one file instead of resolving hundreds in node_modules/.
//
// Node starts two of them as ES modules: the dispatcher (/app/bin/rlmesh-runtime.js)
// and the probe the controller's pods run. Each component the dispatcher runs
// (/app/agent/main.js, ...) is one script instead: its code inside
// `(async function (require, importMetaUrl) { ... })`, which bin/run-bundle.ts
// compiles with the V8 code cache the image build writes beside it.
//
//   node scripts/image/bundle.ts [--out DIR]    (default dist/app)
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { builtinModules } from 'node:module';
import { Script } from 'node:vm';
import { build, formatMessages, type BuildOptions, type Metafile, type Plugin } from 'esbuild';
import { COMPONENT_SOURCES } from '../../bin/components.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/** What Node itself starts as an ES module: the dispatcher, and the probe the controller's pods run. */
export const MODULE_ENTRYPOINTS = ['bin/rlmesh-runtime.ts', 'lib/preflight/netprobe.ts'] as const;

/** Every bundle in /app, by its path there. */
export const BUNDLES = [...MODULE_ENTRYPOINTS.map((e) => e.replace(/\.ts$/, '.js')), ...Object.keys(COMPONENT_SOURCES).map((c) => `${c}/main.js`)];

/** The esbuild settings every bundle this project ships shares (the image's and the CLI's). */
export const COMMON = {
  absWorkingDir: ROOT,
  bundle: true,
  platform: 'node',
  target: 'node24',
  // tr46 (via node-fetch) asks for "punycode", which outside node_modules/ gets Node's deprecated built-in and its warning
  alias: { punycode: 'punycode/' },
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'eof',
  metafile: true,
  logLevel: 'silent',
} as const satisfies BuildOptions;

// a CommonJS package's require() of a built-in, inside an ES module bundle, needs a require of its own
const ESM_REQUIRE = "import { createRequire as __rlmeshCreateRequire } from 'node:module'; const require = __rlmeshCreateRequire(import.meta.url);";

// An ES module import of a built-in makes Node build its ES module facade, which reads every export, and
// reading node:http's or node:crypto's lazy exports loads parts of Node that the component never uses
// (node:http's WebSocket loads Node's own undici: 35 ms of a 550 ms agent restart). Imported through
// require() instead, a built-in's exports are read only when the code uses them.
const BUILTIN = new RegExp(`^(node:)?(${builtinModules.join('|')})$`);
const builtinsThroughRequire: Plugin = {
  name: 'builtins-through-require',
  setup(b) {
    b.onResolve({ filter: BUILTIN }, (args) => (args.kind === 'import-statement' || args.kind === 'dynamic-import' ? { path: args.path, namespace: 'builtin-require' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'builtin-require' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: 'js' }));
  },
};

/**
 * Node keeps some deprecation warnings for code outside node_modules/, which a
 * bundle is: node-fetch's url.parse() on every Kubernetes request (DEP0169),
 * Buffer() (DEP0005), the punycode built-in (DEP0040). They name code we do
 * not call, so every start of a bundle (the image's entrypoint, the CLI's
 * single executable) turns these three off, and only these.
 */
export const BUNDLE_NODE_FLAGS = ['--disable-warning=DEP0169', '--disable-warning=DEP0005', '--disable-warning=DEP0040'] as const;

/**
 * esbuild escapes non-ASCII characters in code but keeps the legal comments as
 * written, and one "ä" in a licence makes V8 hold the whole 5 MiB bundle as a
 * two-byte string: twice the memory, and a slower read and hash at every
 * start (agent: 5 MiB more RSS, about 10 ms more CPU to its first request).
 * Escaped, the comment reads the same and the file is pure ASCII.
 */
export function asciiOnly(code: string): string {
  return code.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Fails on any esbuild warning: an import.meta in CommonJS or a require() that cannot resolve is a bundle that breaks at run time. */
export async function failOnWarnings(what: string, warnings: Parameters<typeof formatMessages>[0]): Promise<void> {
  if (warnings.length > 0) throw new Error(`esbuild warned while bundling ${what}:\n${(await formatMessages(warnings, { kind: 'warning' })).join('\n')}`);
}

/**
 * Writes every bundle under `outDir`: the ES modules at the path tsc would give them, each component's
 * script at <name>/main.js. Returns esbuild's metafile of both (which inputs went into which output).
 */
export async function bundleEntrypoints(outDir: string): Promise<Metafile> {
  mkdirSync(outDir, { recursive: true });
  const shared = { ...COMMON, outbase: ROOT, outdir: outDir, format: 'esm', splitting: false, plugins: [builtinsThroughRequire], write: false } satisfies BuildOptions;
  const [modules, components] = await Promise.all([
    build({ ...shared, entryPoints: [...MODULE_ENTRYPOINTS], banner: { js: ESM_REQUIRE } }),
    build({
      ...shared,
      entryPoints: Object.entries(COMPONENT_SOURCES).map(([name, source]) => ({ in: source, out: `${name}/main` })),
      banner: { js: '(async function (require, __rlmeshImportMetaUrl) {"use strict";' },
      footer: { js: '\n})' },
      // a script has no import.meta; the dispatcher runs the component, so none is the main module
      define: { 'import.meta.url': '__rlmeshImportMetaUrl', 'import.meta.main': 'false' },
    }),
  ]);
  await failOnWarnings('the image', [...modules.warnings, ...components.warnings]);
  // a component bundle that is not a valid script (an export, an import statement, import.meta) fails here, not in a pod
  for (const f of components.outputFiles) checkScript(f.path, f.text);
  for (const f of [...modules.outputFiles, ...components.outputFiles]) {
    mkdirSync(dirname(f.path), { recursive: true });
    writeFileSync(f.path, asciiOnly(f.text));
  }
  const metafile: Metafile = { inputs: { ...modules.metafile.inputs, ...components.metafile.inputs }, outputs: { ...modules.metafile.outputs, ...components.metafile.outputs } };
  writeFileSync(join(outDir, 'THIRD-PARTY-NOTICES.txt'), thirdPartyNotices(metafile, 'The rlmesh-runtime image bundles code from these open-source packages.'));
  return metafile;
}

function checkScript(path: string, code: string): void {
  try {
    new Script(code, { filename: path });
  } catch (err) {
    throw new Error(
      `esbuild's bundle ${path} does not compile as a script (${String(err)}): a component's code must not keep ES module syntax; ` +
        'a component whose entry exports something must start from an entry that runs it instead (as scripts/release/cli-entry.ts does)',
      { cause: err },
    );
  }
}

/** The npm packages whose code went into one output file, as `name` (no version), sorted. */
export function packagesIn(metafile: Metafile, output: string): string[] {
  const out = Object.entries(metafile.outputs).find(([path]) => path.endsWith(output));
  if (!out) throw new Error(`no bundle ${output} in the metafile (outputs: ${Object.keys(metafile.outputs).join(', ')})`);
  return [...new Set(Object.keys(out[1].inputs).map(packageDir).filter((d): d is string => d !== undefined).map((d) => d.slice(d.lastIndexOf('node_modules/') + 'node_modules/'.length)))].sort();
}

/** The package folder an input path lies in (node_modules/@scope/name or node_modules/name), if any. */
export function packageDir(input: string): string | undefined {
  const parts = input.split('/');
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return undefined;
  return parts.slice(0, at + 1 + (parts[at + 1]!.startsWith('@') ? 2 : 1)).join('/');
}

/** Each npm package a bundle took code from, with its license text (and NOTICE), sorted by name. */
export function thirdPartyNotices(metafile: Metafile, heading: string): string {
  const dirs = new Set(Object.keys(metafile.inputs).map(packageDir).filter((d): d is string => d !== undefined).map((d) => join(ROOT, d)));
  const entries = [...dirs].map((dir) => {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name: string; version: string; license?: string };
    const files = readdirSync(dir).sort();
    const pick = (re: RegExp): string | undefined => files.find((f) => re.test(f) && statSync(join(dir, f)).isFile());
    const license = pick(/^(licen[cs]e|copying)([.-]|$)/i);
    const notice = pick(/^notice([.-]|$)/i); // Apache-2.0 asks for the NOTICE to travel with the code
    const text = [license ? readFileSync(join(dir, license), 'utf8').trim() : `License: ${pkg.license ?? 'not stated'} (the package ships no license file)`, ...(notice ? [readFileSync(join(dir, notice), 'utf8').trim()] : [])].join('\n\n');
    return { id: `${pkg.name}@${pkg.version}`, text: `${pkg.name} ${pkg.version} (${pkg.license ?? 'license not stated'})\n\n${text}\n` };
  });
  const unique = [...new Map(entries.map((e) => [e.id, e])).values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return `${heading}\n\n${unique.map((e) => e.text).join(`\n${'-'.repeat(78)}\n\n`)}`;
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { out: { type: 'string', default: join(ROOT, 'dist', 'app') } }, strict: true });
  const t0 = performance.now();
  const metafile = await bundleEntrypoints(resolve(values.out));
  for (const [path, o] of Object.entries(metafile.outputs)) console.log(`${path}  ${(o.bytes / 2 ** 20).toFixed(2)} MiB`);
  console.error(`bundled ${BUNDLES.length} entrypoints in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
