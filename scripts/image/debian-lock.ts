// The Debian packages of the images' base, pinned: debian.lock records each
// one's name, version, architecture and the SHA-256 of its .deb. The build
// checks that apt's index (the Packages lists apt keeps only from Release
// files whose signature it verified) gives that version that hash, downloads
// exactly that version and checks the .deb's hash against the lock.
//
//   node scripts/image/debian-lock.ts --check    the lock against apt's index, downloading nothing
//   node scripts/image/debian-lock.ts --update   records apt's candidate version of each package
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkSha256 } from './pins.ts';
import { DEBIAN_PACKAGES } from './debian-packages.ts';

export const LOCK_FILE = join(dirname(fileURLToPath(import.meta.url)), 'debian.lock');
const UPDATE = 'node scripts/image/debian-lock.ts --update';
const HEADER = `# The Debian packages of the images' base: name version architecture sha256-of-the-.deb.
# The image build checks each against apt's signed index and the downloaded .deb.
# Regenerate (after apt-get update) with: ${UPDATE}
`;

export type LockEntry = { name: string; version: string; arch: string; sha256: string };
/** One record of a package version in apt's index; `sha256` is absent for dpkg's status record of an installed package. */
export type IndexRecord = { name: string; version: string; arch: string; sha256?: string };

export function parseLock(text: string, file = LOCK_FILE): LockEntry[] {
  const entries: LockEntry[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '' || line.startsWith('#')) return;
    const [name, version, arch, sha256, ...rest] = line.trim().split(/\s+/);
    if (!name || !version || !arch || !/^[0-9a-f]{64}$/.test(sha256 ?? '') || rest.length > 0) {
      throw new Error(`${file}:${i + 1}: "${line}" is not "name version arch sha256" (64 hex digits); regenerate the lock with ${UPDATE}`);
    }
    entries.push({ name, version, arch, sha256: sha256! });
  });
  return entries;
}

export function formatLock(entries: LockEntry[]): string {
  return HEADER + entries.map((e) => `${e.name} ${e.version} ${e.arch} ${e.sha256}\n`).join('');
}

/** The entry for each of `names`, in that order. */
export function lockedPackages(names: string[], file = LOCK_FILE): LockEntry[] {
  const lock = parseLock(readFileSync(file, 'utf8'), file);
  return names.map((name) => {
    const entry = lock.find((e) => e.name === name);
    if (!entry) throw new Error(`${file} has no entry for the Debian package ${name}, which the image base takes files from: add it with ${UPDATE}`);
    return entry;
  });
}

/** The records of `apt-cache show` output (RFC 822 stanzas separated by blank lines). */
export function parseAptShow(text: string): IndexRecord[] {
  return text
    .split(/\n\s*\n/)
    .filter((s) => s.trim() !== '')
    .map((stanza) => {
      const field = (name: string) => new RegExp(`^${name}: *(.*)$`, 'm').exec(stanza)?.[1]?.trim();
      return { name: field('Package') ?? '', version: field('Version') ?? '', arch: field('Architecture') ?? '', sha256: field('SHA256') };
    });
}

/**
 * Throws unless apt's index holds the locked version for the locked
 * architecture, and every record of it gives the locked SHA-256.
 */
export function checkIndex(entry: LockEntry, records: IndexRecord[]): void {
  const id = `${entry.name} ${entry.version} (${entry.arch})`;
  const indexed = records.filter((r) => r.name === entry.name && r.version === entry.version && r.arch === entry.arch && r.sha256);
  if (indexed.length === 0) {
    throw new Error(
      `image base: the Debian package ${id} that ${LOCK_FILE} pins is not in apt's index (the mirror has dropped that version, or apt's lists are stale). ` +
        `Run apt-get update; if it is still missing, move to the version Debian serves now: ${UPDATE}, review the diff and commit it`,
    );
  }
  const differing = indexed.find((r) => r.sha256 !== entry.sha256);
  if (differing) {
    throw new Error(
      `image base: apt's signed index gives the Debian package ${id} the SHA-256 ${differing.sha256}, but ${LOCK_FILE} pins ${entry.sha256}. ` +
        `Debian does not rebuild a version in place: find out which is wrong before building (a hand-edited lock, or a mirror serving other files), then regenerate the lock with ${UPDATE}`,
    );
  }
}

/** Throws unless the downloaded .deb is the bytes the lock pins. */
export function checkDeb(entry: LockEntry, path: string): void {
  checkSha256({
    what: `the Debian package ${entry.name} ${entry.version} (${entry.arch})`,
    path,
    expected: entry.sha256,
    remedy: `apt-get download gave other bytes than ${LOCK_FILE} pins and apt's index lists: do not build with it; check the mirror in /etc/apt/sources.list(.d) and build again.`,
  });
}

/** `apt-cache show name=version`: apt's records of that version ([] when it has none). */
export function aptRecords(name: string, version: string): IndexRecord[] {
  const r = spawnSync('apt-cache', ['show', `${name}=${version}`], { encoding: 'utf8' });
  if (r.error) throw new Error(`image base: cannot run apt-cache (${r.error.message}); the base is assembled from Debian packages: build on Debian 12 (bookworm)`, { cause: r.error });
  return r.status === 0 ? parseAptShow(r.stdout) : [];
}

function candidate(name: string): string {
  const out = execFileSync('apt-cache', ['policy', name], { encoding: 'utf8' });
  const version = /^\s*Candidate:\s*(\S+)/m.exec(out)?.[1];
  if (!version || version === '(none)') throw new Error(`apt has no candidate version of ${name}: run apt-get update (with a Debian 12 mirror in /etc/apt/sources.list(.d)) and try again`);
  return version;
}

/** The lock for `names` from apt's index: each package's candidate version and its SHA-256. */
export function resolveLock(names: string[], nativeArch: string): LockEntry[] {
  return names.map((name) => {
    const version = candidate(name);
    const hashes = new Set(aptRecords(name, version).filter((r) => r.sha256 && (r.arch === nativeArch || r.arch === 'all')).map((r) => `${r.arch} ${r.sha256!}`));
    if (hashes.size !== 1) throw new Error(`apt's index gives ${name} ${version} ${hashes.size === 0 ? 'no' : 'more than one'} SHA-256 for ${nativeArch} or all; cannot lock it`);
    const [arch, sha256] = [...hashes][0]!.split(' ') as [string, string];
    return { name, version, arch, sha256 };
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { update: { type: 'boolean' }, check: { type: 'boolean' } } });
  if (values.update) {
    const arch = execFileSync('dpkg', ['--print-architecture'], { encoding: 'utf8' }).trim();
    const entries = resolveLock(DEBIAN_PACKAGES, arch);
    writeFileSync(LOCK_FILE, formatLock(entries));
    console.log(entries.map((e) => `${e.name} ${e.version} ${e.arch} ${e.sha256}`).join('\n'));
    console.log(`wrote ${LOCK_FILE}: review the diff and commit it`);
  } else if (values.check) {
    for (const entry of lockedPackages(DEBIAN_PACKAGES)) checkIndex(entry, aptRecords(entry.name, entry.version));
    console.log(`${LOCK_FILE}: every package is in apt's index with the locked SHA-256`);
  } else {
    throw new Error('usage: node scripts/image/debian-lock.ts --check | --update');
  }
}
