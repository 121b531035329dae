// The Debian packages the runtime base is made of, and which of their files it
// keeps: read by the base's build (debian-base.ts) and by the lock that pins
// them (debian-lock.ts).

/** Debian packages the runtime base takes files from, and which of their files. */
export const PACKAGES: { name: string; keep: (path: string) => boolean; libraries?: true }[] = [
  // glibc's shared objects; not its programs (ldd, iconv, getent) nor the iconv modules (Node converts with ICU)
  { name: 'libc6', keep: (p) => /^(lib|lib64|usr\/lib)\//.test(p) && !p.includes('/gconv/'), libraries: true },
  { name: 'libgcc-s1', keep: (p) => /^(lib|usr\/lib)\//.test(p), libraries: true },
  { name: 'libstdc++6', keep: (p) => /^(lib|usr\/lib)\//.test(p), libraries: true },
  { name: 'ca-certificates', keep: (p) => p.startsWith('usr/share/ca-certificates/') },
  { name: 'base-files', keep: (p) => p === 'usr/lib/os-release' || p === 'etc/os-release' || p === 'etc/debian_version' },
];

/** The packages debian.lock must pin (scripts/image/debian-lock.ts). */
export const DEBIAN_PACKAGES = PACKAGES.map((p) => p.name);
