// Images around one static binary (kubectl, Prometheus, the test evaluation
// program): the Debian base without shared libraries (CA bundle, passwd/group
// with user 65532, /tmp) and the binary at /usr/local/bin.
import { chmodSync, cpSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { assembleDebianBase, baseOwner, type DebianPackage } from './debian-base.ts';
import type { ImageConfig, LayerSource } from './oci-layout.ts';

export type StaticImage = { layers: LayerSource[]; config: ImageConfig; packages: DebianPackage[] };

export function assembleStaticImage(stage: string, opts: { binary: string; name: string; entrypoint?: string[]; labels: Record<string, string>; env?: string[] }): StaticImage {
  const base = join(stage, 'base');
  const bin = join(stage, 'bin');
  const packages = assembleDebianBase(base, { libraries: false });
  mkdirSync(join(bin, 'usr/local/bin'), { recursive: true });
  const target = join(bin, 'usr/local/bin', opts.name);
  cpSync(opts.binary, target);
  chmodSync(target, 0o755);
  return {
    layers: [
      { dir: base, createdBy: `debian base: ${packages.map((p) => `${p.name}=${p.version}`).join(' ')}`, owner: baseOwner },
      { dir: bin, createdBy: `/usr/local/bin/${opts.name}` },
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
