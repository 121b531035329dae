// What the release step of the test command (scripts/release/release.ts run
// against the local registry) published: image digests, chart references, CLI
// artifacts. Tests install and pull from it instead of the working tree.
// The test release is always signed, with a cosign key pair made once per
// cluster (signingKey()).
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceFacts } from '../../scripts/image/source.ts';
import type { Published } from '../../scripts/release/release.ts';
import { clusterDir, clusterInfo, registryAuthFile } from './cluster.ts';
import { cosignBinary, generateKeyPair } from './signatures.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** release.json, as scripts/release/release.ts writes it. */
export type Release = Published;
export type PublishedImage = Published['images'][string];

export const releaseFile = (): string => join(clusterDir(), 'release', 'release.json');

export function releaseInfo(): Release {
  let r: Release;
  try {
    r = JSON.parse(readFileSync(releaseFile(), 'utf8')) as Release;
  } catch {
    throw new Error(`no release in the local registry (${releaseFile()} missing): run the test command's release step, node test/support/release.ts (it runs npm run release against the local registry)`);
  }
  const registry = clusterInfo().registry;
  if (r.registry !== registry) {
    throw new Error(`the release in ${releaseFile()} was published to the registry at ${r.registry}, which is gone: the local cluster was started again since and its registry is ${registry}; run node test/support/release.ts to publish to it`);
  }
  return r;
}

/** The runtime chart as the release published it to the local registry. */
export function releasedChart(): { ref: string; version: string } {
  return releaseInfo().charts['rlmesh-runtime']!;
}

/**
 * The cluster's release signing key pair (cosign.key, cosign.pub) and its random password, made on first use
 * and kept in the cluster folder (the password in a file only its owner reads).
 */
export function signingKey(): { key: string; publicKey: string; password: string } {
  const dir = join(clusterDir(), 'signing');
  const key = join(dir, 'cosign.key');
  const publicKey = join(dir, 'cosign.pub');
  const passwordFile = join(dir, 'cosign.password');
  if (!existsSync(key) || !existsSync(publicKey) || !existsSync(passwordFile)) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const password = randomBytes(24).toString('base64url');
    writeFileSync(passwordFile, password, { mode: 0o600 });
    chmodSync(passwordFile, 0o600);
    generateKeyPair(cosignBinary(), dir, password);
  }
  return { key, publicKey, password: readFileSync(passwordFile, 'utf8') };
}

/** Runs the release against the local cluster's registry (the test command's release step; the demo's first run), signed with signingKey(). */
export function releaseToLocalRegistry(): Release {
  const signing = signingKey();
  const cosign = cosignBinary();
  const env = { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${clusterInfo().bin}:${dirname(cosign)}:${process.env.PATH}`, COSIGN_PASSWORD: signing.password };
  execFileSync(
    join(ROOT, 'node_modules/.bin/node'),
    [join(ROOT, 'scripts/release/release.ts'), '--registry', clusterInfo().registry, '--plain-http', '--authfile', registryAuthFile(), '--signing-key', signing.key, '--out', dirname(releaseFile())],
    { stdio: ['ignore', 'inherit', 'inherit'], env },
  );
  return releaseInfo();
}

/** A release exists in the running cluster's registry, was built from the tree as it is now (same commit, same dirty state) and is signed with the cluster's current key. */
export function releaseIsCurrent(): boolean {
  if (!existsSync(releaseFile())) return false;
  const r = JSON.parse(readFileSync(releaseFile(), 'utf8')) as Release;
  if (r.registry !== clusterInfo().registry) return false;
  const publicKey = join(clusterDir(), 'signing', 'cosign.pub');
  return r.revision === sourceFacts().revision && !!r.signing && existsSync(publicKey) && r.signing.publicKey === readFileSync(publicKey, 'utf8');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) releaseToLocalRegistry();
