// The local cluster's DNS image: CoreDNS as test/cluster/build-binaries.sh
// builds it from the Go module proxy, on the same engine-free base as the
// shipped static images, running as user 65532. Tests only: the cluster DNS of
// a user's cluster is theirs.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cachedTestImage, pushTestImage, type TestImage } from '../test-image.ts';

export const IMAGE_NAME = 'rlmesh-test-coredns';
export const REPOSITORY = 'rlmesh-test/coredns';

function corednsImage(bin: string): TestImage {
  const binary = join(bin, 'coredns');
  const stamp = join(bin, '.coredns.stamp');
  if (!existsSync(binary) || !existsSync(stamp)) throw new Error(`${binary} is missing: bash test/cluster/build-binaries.sh builds it`);
  const version = readFileSync(stamp, 'utf8').trim();
  return {
    imageName: IMAGE_NAME,
    binaryName: 'coredns',
    description: 'rlmesh-runtime tests only: CoreDNS, the DNS of the local cluster',
    compile: () => binary,
    toolLabel: () => ['dev.rlmesh.image.coredns-version', version],
  };
}

const INPUTS = ['test/images/coredns/build.ts', 'test/images/test-image.ts', 'scripts/image/static-binary.ts', 'scripts/image/debian-base.ts', 'scripts/image/debian-packages.ts', 'scripts/image/oci-layout.ts'];

/** Builds (once per source and CoreDNS version) and pushes the image to `registry` (host:port, plain HTTP). */
export async function publishCorednsImage(registry: string, bin: string, cacheDir: string): Promise<{ repository: string; digest: string }> {
  const built = await cachedTestImage(corednsImage(bin), cacheDir, INPUTS);
  pushTestImage(built, `${registry}/${REPOSITORY}`);
  return { repository: REPOSITORY, digest: built.digest };
}
