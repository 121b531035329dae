// The sandbox (pause) image of the local cluster's real nodes: pause.c beside
// this file, compiled static with gcc, on the same engine-free base as the
// shipped static images (scripts/image/static-binary.ts), running as user
// 65532. Tests only: nothing under test/ is part of the release.
//
//   node test/images/pause/build.ts [--out DIR]   (default dist/test-images)
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { readImage, writeImage, type BuiltImage } from '../../../scripts/image/oci-layout.ts';
import { ROOT, sourceFacts, type SourceFacts } from '../../../scripts/image/source.ts';
import { assembleStaticImage } from '../../../scripts/image/static-binary.ts';

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

/** Builds the image into the OCI layout `<outDir>/rlmesh-test-pause`, tagged with package.json's version. */
export async function buildPauseImage(outDir: string, source: SourceFacts = sourceFacts()): Promise<BuiltImage> {
  const stage = mkdtempSync(join(tmpdir(), 'rlmesh-test-pause-'));
  try {
    const binary = buildPauseBinary(stage);
    const { layers, config } = assembleStaticImage(join(stage, 'image'), {
      binary,
      name: BINARY,
      labels: {
        'org.opencontainers.image.title': IMAGE_NAME,
        'org.opencontainers.image.description': 'rlmesh-runtime tests only: the pod sandbox process of the local cluster\'s real nodes',
        'org.opencontainers.image.version': source.version,
        'org.opencontainers.image.revision': source.revision,
        'org.opencontainers.image.created': source.created.toISOString(),
        'dev.rlmesh.image.gcc-version': gccVersion(),
      },
    });
    const layout = join(outDir, IMAGE_NAME);
    rmSync(layout, { recursive: true, force: true });
    return await writeImage({ layout, tag: source.version, layers, config, created: source.created });
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

const INPUTS = ['test/images/pause/pause.c', 'test/images/pause/build.ts', 'scripts/image/static-binary.ts', 'scripts/image/debian-base.ts', 'scripts/image/oci-layout.ts'];

/** The image's OCI layout for this source under `cacheDir`, built unless an earlier call built it. */
export async function pauseLayout(cacheDir: string): Promise<{ layout: string; tag: string; digest: string }> {
  const source = sourceFacts();
  const h = createHash('sha256').update(`${source.revision}\n${gccVersion()}\n`);
  for (const f of INPUTS) h.update(`${f}\n`).update(readFileSync(join(ROOT, f)));
  const dir = join(cacheDir, `${source.revision.slice(0, 12)}-${h.digest('hex').slice(0, 12)}`);
  const layout = join(dir, IMAGE_NAME);
  if (!existsSync(join(layout, 'index.json'))) {
    mkdirSync(cacheDir, { recursive: true });
    for (const old of readdirSync(cacheDir)) if (!old.includes('.partial-')) rmSync(join(cacheDir, old), { recursive: true, force: true });
    const tmp = `${dir}.partial-${process.pid}`;
    await buildPauseImage(tmp, source);
    renameSync(tmp, dir);
  }
  return { layout, tag: source.version, digest: readImage(layout).digest };
}

/** Builds (once per source) and pushes the image to `registry` (host:port, plain HTTP); returns its digest. */
export async function publishPauseImage(registry: string, cacheDir: string): Promise<{ repository: string; digest: string }> {
  const { layout, tag, digest } = await pauseLayout(cacheDir);
  const target = `${registry}/${REPOSITORY}`;
  try {
    execFileSync('skopeo', ['copy', '--quiet', '--dest-tls-verify=false', '--preserve-digests', `oci:${layout}:${tag}`, `docker://${target}:${tag}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT') throw new Error('skopeo is not on PATH: test/install-deps.sh installs it', { cause: err });
    throw new Error(`skopeo copy of the pause image to ${target}:${tag} failed: ${e.stderr?.toString().trim() ?? e.message}`, { cause: err });
  }
  return { repository: REPOSITORY, digest };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: 'string' } } });
  const image = await buildPauseImage(resolve(values.out ?? join(ROOT, 'dist/test-images')));
  console.log(`${IMAGE_NAME}:${image.tag} ${image.digest} ${image.layout}`);
}
