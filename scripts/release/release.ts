// The release: builds every image this repository ships (no container engine),
// pushes them, records the pushed digests in copies of both charts, pushes the
// charts as OCI artifacts, builds the CLI (npm package + single executable),
// and prints and writes (release.json) what it published. Each image carries
// its SBOM inside (scripts/image/sbom.ts); the CLI's lie beside its artifacts.
// With a signing key it signs every image and chart by digest, attaches each
// image's SBOM and SLSA provenance as signed attestations, and signs the CLI
// artifacts, all with cosign (cosign.ts); the public key goes beside them.
//
//   npm run release -- --registry HOST[:PORT] (--signing-key FILE [--signing-key-url URL] | --unsigned) [--plain-http] [--authfile FILE] [--out DIR]
//
// --authfile is a docker config file (auths) with the registry's push credential,
// read by skopeo (--authfile), helm (--registry-config) and cosign (DOCKER_CONFIG).
// --signing-key is a cosign private key (cosign generate-key-pair); its password
// comes from COSIGN_PASSWORD; --signing-key-url is where cosign.pub will be published, which each
// chart's Chart.yaml then names with the key's fingerprint (artifacthub.io/signKey). --unsigned publishes without signatures: only for
// development, since nobody can then verify what they pull.
//
// helm and skopeo come from PATH, or else from the project's own build of the test
// tools (test/cluster/build-binaries.sh, ~/.cache/rlmesh-testbin/<version>/bin): tools.ts.
//
// Images go to HOST/rlmesh/<name>:<tag>, charts to oci://HOST/rlmesh/charts.
// The charts keep naming registry.rlmesh.dev/rlmesh/<name>: the registry the
// spec's egress prerequisites allow. A mirror (or the local cluster's
// registry, which stands in for it) serves the same digests.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildImage, chartField, RECIPES } from '../image/build.ts';
import { ROOT, sourceFacts } from '../image/source.ts';
import { buildCli } from './cli.ts';
import { Signer } from './cosign.ts';
import { extractImageSbom } from './image-sbom.ts';
import { pinnedInputs, provenance, PROVENANCE_TYPE } from './provenance.ts';
import { stampDigests, stampSignKey, type ReleasedImage } from './stamp-digests.ts';
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
  images: Record<string, { repository: string; tag: string; digest: string; ref: string; attestations?: { sbom: string; provenance: string } }>;
  charts: Record<string, { ref: string; version: string; digest: string }>;
  cli: { npmPackage: string; executable: string; sboms: { npmPackage: string; executable: string }; bundles?: { npmPackage: string; executable: string } };
  /** The key that verifies every signature and attestation (PEM, and the file beside release.json); null for a release published with --unsigned. */
  signing: { publicKey: string; publicKeyFile: string; transparencyLog: false } | null;
};

/** Runs helm or skopeo, found on PATH or where test/cluster/build-binaries.sh built it (tools.ts); returns what it printed on stdout and stderr. */
function tool(cmd: string, args: string[]): { stdout: string; stderr: string } {
  const r = spawnSync(findTool(cmd), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 2 ** 20 });
  if (r.error || r.status !== 0) throw new Error(`release: ${cmd} ${args.join(' ')} failed: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}`, { cause: r.error });
  return { stdout: r.stdout, stderr: r.stderr };
}

/** The digest helm push reports for the chart it pushed ("Digest: sha256:…"). */
export function pushedChartDigest(output: string, chart: string): string {
  const digest = /^Digest: (sha256:[0-9a-f]{64})$/m.exec(output)?.[1];
  if (!digest) throw new Error(`release: helm push of ${chart} printed no "Digest: sha256:…" line (it printed: ${output.trim() || 'nothing'}); the release signs charts by digest and needs helm 3.8 or later, which prints it`);
  return digest;
}

/** keyUrl: where cosign.pub will be published, recorded in each chart's artifacthub.io/signKey */
export type SigningChoice = { key: string; keyUrl?: string } | { unsigned: true };

export async function release(opts: { registry: string; plainHttp: boolean; out: string; authFile?: string; signing: SigningChoice; command: string }): Promise<Published> {
  const { registry, plainHttp, out } = opts;
  const skopeoAuth = opts.authFile ? ['--authfile', opts.authFile] : [];
  const helmAuth = opts.authFile ? ['--registry-config', opts.authFile] : [];
  // before minutes of image builds: the tools are there, and the key opens with its password
  for (const cmd of ['skopeo', 'helm']) findTool(cmd);
  const signer = 'key' in opts.signing ? new Signer(opts.signing.key, { plainHttp, ...(opts.authFile ? { authFile: opts.authFile } : {}) }) : undefined;
  const versions = Object.keys(CHARTS).map((c) => chartField(c, 'version'));
  if (new Set(versions).size !== 1) throw new Error(`release: the charts have versions ${versions.join(', ')}; both charts are released under one version, so make their Chart.yaml versions equal`);
  const version = versions[0]!;
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const tls = plainHttp ? ['--dest-tls-verify=false'] : [];
  const revision = sourceFacts().revision;
  // the same inputs for every image: hashed once
  const inputs = signer ? pinnedInputs() : [];
  const attestations = join(out, 'attestations');
  let signing: Published['signing'] = null;
  if (signer) {
    const publicKey = signer.publicKey();
    const publicKeyFile = join(out, 'cosign.pub');
    writeFileSync(publicKeyFile, publicKey);
    signing = { publicKey, publicKeyFile, transparencyLog: false };
    mkdirSync(attestations, { recursive: true });
  }

  const images: Published['images'] = {};
  for (const [name, recipe] of Object.entries(RECIPES)) {
    const t0 = Date.now();
    const image = await buildImage(name, recipe, join(out, 'images'));
    const target = `${registry}/${recipe.repository}`;
    tool('skopeo', ['copy', '--quiet', '--retry-times', '3', '--preserve-digests', ...skopeoAuth, ...tls, `oci:${image.layout}:${image.tag}`, `docker://${target}:${image.tag}`]);
    // what the registry now serves by digest is exactly the manifest built here
    const served = tool('skopeo', ['inspect', '--raw', ...skopeoAuth, ...(plainHttp ? ['--tls-verify=false'] : []), `docker://${target}@${image.digest}`]).stdout;
    const builtManifest = readFileSync(join(image.layout, 'blobs/sha256', image.digest.slice(7)), 'utf8');
    if (served !== builtManifest) throw new Error(`release: ${target}@${image.digest} does not serve the manifest that was built; the registry rewrote it`);
    const ref = `${target}@${image.digest}`;
    images[name] = { repository: recipe.repository, tag: image.tag, digest: image.digest, ref };
    if (signer) {
      signer.sign(ref);
      const sbom = extractImageSbom(image.layout, image.digest, name, join(attestations, `${name}.cdx.json`));
      signer.attest(ref, 'cyclonedx', sbom);
      const predicate = join(attestations, `${name}.provenance.json`);
      writeFileSync(predicate, `${JSON.stringify(provenance({ image: name, command: opts.command, revision, inputs }), null, 2)}\n`);
      signer.attest(ref, PROVENANCE_TYPE, predicate);
      images[name].attestations = { sbom, provenance: predicate };
    }
    const size = image.layers.reduce((s, l) => s + l.size, 0);
    console.error(`[release] ${target}:${image.tag}@${image.digest} (${(size / 2 ** 20).toFixed(1)} MiB, ${((Date.now() - t0) / 1000).toFixed(1)} s${signer ? '; signed, SBOM and provenance attested' : ''})`);
  }

  const charts: Published['charts'] = {};
  for (const [chart, names] of Object.entries(CHARTS)) {
    const src = join(out, 'charts-src', chart);
    cpSync(join(ROOT, 'charts', chart), src, { recursive: true });
    const released: Record<string, ReleasedImage> = Object.fromEntries(names.map((n) => [n, { tag: images[n]!.tag, digest: images[n]!.digest }]));
    stampDigests(src, released);
    if (signing && 'keyUrl' in opts.signing && opts.signing.keyUrl) stampSignKey(src, { publicKey: signing.publicKey, url: opts.signing.keyUrl });
    tool('helm', ['package', src, '-d', join(out, 'charts')]);
    const tgz = join(out, 'charts', `${chart}-${version}.tgz`);
    const pushed = tool('helm', ['push', tgz, `oci://${registry}/rlmesh/charts`, ...helmAuth, ...(plainHttp ? ['--plain-http'] : [])]);
    const digest = pushedChartDigest(`${pushed.stdout}\n${pushed.stderr}`, chart);
    signer?.sign(`${registry}/rlmesh/charts/${chart}@${digest}`);
    charts[chart] = { ref: `oci://${registry}/rlmesh/charts/${chart}`, version, digest };
    console.error(`[release] ${charts[chart].ref} --version ${version} (${digest}${signer ? ', signed' : ''})`);
  }

  const cli = await buildCli({ outDir: join(out, 'cli') });
  const bundles = signer ? { npmPackage: signer.signBlob(cli.npmPackage), executable: signer.signBlob(cli.executable) } : undefined;
  const published: Published = { version, revision, registry, images, charts, cli: { npmPackage: cli.npmPackage, executable: cli.executable, sboms: cli.sboms, ...(bundles ? { bundles } : {}) }, signing };
  writeFileSync(join(out, 'release.json'), `${JSON.stringify(published, null, 2)}\n`);
  return published;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { registry: { type: 'string' }, 'plain-http': { type: 'boolean', default: false }, authfile: { type: 'string' }, out: { type: 'string' }, 'signing-key': { type: 'string' }, 'signing-key-url': { type: 'string' }, unsigned: { type: 'boolean', default: false } },
  });
  const usage =
    'usage: npm run release -- --registry HOST[:PORT] (--signing-key FILE [--signing-key-url URL] | --unsigned) [--plain-http] [--authfile FILE] [--out DIR]\n' +
    '  pushes every image and both charts to that registry and builds the CLI into DIR (default dist/release);\n' +
    '  --signing-key FILE: a cosign private key (cosign generate-key-pair), its password in COSIGN_PASSWORD, signs all of it;\n' +
    '  --signing-key-url URL: the https:// address where you publish DIR/cosign.pub, recorded in each chart for Artifact Hub (artifacthub.io/signKey);\n' +
    '  --unsigned: publishes without signatures, for development only (nobody can verify what they pull)';
  if (!values.registry) {
    console.error(usage);
    process.exit(2);
  }
  if (Boolean(values['signing-key']) === values.unsigned) {
    console.error(
      `release: ${values.unsigned ? 'both --signing-key and --unsigned are given' : 'neither --signing-key nor --unsigned is given'}: ` +
        'a release is signed with a cosign key so users can verify its images, charts and CLI; pass the key with --signing-key FILE, ' +
        'or --unsigned to publish for development without signatures\n' +
        usage,
    );
    process.exit(2);
  }
  if (values['signing-key-url'] && !values['signing-key']) {
    console.error(`release: --signing-key-url is given without --signing-key: it says where the signing key's public half is published, so it needs the key the release signs with\n${usage}`);
    process.exit(2);
  }
  if (values.unsigned) console.error('[release] publishing UNSIGNED (--unsigned): nothing can verify these images, charts and CLI artifacts; use this only for development');
  const t0 = Date.now();
  const published = await release({
    registry: values.registry,
    plainHttp: values['plain-http'],
    ...(values.authfile ? { authFile: resolve(values.authfile) } : {}),
    out: resolve(values.out ?? join(ROOT, 'dist/release')),
    signing: values['signing-key'] ? { key: resolve(values['signing-key']), ...(values['signing-key-url'] ? { keyUrl: values['signing-key-url'] } : {}) } : { unsigned: true },
    command: ['node', 'scripts/release/release.ts', ...process.argv.slice(2)].join(' '),
  });
  console.log(`published rlmesh ${published.version} to ${published.registry} in ${((Date.now() - t0) / 1000).toFixed(0)} s:`);
  for (const [name, i] of Object.entries(published.images)) console.log(`  image  ${name.padEnd(22)} ${i.ref}  (tag ${i.tag})`);
  for (const [name, c] of Object.entries(published.charts)) console.log(`  chart  ${name.padEnd(22)} ${c.ref} --version ${c.version}`);
  console.log(`  cli    npm package            ${published.cli.npmPackage}`);
  console.log(`  cli    linux/amd64 executable ${published.cli.executable}`);
  console.log(`  cli    SBOMs (CycloneDX 1.5)  ${published.cli.sboms.npmPackage} ${published.cli.sboms.executable}`);
  if (published.signing && published.cli.bundles) {
    console.log(`  cli    signatures (bundles)   ${published.cli.bundles.npmPackage} ${published.cli.bundles.executable}`);
    console.log(`  signed with cosign; verify with the public key ${published.signing.publicKeyFile} (no transparency log: --insecure-ignore-tlog=true)`);
  } else {
    console.log('  UNSIGNED (--unsigned): for development only');
  }
}
