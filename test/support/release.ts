// What the release step of the test command (scripts/release/release.ts run
// against the local registry) published: image digests, chart references, CLI
// artifacts. Tests install and pull from it instead of the working tree.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceFacts } from '../../scripts/image/source.ts';
import { clusterDir, clusterInfo, registryAuthFile } from './cluster.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

export type PublishedImage = { repository: string; tag: string; digest: string; ref: string };
export type Release = {
  version: string;
  revision: string;
  registry: string;
  images: Record<string, PublishedImage>;
  charts: Record<string, { ref: string; version: string }>;
  cli: { npmPackage: string; executable: string; sboms: { npmPackage: string; executable: string } };
};

export const releaseFile = (): string => join(clusterDir(), 'release', 'release.json');

export function releaseInfo(): Release {
  try {
    return JSON.parse(readFileSync(releaseFile(), 'utf8')) as Release;
  } catch {
    throw new Error(`no release in the local registry (${releaseFile()} missing): run the test command's release step, node test/support/release.ts (it runs npm run release against the local registry)`);
  }
}

/** The runtime chart as the release published it to the local registry. */
export function releasedChart(): { ref: string; version: string } {
  return releaseInfo().charts['rlmesh-runtime']!;
}

/** Runs the release against the local cluster's registry (the test command's release step; the demo's first run). */
export function releaseToLocalRegistry(): Release {
  const env = { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${clusterInfo().bin}:${process.env.PATH}` };
  execFileSync(join(ROOT, 'node_modules/.bin/node'), [join(ROOT, 'scripts/release/release.ts'), '--registry', clusterInfo().registry, '--plain-http', '--authfile', registryAuthFile(), '--out', dirname(releaseFile())], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env,
  });
  return releaseInfo();
}

/** A release exists and was built from the tree as it is now (same commit, same dirty state). */
export function releaseIsCurrent(): boolean {
  return existsSync(releaseFile()) && releaseInfo().revision === sourceFacts().revision;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) releaseToLocalRegistry();
