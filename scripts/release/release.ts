// The release: builds every image this repository ships (no container engine),
// pushes them, records the pushed digests in copies of both charts, pushes the
// charts as OCI artifacts, builds the CLI (npm package + single executable),
// and prints and writes (release.json) what it published. Each image carries
// its SBOM inside (scripts/image/sbom.ts); the CLI's lie beside its artifacts.
//
//   npm run release -- --registry HOST[:PORT] [--plain-http] [--authfile FILE] [--out DIR]
//
// --authfile is a docker config file (auths) with the registry's push credential,
// read by skopeo (--authfile) and helm (--registry-config).
//
// helm and skopeo come from PATH, or else from the project's own build of the test
// tools (test/cluster/build-binaries.sh, ~/.cache/rlmesh-testbin/<version>/bin): tools.ts.
//
// Images go to HOST/rlmesh/<name>:<tag>, charts to oci://HOST/rlmesh/charts.
// The charts keep naming registry.rlmesh.dev/rlmesh/<name>: the registry the
// spec's egress prerequisites allow. A mirror (or the local cluster's
// registry, which stands in for it) serves the same digests.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildImage, chartField, RECIPES } from '../image/build.ts';
import { ROOT, sourceFacts } from '../image/source.ts';
import { buildCli } from './cli.ts';
import { stampDigests, type ReleasedImage } from './stamp-digests.ts';
import { findTool } from './tools.ts';

/** Which chart runs which of the images. */
const CHARTS: Record<string, string[]> = {
  'rlmesh-runtime': ['rlmesh-runtime', 'kubectl'],
  'rlmesh-observability': ['prometheus'],
};

export type Published = {
  version: string;
  revision: string;
  registry: string;
  images: Record<string, { repository: string; tag: string; digest: string; ref: string }>;
  charts: Record<string, { ref: string; version: string }>;
  cli: { npmPackage: string; executable: string; sboms: { npmPackage: string; executable: string } };
};

/** Runs helm or skopeo, found on PATH or where test/cluster/build-binaries.sh built it (tools.ts). */
function tool(cmd: string, args: string[]): string {
  const path = findTool(cmd);
  try {
    return execFileSync(path, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`release: ${cmd} ${args.join(' ')} failed: ${(e.stderr ?? e.message).trim()}`, { cause: err });
  }
}

export async function release(opts: { registry: string; plainHttp: boolean; out: string; authFile?: string }): Promise<Published> {
  const { registry, plainHttp, out } = opts;
  const skopeoAuth = opts.authFile ? ['--authfile', opts.authFile] : [];
  const helmAuth = opts.authFile ? ['--registry-config', opts.authFile] : [];
  // before minutes of image builds: both tools are there
  for (const cmd of ['skopeo', 'helm']) findTool(cmd);
  const versions = Object.keys(CHARTS).map((c) => chartField(c, 'version'));
  if (new Set(versions).size !== 1) throw new Error(`release: the charts have versions ${versions.join(', ')}; both charts are released under one version, so make their Chart.yaml versions equal`);
  const version = versions[0]!;
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const tls = plainHttp ? ['--dest-tls-verify=false'] : [];

  const images: Published['images'] = {};
  for (const [name, recipe] of Object.entries(RECIPES)) {
    const t0 = Date.now();
    const image = await buildImage(name, recipe, join(out, 'images'));
    const target = `${registry}/${recipe.repository}`;
    tool('skopeo', ['copy', '--quiet', '--retry-times', '3', '--preserve-digests', ...skopeoAuth, ...tls, `oci:${image.layout}:${image.tag}`, `docker://${target}:${image.tag}`]);
    // what the registry now serves by digest is exactly the manifest built here
    const served = tool('skopeo', ['inspect', '--raw', ...skopeoAuth, ...(plainHttp ? ['--tls-verify=false'] : []), `docker://${target}@${image.digest}`]);
    const builtManifest = readFileSync(join(image.layout, 'blobs/sha256', image.digest.slice(7)), 'utf8');
    if (served !== builtManifest) throw new Error(`release: ${target}@${image.digest} does not serve the manifest that was built; the registry rewrote it`);
    images[name] = { repository: recipe.repository, tag: image.tag, digest: image.digest, ref: `${target}@${image.digest}` };
    const size = image.layers.reduce((s, l) => s + l.size, 0);
    console.error(`[release] ${target}:${image.tag}@${image.digest} (${(size / 2 ** 20).toFixed(1)} MiB, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }

  const charts: Published['charts'] = {};
  for (const [chart, names] of Object.entries(CHARTS)) {
    const src = join(out, 'charts-src', chart);
    cpSync(join(ROOT, 'charts', chart), src, { recursive: true });
    const released: Record<string, ReleasedImage> = Object.fromEntries(names.map((n) => [n, { tag: images[n]!.tag, digest: images[n]!.digest }]));
    stampDigests(src, released);
    tool('helm', ['package', src, '-d', join(out, 'charts')]);
    const tgz = join(out, 'charts', `${chart}-${version}.tgz`);
    tool('helm', ['push', tgz, `oci://${registry}/rlmesh/charts`, ...helmAuth, ...(plainHttp ? ['--plain-http'] : [])]);
    charts[chart] = { ref: `oci://${registry}/rlmesh/charts/${chart}`, version };
    console.error(`[release] ${charts[chart].ref} --version ${version}`);
  }

  const cli = await buildCli({ outDir: join(out, 'cli') });
  const published: Published = { version, revision: sourceFacts().revision, registry, images, charts, cli: { npmPackage: cli.npmPackage, executable: cli.executable, sboms: cli.sboms } };
  writeFileSync(join(out, 'release.json'), `${JSON.stringify(published, null, 2)}\n`);
  return published;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { registry: { type: 'string' }, 'plain-http': { type: 'boolean', default: false }, authfile: { type: 'string' }, out: { type: 'string' } } });
  if (!values.registry) {
    console.error('usage: npm run release -- --registry HOST[:PORT] [--plain-http] [--authfile FILE] [--out DIR]\n  pushes every image and both charts to that registry and builds the CLI into DIR (default dist/release)');
    process.exit(2);
  }
  const t0 = Date.now();
  const published = await release({ registry: values.registry, plainHttp: values['plain-http'], ...(values.authfile ? { authFile: resolve(values.authfile) } : {}), out: resolve(values.out ?? join(ROOT, 'dist/release')) });
  console.log(`published rlmesh ${published.version} to ${published.registry} in ${((Date.now() - t0) / 1000).toFixed(0)} s:`);
  for (const [name, i] of Object.entries(published.images)) console.log(`  image  ${name.padEnd(22)} ${i.ref}  (tag ${i.tag})`);
  for (const [name, c] of Object.entries(published.charts)) console.log(`  chart  ${name.padEnd(22)} ${c.ref} --version ${c.version}`);
  console.log(`  cli    npm package            ${published.cli.npmPackage}`);
  console.log(`  cli    linux/amd64 executable ${published.cli.executable}`);
  console.log(`  cli    SBOMs (CycloneDX 1.5)  ${published.cli.sboms.npmPackage} ${published.cli.sboms.executable}`);
}
