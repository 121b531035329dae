// The test evaluation image: the Go program beside this file (main.go), built
// static and reproducibly, on the same engine-free base as the shipped static
// images (scripts/image/static-binary.ts), running as user 65532. Tests only:
// nothing under test/ is part of the product build or the release.
//
//   node test/images/evaluation/build.ts [--out DIR]   (default dist/test-images)
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BuiltImage } from '../../../scripts/image/oci-layout.ts';
import { ROOT, sourceFacts, type SourceFacts } from '../../../scripts/image/source.ts';
import { buildTestImage, type TestImage } from '../test-image.ts';

export const SOURCE_DIR = dirname(fileURLToPath(import.meta.url));
export const IMAGE_NAME = 'rlmesh-test-evaluation';
export const REPOSITORY = 'rlmesh-test/evaluation';
const BINARY = 'rlmesh-test-evaluation';

/** The go command: on PATH, else the usual /usr/local/go. */
export function goCommand(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) if (dir && existsSync(join(dir, 'go'))) return join(dir, 'go');
  if (existsSync('/usr/local/go/bin/go')) return '/usr/local/go/bin/go';
  throw new Error('the test evaluation image is built with Go: put go on PATH (test/install-deps.sh installs it)');
}

/**
 * Builds the program into `dir`; returns the binary's path. Static (no cgo),
 * no paths, build ID or VCS stamp in it, the local toolchain only and no
 * module downloads (it uses the standard library alone): the same source and
 * Go version give the same bytes.
 */
export function buildEvaluationBinary(dir: string): string {
  const out = join(dir, BINARY);
  execFileSync(goCommand(), ['build', '-trimpath', '-ldflags', '-s -w -buildid=', '-o', out, '.'], {
    cwd: SOURCE_DIR,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, CGO_ENABLED: '0', GOOS: 'linux', GOARCH: 'amd64', GOAMD64: 'v1', GOFLAGS: '-buildvcs=false', GOTOOLCHAIN: 'local', GOPROXY: 'off', GOWORK: 'off' },
  });
  return out;
}

/** Go version that builds the image (part of what the digest depends on). */
export function goVersion(): string {
  return execFileSync(goCommand(), ['env', 'GOVERSION'], { encoding: 'utf8', env: { ...process.env, GOTOOLCHAIN: 'local' } }).trim();
}

export const EVALUATION_IMAGE: TestImage = {
  imageName: IMAGE_NAME,
  binaryName: BINARY,
  description: 'rlmesh-runtime tests only: exits with TEST_EXIT_CODE after TEST_DURATION, reads TEST_ARTIFACT, probes TEST_PROBE_URL through the proxy and directly, PUTs to TEST_UPLOAD_URL through the proxy, makes the TEST_ATTEMPTS connections and DNS queries, listens on TEST_LISTEN',
  compile: buildEvaluationBinary,
  toolLabel: () => ['dev.rlmesh.image.go-version', goVersion()],
};

/**
 * Builds the image into the OCI layout `<outDir>/rlmesh-test-evaluation`,
 * tagged with package.json's version. `source` (default: this checkout's)
 * dates it and labels it; pass one to build twice from identical inputs.
 */
export function buildEvaluationImage(outDir: string, source: SourceFacts = sourceFacts()): Promise<BuiltImage> {
  return buildTestImage(EVALUATION_IMAGE, outDir, source);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: 'string' } } });
  const t0 = Date.now();
  const image = await buildEvaluationImage(resolve(values.out ?? join(ROOT, 'dist/test-images')));
  const size = image.layers.reduce((s, l) => s + l.size, 0);
  console.log(`${IMAGE_NAME}:${image.tag} ${image.digest} ${(size / 2 ** 20).toFixed(1)} MiB compressed, ${((Date.now() - t0) / 1000).toFixed(1)} s, ${image.layout}`);
}
