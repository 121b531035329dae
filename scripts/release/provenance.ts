// The SLSA v1 provenance predicate the release attaches to each image
// (cosign attest --type slsaprovenance1): the commit it was built from, the
// command that built it, and the digests of the inputs the build pins, each
// read from the repository when the release runs.
//
// buildType and builder.id are URNs of this project, not URLs anything serves:
// the release runs on whatever machine runs it, not on a hosted build platform.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseLock } from '../image/debian-lock.ts';
import { nodePin, sha256File } from '../image/pins.ts';
import { ROOT } from '../image/source.ts';

export const PROVENANCE_TYPE = 'slsaprovenance1';

/** The go.sum files that pin the Go-built tools of the images (kubectl's, prometheus's) and of the test cluster. */
export const GO_SUMS = ['test/cluster/go/kubernetes/go.sum', 'test/observability/go/prometheus/go.sum', 'test/observability/go/promtool/go.sum'];

export type ResourceDescriptor = { name: string; uri?: string; digest: Record<string, string> };

export type Provenance = {
  buildDefinition: {
    buildType: string;
    externalParameters: { image: string; command: string; revision: string };
    resolvedDependencies: ResourceDescriptor[];
  };
  runDetails: { builder: { id: string } };
};

/** The inputs whose digests the build checks, as the repository records them now. */
export function pinnedInputs(root = ROOT): ResourceDescriptor[] {
  const node = nodePin(join(root, 'scripts/image/pins.json'));
  const lock = join(root, 'scripts/image/debian.lock');
  const debs = parseLock(readFileSync(lock, 'utf8'), lock);
  return [
    { name: `node-v${node.version}-${node.platform}/bin/node`, digest: { sha256: node.sha256 } },
    ...debs.map((d) => ({ name: `${d.name}_${d.version}_${d.arch}.deb`, uri: `pkg:deb/debian/${d.name}@${encodeURIComponent(d.version)}?arch=${d.arch}`, digest: { sha256: d.sha256 } })),
    { name: 'package-lock.json', digest: { sha256: sha256File(join(root, 'package-lock.json')) } },
    ...GO_SUMS.map((f) => ({ name: f, digest: { sha256: sha256File(join(root, f)) } })),
  ];
}

/**
 * The predicate for `image`, built by `command` from `revision` (a commit, with "-dirty" when the tree had
 * uncommitted changes: then the commit alone does not reproduce it, and the predicate says so by that suffix).
 */
export function provenance(opts: { image: string; command: string; revision: string; root?: string; inputs?: ResourceDescriptor[] }): Provenance {
  const commit = opts.revision.replace(/-dirty$/, '');
  return {
    buildDefinition: {
      buildType: 'urn:rlmesh:release:v1',
      externalParameters: { image: opts.image, command: opts.command, revision: opts.revision },
      resolvedDependencies: [{ name: 'source', digest: { gitCommit: commit } }, ...(opts.inputs ?? pinnedInputs(opts.root))],
    },
    runDetails: { builder: { id: 'urn:rlmesh:release:scripts/release/release.ts' } },
  };
}
