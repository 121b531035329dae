// What the release step of the test command (scripts/release/release.ts run
// against the local registry) published: image digests, chart references, CLI
// artifacts. Tests install and pull from it instead of the working tree.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { clusterDir } from './cluster.ts';

export type PublishedImage = { repository: string; tag: string; digest: string; ref: string };
export type Release = {
  version: string;
  registry: string;
  images: Record<string, PublishedImage>;
  charts: Record<string, { ref: string; version: string }>;
  cli: { npmPackage: string; executable: string };
};

export const releaseFile = (): string => join(clusterDir(), 'release', 'release.json');

export function releaseInfo(): Release {
  try {
    return JSON.parse(readFileSync(releaseFile(), 'utf8')) as Release;
  } catch {
    throw new Error(`no release in the local registry (${releaseFile()} missing): run the test command's release step (see test/ci: node scripts/release/release.ts --registry <local registry> --plain-http --out <cluster dir>/release)`);
  }
}
