// The sandbox (pause) image of the local cluster's real nodes: pause.c beside
// this file, compiled static with gcc, on the same engine-free base as the
// shipped static images (scripts/image/static-binary.ts), running as user
// 65532. Tests only: nothing under test/ is part of the release.
//
//   node test/images/pause/build.ts [--out DIR]   (default dist/test-images)
import { execFileSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BuiltImage } from '../../../scripts/image/oci-layout.ts';
import { ROOT, sourceFacts, type SourceFacts } from '../../../scripts/image/source.ts';
import { buildTestImage, cachedTestImage, pushTestImage, type TestImage } from '../test-image.ts';

export const SOURCE_DIR = dirname(fileURLToPath(import.meta.url));
export const IMAGE_NAME = 'rlmesh-test-pause';
export const REPOSITORY = 'rlmesh-test/pause';
const BINARY = 'pause';

function gccVersion(): string {
  try {
    return execFileSync('gcc', ['-dumpfullversion'], { encoding: 'utf8' }).trim();
  } catch (err) {
    throw new Error('the pause image is built with gcc and a static glibc: test/install-deps.sh installs gcc and libc6-dev', { cause: err });
  }
}

/** Compiles pause.c into `dir`: static, stripped, no build ID, so one source and one gcc give one binary. */
export function buildPauseBinary(dir: string): string {
  const out = join(dir, BINARY);
  gccVersion();
  execFileSync('gcc', ['-static', '-Os', '-s', '-Wl,--build-id=none', '-o', out, join(SOURCE_DIR, 'pause.c')], { stdio: ['ignore', 'inherit', 'inherit'] });
  return out;
}

const PAUSE_IMAGE: TestImage = {
  imageName: IMAGE_NAME,
  binaryName: BINARY,
  description: "rlmesh-runtime tests only: the pod sandbox process of the local cluster's real nodes",
  compile: buildPauseBinary,
  toolLabel: () => ['dev.rlmesh.image.gcc-version', gccVersion()],
};

/** Builds the image into the OCI layout `<outDir>/rlmesh-test-pause`, tagged with package.json's version. */
export function buildPauseImage(outDir: string, source: SourceFacts = sourceFacts()): Promise<BuiltImage> {
  return buildTestImage(PAUSE_IMAGE, outDir, source);
}

const INPUTS = ['test/images/pause/pause.c', 'test/images/pause/build.ts', 'test/images/test-image.ts', 'scripts/image/static-binary.ts', 'scripts/image/debian-base.ts', 'scripts/image/debian-packages.ts', 'scripts/image/oci-layout.ts'];

/** The image's OCI layout for this source under `cacheDir`, built unless an earlier call built it. */
export function pauseLayout(cacheDir: string): Promise<{ layout: string; tag: string; digest: string }> {
  return cachedTestImage(PAUSE_IMAGE, cacheDir, INPUTS);
}

/** Builds (once per source) and pushes the image to `registry` (host:port, plain HTTP); returns its digest. */
export async function publishPauseImage(registry: string, cacheDir: string): Promise<{ repository: string; digest: string }> {
  const built = await pauseLayout(cacheDir);
  pushTestImage(built, `${registry}/${REPOSITORY}`);
  return { repository: REPOSITORY, digest: built.digest };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: 'string' } } });
  const image = await buildPauseImage(resolve(values.out ?? join(ROOT, 'dist/test-images')));
  console.log(`${IMAGE_NAME}:${image.tag} ${image.digest} ${image.layout}`);
}
