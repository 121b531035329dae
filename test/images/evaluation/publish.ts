// Puts the test evaluation image into the local cluster's registry for tests:
// builds it once per source (cached under the cluster folder), pushes it with
// skopeo over plain HTTP, and names it by digest.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { readImage } from '../../../scripts/image/oci-layout.ts';
import { ROOT, sourceFacts } from '../../../scripts/image/source.ts';
import { clusterDir, clusterInfo } from '../../support/cluster.ts';
import { buildEvaluationImage, goVersion, IMAGE_NAME, REPOSITORY } from './build.ts';

/** What the image's bytes depend on besides Debian's packages: the commit, the files that make it, the Go version. */
const INPUTS = ['test/images/evaluation/main.go', 'test/images/evaluation/go.mod', 'test/images/evaluation/build.ts', 'scripts/image/static-binary.ts', 'scripts/image/debian-base.ts', 'scripts/image/oci-layout.ts'];

function cacheKey(revision: string): string {
  const h = createHash('sha256').update(`${revision}\n${goVersion()}\n`);
  for (const f of INPUTS) h.update(`${f}\n`).update(readFileSync(join(ROOT, f)));
  return `${revision.slice(0, 12)}${revision.endsWith('-dirty') ? '-dirty' : ''}-${h.digest('hex').slice(0, 12)}`;
}

/** The image's OCI layout for this source, built unless an earlier call built it already. */
export async function evaluationLayout(): Promise<{ layout: string; tag: string; digest: string }> {
  const source = sourceFacts();
  const cache = join(clusterDir(), 'test-images/evaluation');
  const dir = join(cache, cacheKey(source.revision));
  const layout = join(dir, IMAGE_NAME);
  if (!existsSync(join(layout, 'index.json'))) {
    mkdirSync(cache, { recursive: true });
    // builds of other sources are stale: keep one (but not another process's build in progress)
    for (const old of readdirSync(cache)) if (!old.includes('.partial-')) rmSync(join(cache, old), { recursive: true, force: true });
    const tmp = `${dir}.partial-${process.pid}`;
    await buildEvaluationImage(tmp, source);
    renameSync(tmp, dir);
  }
  return { layout, tag: source.version, digest: readImage(layout).digest };
}

/** Builds (once per source) and pushes the image; returns `<registry>/rlmesh-test/evaluation@sha256:…`. */
export async function publishEvaluationImage(): Promise<{ ref: string; digest: string }> {
  const { registry } = clusterInfo();
  const { layout, tag, digest } = await evaluationLayout();
  const target = `${registry}/${REPOSITORY}`;
  try {
    execFileSync('skopeo', ['copy', '--quiet', '--dest-tls-verify=false', '--preserve-digests', `oci:${layout}:${tag}`, `docker://${target}:${tag}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT') throw new Error('skopeo is not on PATH: test/install-deps.sh installs it', { cause: err });
    throw new Error(`skopeo copy of the test evaluation image to ${target}:${tag} failed: ${e.stderr?.toString().trim() ?? e.message}`, { cause: err });
  }
  return { ref: `${target}@${digest}`, digest };
}
