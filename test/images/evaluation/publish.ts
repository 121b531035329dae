// Puts the test evaluation image into the local cluster's registry for tests:
// builds it once per source (cached under the cluster folder), pushes it with
// skopeo over plain HTTP, and names it by digest.
import { join } from 'node:path';
import { clusterDir, clusterInfo } from '../../support/cluster.ts';
import { cachedTestImage, pushTestImage } from '../test-image.ts';
import { EVALUATION_IMAGE, REPOSITORY } from './build.ts';

/** What the image's bytes depend on besides Debian's packages: the commit, the files that make it, the Go version. */
const INPUTS = ['test/images/evaluation/main.go', 'test/images/evaluation/go.mod', 'test/images/evaluation/build.ts', 'test/images/test-image.ts', 'scripts/image/static-binary.ts', 'scripts/image/debian-base.ts', 'scripts/image/debian-packages.ts', 'scripts/image/oci-layout.ts'];

/** The image's OCI layout for this source, built unless an earlier call built it already. */
export function evaluationLayout(): Promise<{ layout: string; tag: string; digest: string }> {
  return cachedTestImage(EVALUATION_IMAGE, join(clusterDir(), 'test-images/evaluation'), INPUTS);
}

/** Builds (once per source) and pushes the image; returns `<registry>/rlmesh-test/evaluation@sha256:…`. */
export async function publishEvaluationImage(): Promise<{ ref: string; digest: string }> {
  const built = await evaluationLayout();
  const target = `${clusterInfo().registry}/${REPOSITORY}`;
  pushTestImage(built, target);
  return { ref: `${target}@${built.digest}`, digest: built.digest };
}
