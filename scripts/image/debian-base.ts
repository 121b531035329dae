// The image's base, from Debian's packages only: the shared libraries the Node
// binary links (glibc, libstdc++, libgcc), the CA certificate bundle, the OS
// release file, a passwd/group naming the non-root user 65532, and a dpkg
// status entry per package so image scanners see what is inside. No shell, no
// package manager, no other binary. Each package is the version and the bytes
// debian.lock pins (debian-lock.ts).
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { walk } from './oci-layout.ts';
import { errorMessage } from '../../lib/error-fields.ts';
import { aptRecords, checkDeb, checkIndex, lockedPackages, type LockEntry } from './debian-lock.ts';
import { dep5Licenses } from './debian-copyright.ts';
import { PACKAGES } from './debian-packages.ts';
import { POD_USERS } from '../../lib/fixed-names.ts';

export const NONROOT = { uid: POD_USERS.runtime.uid, gid: POD_USERS.runtime.gid, name: 'nonroot', home: 'home/nonroot' } as const;

/** `licenses`: what the package's copyright file names, when it is machine-readable (debian-copyright.ts); else left out. */
export type DebianPackage = { name: string; version: string; arch: string; licenses?: string[] };


function apt(args: string[], cwd: string): void {
  execFileSync('apt-get', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/**
 * Downloads the locked version of each package into `dir` and returns each
 * .deb's path, after checking the lock against apt's index (running
 * `apt-get update` once if apt's lists lack a locked version) and each
 * downloaded .deb against the lock.
 */
function download(dir: string, names: string[]): Map<string, string> {
  const arch = execFileSync('dpkg', ['--print-architecture'], { encoding: 'utf8' }).trim();
  if (arch !== 'amd64') throw new Error(`image base: this machine's Debian architecture is ${arch}; the image is linux/amd64, so build it on an amd64 Debian machine`);
  const locked = lockedPackages(names);
  const indexed = (e: LockEntry) => aptRecords(e.name, e.version).some((r) => r.version === e.version && r.arch === e.arch && r.sha256);
  if (!locked.every(indexed)) {
    try {
      apt(['update', '-qq'], dir);
    } catch (err) {
      throw new Error(
        `image base: apt-get update failed (${(err as { stderr?: Buffer }).stderr?.toString().trim() ?? errorMessage(err)}). ` +
          'The base is assembled from Debian packages: run this on Debian 12 (bookworm) with a reachable Debian mirror in /etc/apt/sources.list(.d).',
        { cause: err },
      );
    }
  }
  for (const entry of locked) checkIndex(entry, aptRecords(entry.name, entry.version));
  try {
    apt(['download', ...locked.map((e) => `${e.name}=${e.version}`)], dir);
  } catch (err) {
    throw new Error(
      `image base: apt-get download ${locked.map((e) => `${e.name}=${e.version}`).join(' ')} failed (${(err as { stderr?: Buffer }).stderr?.toString().trim() ?? errorMessage(err)}). ` +
        'Check that the Debian mirror in /etc/apt/sources.list(.d) is reachable and still serves these versions (node scripts/image/debian-lock.ts --check).',
      { cause: err },
    );
  }
  const debs = readdirSync(dir).filter((f) => f.endsWith('.deb'));
  return new Map(
    locked.map((entry) => {
      const deb = debs.find((f) => f.startsWith(`${entry.name}_`));
      if (!deb) throw new Error(`image base: apt-get download gave no .deb for ${entry.name}=${entry.version}`);
      checkDeb(entry, join(dir, deb));
      return [entry.name, join(dir, deb)];
    }),
  );
}

function field(deb: string, name: string): string {
  return execFileSync('dpkg-deb', ['-f', deb, name], { encoding: 'utf8' }).trim();
}

/**
 * Fills `rootfs` with the base and returns the packages it came from. Static
 * binaries (kubectl, Prometheus) need no shared libraries: `libraries: false`.
 */
export function assembleDebianBase(rootfs: string, opts: { libraries: boolean }): DebianPackage[] {
  const work = mkdtempSync(join(tmpdir(), 'rlmesh-image-debs-'));
  try {
    const wanted = PACKAGES.filter((p) => opts.libraries || !p.libraries);
    const debs = download(work, wanted.map((p) => p.name));
    const packages: DebianPackage[] = [];
    for (const spec of wanted) {
      const path = debs.get(spec.name)!;
      const x = join(work, `x-${spec.name}`);
      execFileSync('dpkg-deb', ['-x', path, x]);
      for (const rel of walk(x)) {
        const keep = spec.keep(rel) || rel === `usr/share/doc/${spec.name}/copyright`;
        if (!keep || existsSync(join(rootfs, rel))) continue;
        const st = lstatSync(join(x, rel));
        if (st.isDirectory()) {
          mkdirSync(join(rootfs, rel), { recursive: true });
          chmodSync(join(rootfs, rel), st.mode & 0o7777);
        } else {
          mkdirSync(dirname(join(rootfs, rel)), { recursive: true });
          cpSync(join(x, rel), join(rootfs, rel), { verbatimSymlinks: true });
        }
      }
      const copyright = join(x, 'usr/share/doc', spec.name, 'copyright');
      // libgcc-s1's and libstdc++6's doc folder is a link into gcc-12-base, which the base does not take
      const licenses = existsSync(copyright) && lstatSync(copyright).isFile() ? dep5Licenses(readFileSync(copyright, 'utf8')) : undefined;
      packages.push({ name: field(path, 'Package'), version: field(path, 'Version'), arch: field(path, 'Architecture'), ...(licenses ? { licenses } : {}) });
      // what distroless does: one status file per package, read by image scanners
      const control = execFileSync('dpkg-deb', ['-f', path], { encoding: 'utf8' });
      mkdirSync(join(rootfs, 'var/lib/dpkg/status.d'), { recursive: true });
      writeFileSync(join(rootfs, 'var/lib/dpkg/status.d', spec.name), `${control.trimEnd()}\nStatus: install ok installed\n`);
    }
    writeCaBundle(rootfs);
    writeUsers(rootfs);
    return packages;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

// What update-ca-certificates would write: every certificate of the package, in order, in one file.
function writeCaBundle(rootfs: string): void {
  const dir = join(rootfs, 'usr/share/ca-certificates');
  const certs = walk(dir).filter((p) => p.endsWith('.crt'));
  if (certs.length === 0) throw new Error('image base: ca-certificates holds no certificate');
  mkdirSync(join(rootfs, 'etc/ssl/certs'), { recursive: true });
  writeFileSync(join(rootfs, 'etc/ssl/certs/ca-certificates.crt'), certs.map((c) => readFileSync(join(dir, c), 'utf8').trimEnd() + '\n').join(''));
  rmSync(dir, { recursive: true });
}

function writeUsers(rootfs: string): void {
  const { uid, gid, name, home } = NONROOT;
  mkdirSync(join(rootfs, 'etc'), { recursive: true });
  writeFileSync(join(rootfs, 'etc/passwd'), `root:x:0:0:root:/root:/sbin/nologin\n${name}:x:${uid}:${gid}:${name}:/${home}:/sbin/nologin\n`);
  writeFileSync(join(rootfs, 'etc/group'), `root:x:0:\n${name}:x:${gid}:\n`);
  writeFileSync(join(rootfs, 'etc/nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
  mkdirSync(join(rootfs, home), { recursive: true, mode: 0o700 });
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  execFileSync('chmod', ['1777', join(rootfs, 'tmp')]);
  execFileSync('chmod', ['0755', join(rootfs, 'home')]);
  // group 0 may use it too: OpenShift runs a pod under an arbitrary UID with group 0 (podSecurity.arbitraryUid)
  execFileSync('chmod', ['0770', join(rootfs, home)]);
}

/** Layer owners: everything root's except the non-root user's home, which is 65532's and group 0's (any UID OpenShift assigns runs in group 0). */
export function baseOwner(path: string): { uid: number; gid: number } | undefined {
  return path === NONROOT.home ? { uid: NONROOT.uid, gid: 0 } : undefined;
}
