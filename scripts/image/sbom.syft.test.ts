// What a scanner nobody here wrote, Anchore's Syft, finds in the runtime image
// the build writes: every npm package bundled into /app (which no scanner can
// see in the bundles themselves), the Node binary and the Debian packages,
// each read from the image's SBOM. Builds the image (root, a Debian mirror) and
// Syft (test/support/build-syft.sh, cached; test/install-deps.sh builds it).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Metafile } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildImage, RECIPES } from './build.ts';
import { BUNDLES, bundleEntrypoints, packageDir, packagesIn } from './bundle.ts';
import { RUNTIME_IMAGE } from './runtime.ts';
import { sbomPath } from './sbom.ts';
import { ROOT } from './source.ts';
import { tempDir } from '../../test/support/temp.ts';

type SyftArtifact = { name: string; version: string; type: string; foundBy: string; purl: string; licenses: { value: string }[]; locations: { path: string }[] };

let artifacts: SyftArtifact[];
let metafile: Metafile;
let debianLabel: string;

beforeAll(async () => {
  const syft = execFileSync('bash', [join(ROOT, 'test/support/build-syft.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
  const image = await buildImage(RUNTIME_IMAGE, RECIPES[RUNTIME_IMAGE]!, tempDir('rlmesh-sbom-image-'));
  debianLabel = image.config.Labels['dev.rlmesh.image.debian-packages']!;
  // the sbom-cataloger reads SBOMs found in the image; Syft leaves it out unless asked ("not evidence of installed packages")
  const out = execFileSync(syft, ['scan', `oci-dir:${image.layout}`, '-o', 'json', '-q', '--select-catalogers', '+sbom-cataloger'], {
    encoding: 'utf8',
    maxBuffer: 256 * 2 ** 20,
    env: { ...process.env, SYFT_CHECK_FOR_APP_UPDATE: 'false' },
  });
  artifacts = (JSON.parse(out) as { artifacts: SyftArtifact[] }).artifacts;
  // the bundles again, for what they hold
  metafile = await bundleEntrypoints(tempDir('rlmesh-sbom-bundles-'));
}, 900_000);

const fromSbom = (type: string) => artifacts.filter((a) => a.foundBy === 'sbom-cataloger' && a.type === type && a.locations.some((l) => l.path === `/${sbomPath(RUNTIME_IMAGE)}`));

describe('Syft scanning the rlmesh-runtime image', () => {
  it('finds every npm package bundled into /app, at the version and with the license the lockfile records, and nothing else', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string; license?: string }> };
    const shipped = Object.values(metafile.outputs).flatMap((o) => Object.keys(o.inputs));
    const dirs = new Set(shipped.map(packageDir).filter((d): d is string => d !== undefined));
    const expected = [...dirs].map((d) => {
      const key = d.slice(d.indexOf('node_modules/'));
      const entry = lock.packages[key];
      if (!entry) throw new Error(`package-lock.json has no ${key}`);
      return { name: key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length), version: entry.version, license: entry.license };
    });
    // the same packages bundle.ts's packagesIn sees in the bundles
    expect(new Set(expected.map((e) => e.name))).toEqual(new Set(BUNDLES.flatMap((b) => packagesIn(metafile, b))));
    expect(expected.length).toBeGreaterThan(20);

    const found = fromSbom('npm');
    const key = (p: { name: string; version: string }) => `${p.name}@${p.version}`;
    expect(found.map(key).sort()).toEqual([...new Set(expected.map(key))].sort());
    for (const e of expected) {
      const a = found.find((f) => key(f) === key(e))!;
      expect(a.purl, key(e)).toBe(`pkg:npm/${e.name.replace(/^@/, '%40')}@${e.version}`);
      if (e.license) expect(a.licenses.map((l) => l.value), key(e)).toEqual([e.license]);
    }
  });

  it('finds the pinned Node binary, by its SBOM entry and by looking at the binary itself', () => {
    const { devDependencies } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    const node = artifacts.filter((a) => a.purl === `pkg:generic/node@${devDependencies['node']}`);
    expect(node.map((a) => a.foundBy).sort()).toEqual(['binary-classifier-cataloger', 'sbom-cataloger']);
    expect(node.find((a) => a.foundBy === 'sbom-cataloger')!.licenses.map((l) => l.value)).toEqual(['MIT']);
  });

  it('finds each Debian package of the base at its version, in the SBOM as in the dpkg status files', () => {
    const expected = debianLabel.split(' ').sort();
    expect(expected.length).toBe(5);
    expect(fromSbom('deb').map((a) => `${a.name}=${a.version}`).sort()).toEqual(expected);
    expect(artifacts.filter((a) => a.foundBy === 'dpkg-db-cataloger').map((a) => `${a.name}=${a.version}`).sort()).toEqual(expected);
    // ca-certificates' copyright file is machine-readable, glibc's is not: a license only where Debian states one
    expect(fromSbom('deb').find((a) => a.name === 'ca-certificates')!.licenses.map((l) => l.value)).toEqual(['GPL-2+', 'MPL-2.0']);
    expect(fromSbom('deb').find((a) => a.name === 'libc6')!.licenses).toEqual([]);
  });

  it('reads all of it from one document, the image\'s SBOM', () => {
    const paths = new Set(artifacts.filter((a) => a.foundBy === 'sbom-cataloger').flatMap((a) => a.locations.map((l) => l.path)));
    expect([...paths]).toEqual([`/${sbomPath(RUNTIME_IMAGE)}`]);
  });
});
