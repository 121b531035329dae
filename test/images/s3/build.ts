// An S3 server to run inside the local cluster, as a customer's MinIO would:
// versitygw (built from its Go module by test/controller/build-s3-server.sh) on
// the engine-free base of the other test images, pushed to the local registry
// by digest. Tests only.
import { join } from 'node:path';
import { clusterDir, clusterInfo } from '../../support/cluster.ts';
import { versitygwBinary } from '../../controller/s3-server.ts';
import { cachedTestImage, pushTestImage, type TestImage } from '../test-image.ts';

export const REPOSITORY = 'rlmesh-test/versitygw';
const VERSION = process.env.VERSITYGW_VERSION ?? 'v1.8.0';

const S3_IMAGE: TestImage = {
  imageName: 'rlmesh-test-versitygw',
  binaryName: 'versitygw',
  description: 'rlmesh-runtime tests only: versitygw, an S3 server inside the local cluster',
  compile: versitygwBinary,
  toolLabel: () => ['dev.rlmesh.image.versitygw-version', VERSION],
};

const INPUTS = ['test/images/s3/build.ts', 'test/controller/build-s3-server.sh', 'test/support/go-tool.sh', 'test/images/test-image.ts', 'scripts/image/static-binary.ts', 'scripts/image/debian-base.ts', 'scripts/image/debian-packages.ts', 'scripts/image/oci-layout.ts'];

/** Builds (once per source) and pushes the image; returns its repository and digest. */
export async function publishS3Image(): Promise<{ repository: string; digest: string }> {
  const built = await cachedTestImage(S3_IMAGE, join(clusterDir(), 'test-images/versitygw'), INPUTS);
  pushTestImage(built, `${clusterInfo().registry}/${REPOSITORY}`);
  return { repository: REPOSITORY, digest: built.digest };
}
