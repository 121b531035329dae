// Images around one static binary (kubectl, Prometheus, the test evaluation
// program): the Debian base without shared libraries (CA bundle, passwd/group
// with user 65532, /tmp) and the binary at /usr/local/bin; for a released
// image, beside the binary its SBOM: the Debian packages and the components
// the caller names (a Go binary's modules).
import { chmodSync, cpSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { assembleDebianBase, baseOwner, type DebianPackage } from './debian-base.ts';
import type { ImageConfig, LayerSource } from './oci-layout.ts';
import { cycloneDx, sbomPath, writeBom, type Component } from './sbom.ts';
import { debianComponents } from './sbom-components.ts';

export type StaticImage = { layers: LayerSource[]; config: ImageConfig; packages: DebianPackage[] };

export type StaticImageOptions = {
  binary: string;
  name: string;
  entrypoint?: string[];
  labels: Record<string, string>;
  env?: string[];
  /** the image's version and what its binary is made of; the tests' own images ship none */
  sbom?: { version: string; components: Component[] };
};

export function assembleStaticImage(stage: string, opts: StaticImageOptions): StaticImage {
  const base = join(stage, 'base');
  const bin = join(stage, 'bin');
  const packages = assembleDebianBase(base, { libraries: false });
  mkdirSync(join(bin, 'usr/local/bin'), { recursive: true });
  const target = join(bin, 'usr/local/bin', opts.name);
  cpSync(opts.binary, target);
  chmodSync(target, 0o755);
  if (opts.sbom) {
    const debian = debianComponents(packages, readFileSync(join(base, 'etc/os-release'), 'utf8'));
    writeBom(bin, sbomPath(opts.name), cycloneDx({ type: 'container', name: opts.name, version: opts.sbom.version }, [...debian, ...opts.sbom.components]));
  }
  return {
    layers: [
      { dir: base, createdBy: `debian base: ${packages.map((p) => `${p.name}=${p.version}`).join(' ')}`, owner: baseOwner },
      { dir: bin, createdBy: `/usr/local/bin/${opts.name}${opts.sbom ? ` and its SBOM, /${sbomPath(opts.name)}` : ''}` },
    ],
    config: {
      User: '65532:65532',
      Entrypoint: opts.entrypoint ?? [`/usr/local/bin/${opts.name}`],
      Env: ['PATH=/usr/local/bin', ...(opts.env ?? [])],
      WorkingDir: '/',
      Labels: { ...opts.labels, 'dev.rlmesh.image.debian-packages': packages.map((p) => `${p.name}=${p.version}`).join(' ') },
    },
    packages,
  };
}
