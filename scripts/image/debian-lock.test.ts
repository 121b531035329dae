// The checks of the Debian lock, fed apt-cache output as apt prints it and
// temporary files for the .debs; and the committed lock, which must pin every
// package the image base takes files from.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkDeb, checkIndex, formatLock, LOCK_FILE, lockedPackages, parseAptShow, parseLock, type LockEntry } from './debian-lock.ts';
import { DEBIAN_PACKAGES } from './debian-packages.ts';
import { tempDir } from '../../test/support/temp.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const DEB = 'the bytes of libc6_2.36-9+deb12u14_amd64.deb';
const entry: LockEntry = { name: 'libc6', version: '2.36-9+deb12u14', arch: 'amd64', sha256: sha256(DEB) };

/** A record of `apt-cache show`, as the Packages lists give it. */
const indexRecord = (version: string, hash: string) => `Package: libc6
Source: glibc
Version: ${version}
Installed-Size: 12987
Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>
Architecture: amd64
Depends: libgcc-s1
Description: GNU C Library: Shared libraries
Description-md5: fc3001eaff4a0e5e0d02f3d5e5b3b5f2
Section: libs
Priority: optional
Filename: pool/main/g/glibc/libc6_${version}_amd64.deb
Size: 2757936
MD5sum: 0123456789abcdef0123456789abcdef
SHA256: ${hash}
`;
/** dpkg's status record of the installed version: no file, no hash. */
const statusRecord = (version: string) => `Package: libc6
Status: install ok installed
Priority: optional
Architecture: amd64
Version: ${version}
Description: GNU C Library: Shared libraries
`;

describe('the lock file', () => {
  it('reads back what it writes, comments and blank lines aside', () => {
    const other: LockEntry = { name: 'ca-certificates', version: '20250419~deb12u2', arch: 'all', sha256: sha256('ca') };
    expect(parseLock(`${formatLock([entry, other])}\n`)).toEqual([entry, other]);
  });

  it('refuses a line that is not name version arch sha256, naming the line and the command that regenerates it', () => {
    expect(() => parseLock(`# comment\nlibc6 2.36-9+deb12u14 amd64 abc123\n`, 'debian.lock')).toThrow(
      'debian.lock:2: "libc6 2.36-9+deb12u14 amd64 abc123" is not "name version arch sha256" (64 hex digits); regenerate the lock with node scripts/image/debian-lock.ts --update',
    );
  });

  it('must pin a package the base takes files from', () => {
    const file = join(tempDir('rlmesh-debian-lock-'), 'debian.lock');
    writeFileSync(file, formatLock([entry]));
    expect(lockedPackages(['libc6'], file)).toEqual([entry]);
    expect(() => lockedPackages(['libc6', 'base-files'], file)).toThrow(`${file} has no entry for the Debian package base-files`);
  });

  it('as committed, pins every package of the image base', () => {
    expect(lockedPackages(DEBIAN_PACKAGES).map((e) => e.name)).toEqual(DEBIAN_PACKAGES);
    expect(parseLock(readFileSync(LOCK_FILE, 'utf8')).length).toBe(DEBIAN_PACKAGES.length);
  });
});

describe("the lock against apt's index", () => {
  it('reads the records of apt-cache show, the status record with no SHA256', () => {
    expect(parseAptShow(`${statusRecord('2.36-9+deb12u14')}\n${indexRecord('2.36-9+deb12u14', entry.sha256)}\n`)).toEqual([
      { name: 'libc6', version: '2.36-9+deb12u14', arch: 'amd64', sha256: undefined },
      { name: 'libc6', version: '2.36-9+deb12u14', arch: 'amd64', sha256: entry.sha256 },
    ]);
  });

  it('accepts the locked version when every index record gives it the locked SHA-256', () => {
    const records = parseAptShow(`${indexRecord(entry.version, entry.sha256)}\n${indexRecord(entry.version, entry.sha256)}`);
    expect(() => checkIndex(entry, records)).not.toThrow();
  });

  it('refuses a version apt no longer lists, even when dpkg has it installed, saying how to move on', () => {
    for (const shown of ['', statusRecord(entry.version), indexRecord('2.36-9+deb12u15', sha256('newer'))]) {
      expect(() => checkIndex(entry, parseAptShow(shown))).toThrow(
        /the Debian package libc6 2\.36-9\+deb12u14 \(amd64\) that .*debian\.lock pins is not in apt's index .*Run apt-get update; .*node scripts\/image\/debian-lock\.ts --update/,
      );
    }
  });

  it('refuses a locked SHA-256 the index does not give that version, naming both', () => {
    const other = sha256('other bytes');
    expect(() => checkIndex(entry, parseAptShow(indexRecord(entry.version, other)))).toThrow(
      `apt's signed index gives the Debian package libc6 2.36-9+deb12u14 (amd64) the SHA-256 ${other}, but ${LOCK_FILE} pins ${entry.sha256}.`,
    );
  });
});

describe('the downloaded .deb against the lock', () => {
  const dir = tempDir('rlmesh-debian-lock-');
  const deb = join(dir, 'libc6_2.36-9+deb12u14_amd64.deb');

  it('accepts the pinned bytes', () => {
    writeFileSync(deb, DEB);
    expect(() => checkDeb(entry, deb)).not.toThrow();
  });

  it('refuses other bytes, naming the package and both hashes', () => {
    writeFileSync(deb, `${DEB}, changed`);
    expect(() => checkDeb(entry, deb)).toThrow(
      `the Debian package libc6 2.36-9+deb12u14 (amd64) (${deb}) is not the pinned file: its SHA-256 is ${sha256(`${DEB}, changed`)}, the pin says ${entry.sha256}.`,
    );
  });
});
