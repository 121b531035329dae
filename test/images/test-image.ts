// What the tests' own images (the evaluation program, the pause sandbox) share:
// one static binary on the engine-free base written as an OCI layout, a build
// cache keyed by everything the bytes depend on, and a push by digest to the
// local registry. Tests only.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readImage, writeImage, type BuiltImage } from '../../scripts/image/oci-layout.ts';
import { ociLabels, ROOT, sourceFacts, type SourceFacts } from '../../scripts/image/source.ts';
import { assembleStaticImage } from '../../scripts/image/static-binary.ts';
import { registryAuthFile } from '../support/cluster.ts';

export type TestImage = {
  /** OCI layout folder name, e.g. rlmesh-test-pause */
  imageName: string;
  /** the binary's name under /usr/local/bin */
  binaryName: string;
  description: string;
  /** compiles the binary into a folder; returns its path */
  compile: (dir: string) => string;
  /** the compiler's label, e.g. ['dev.rlmesh.image.gcc-version', '12.2.0'] */
  toolLabel: () => [string, string];
};

/** Builds the image into `<outDir>/<imageName>`, tagged with package.json's version and dated by `source`. */
export async function buildTestImage(image: TestImage, outDir: string, source: SourceFacts): Promise<BuiltImage> {
  const stage = mkdtempSync(join(tmpdir(), `${image.imageName}-`));
  try {
    const binary = image.compile(stage);
    const [toolKey, toolVersion] = image.toolLabel();
    const { layers, config } = assembleStaticImage(join(stage, 'image'), {
      binary,
      name: image.binaryName,
      labels: { ...ociLabels(image.imageName, source.version, source), 'org.opencontainers.image.description': image.description, [toolKey]: toolVersion },
    });
    const layout = join(outDir, image.imageName);
    rmSync(layout, { recursive: true, force: true });
    return await writeImage({ layout, tag: source.version, layers, config, created: source.created });
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/**
 * The image's OCI layout for this source under `cacheDir`, built unless an
 * earlier call built it. The key covers the commit, the compiler and every file
 * in `inputs`; builds for other keys are removed (not another process's build
 * in progress).
 */
export async function cachedTestImage(image: TestImage, cacheDir: string, inputs: string[]): Promise<{ layout: string; tag: string; digest: string }> {
  const source = sourceFacts();
  const h = createHash('sha256').update(`${source.revision}\n${image.toolLabel()[1]}\n`);
  for (const f of inputs) h.update(`${f}\n`).update(readFileSync(join(ROOT, f)));
  const dir = join(cacheDir, `${source.revision.slice(0, 12)}${source.revision.endsWith('-dirty') ? '-dirty' : ''}-${h.digest('hex').slice(0, 12)}`);
  const layout = join(dir, image.imageName);
  if (!existsSync(join(layout, 'index.json'))) {
    mkdirSync(cacheDir, { recursive: true });
    for (const old of readdirSync(cacheDir)) if (!old.includes('.partial-')) rmSync(join(cacheDir, old), { recursive: true, force: true });
    const tmp = `${dir}.partial-${process.pid}`;
    await buildTestImage(image, tmp, source);
    renameSync(tmp, dir);
  }
  return { layout, tag: source.version, digest: readImage(layout).digest };
}

/** Pushes a layout to `target` (host:port/repository, plain HTTP) with its digest preserved, as the registry's publisher. */
export function pushTestImage(layout: { layout: string; tag: string }, target: string): void {
  try {
    execFileSync('skopeo', ['copy', '--quiet', '--retry-times', '3', '--dest-tls-verify=false', '--dest-authfile', registryAuthFile(), '--preserve-digests', `oci:${layout.layout}:${layout.tag}`, `docker://${target}:${layout.tag}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT') throw new Error('skopeo is not on PATH: test/install-deps.sh installs it', { cause: err });
    throw new Error(`skopeo copy of ${layout.layout} to ${target}:${layout.tag} failed: ${e.stderr?.toString().trim() ?? e.message}`, { cause: err });
  }
}
