// The images as the release published them, pulled by digest from the local
// registry: what the runtime image holds (and must not), that a second build
// of this commit gives every image the same digest, and that the Dockerfile
// would produce the same files, user, workdir, env and entrypoint.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, RECIPES } from '../../scripts/image/build.ts';
import { runtimeConfig } from '../../scripts/image/runtime.ts';
import { COMPONENTS } from '../../bin/components.ts';
import { NONROOT } from '../../scripts/image/debian-base.ts';
import { BUNDLES } from '../../scripts/image/bundle.ts';
import { CODE_CACHE_SUFFIX } from '../../bin/run-bundle.ts';
import { NETPROBE_COMMAND } from '../../controller/network-policy-probe.ts';
import { releaseInfo } from '../support/release.ts';
import { ROOT } from '../support/runtime.ts';
import { readImage } from '../../scripts/image/oci-layout.ts';
import { folderTree, layoutTree, pullLayout, type Tree } from './layers.ts';
import { tempDir } from '../support/temp.ts';

const scratch: string[] = [];
const temp = (tag: string) => {
  const d = tempDir(`rlmesh-${tag}-`);
  scratch.push(d);
  return d;
};
afterAll(() => {
  for (const d of scratch) rmSync(d, { recursive: true, force: true });
});

let layout = '';
let tree: Tree;
beforeAll(async () => {
  layout = pullLayout(releaseInfo().images['rlmesh-runtime']!.ref);
  scratch.push(layout);
  tree = await layoutTree(layout);
}, 120_000);

describe('the released rlmesh-runtime image', () => {
  it('is the digest the release recorded, for linux/amd64, running as 65532 from /app', () => {
    const image = readImage(layout);
    expect(image.digest).toBe(releaseInfo().images['rlmesh-runtime']!.digest);
    const config = image.config as unknown as { architecture: string; os: string; config: { User: string; Entrypoint: string[]; WorkingDir: string } };
    expect([config.os, config.architecture]).toEqual(['linux', 'amd64']);
    expect(config.config.User).toBe('65532:65532');
    expect(config.config.Entrypoint).toEqual(['/usr/local/bin/node', '--disable-warning=DEP0169', '--disable-warning=DEP0005', '--disable-warning=DEP0040', '/app/bin/rlmesh-runtime.js']);
    expect(config.config.WorkingDir).toBe('/app');
  });

  it('holds the pinned Node binary, its shared libraries, CA certificates and the compiled entrypoints', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    const node = tree.get('usr/local/bin/node');
    const pinned = execFileSync('sha256sum', [join(ROOT, 'node_modules/node/bin/node')], { encoding: 'utf8' }).split(' ')[0];
    expect(node?.sha256, `node ${pkg.devDependencies['node']} from the npm package`).toBe(pinned);
    for (const lib of ['libc.so.6', 'libstdc++.so.6', 'libgcc_s.so.1', 'libm.so.6']) {
      expect([...tree.keys()].some((p) => p.endsWith(`/${lib}`)), lib).toBe(true);
    }
    expect(tree.get('etc/ssl/certs/ca-certificates.crt')?.type).toBe('file');
    expect(tree.get('etc/passwd')?.type).toBe('file');
    // each component's bundle and the V8 code cache written after running it (both builds gave the same bytes,
    // or the build would have left the cache out); the image's user reads them but cannot change them
    for (const c of COMPONENTS) {
      for (const p of [`app/${c}/main.js`, `app/${c}/main.js${CODE_CACHE_SUFFIX}`]) {
        const f = tree.get(p);
        expect(f?.type, p).toBe('file');
        expect([f!.uid, f!.mode & 0o022, f!.mode & 0o004], p).toEqual([0, 0, 0o004]);
      }
      expect(tree.get(`app/${c}`)!.uid, `/app/${c}`).toBe(0);
    }
    expect(runtimeConfig({}).User).toBe(`${NONROOT.uid}:${NONROOT.gid}`);
  });

  it('holds the program of every pod command the controller writes (the NetworkPolicy probe)', () => {
    const [node, script] = NETPROBE_COMMAND;
    expect(tree.get(node!.slice(1))?.type).toBe('file');
    expect(tree.get(script!.slice(1))?.type, script).toBe('file');
  });

  it('holds nothing test-only: in /app only the bundles, their licenses and package.json, no node_modules', () => {
    const ours = [...tree.keys()].filter((p) => p.startsWith('app/') && tree.get(p)!.type === 'file');
    const caches = COMPONENTS.map((c) => `app/${c}/main.js${CODE_CACHE_SUFFIX}`);
    expect(ours.sort()).toEqual([...BUNDLES.map((b) => `app/${b}`), ...caches, 'app/THIRD-PARTY-NOTICES.txt', 'app/package.json'].sort());
    expect([...tree.keys()].filter((p) => p.includes('node_modules'))).toEqual([]);
  });

  it('has no shell, no package manager and no program but node', () => {
    const programs = [...tree.entries()].filter(([p, e]) => e.type !== 'directory' && /^(usr\/(local\/)?)?s?bin\//.test(p)).map(([p]) => p);
    expect(programs).toEqual(['usr/local/bin/node']);
    for (const p of ['bin/sh', 'bin/bash', 'usr/bin/apt', 'usr/bin/dpkg', 'usr/bin/env']) expect(tree.has(p), p).toBe(false);
    // image scanners find the Debian packages it was assembled from
    expect([...tree.keys()].filter((p) => p.startsWith('var/lib/dpkg/status.d/')).sort()).toEqual(
      ['base-files', 'ca-certificates', 'libc6', 'libgcc-s1', 'libstdc++6'].map((n) => `var/lib/dpkg/status.d/${n}`),
    );
  });
});

describe('reproducible: a second build of this commit gives the same digest', () => {
  for (const name of Object.keys(RECIPES)) {
    it(name, async () => {
      const image = await buildImage(name, RECIPES[name]!, temp(`rebuild-${name}`));
      expect(image.digest).toBe(releaseInfo().images[name]!.digest);
    }, 300_000);
  }
});

describe('the Dockerfile builds the same image', () => {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const final = dockerfile.slice(dockerfile.lastIndexOf('\nFROM ')).trim().split('\n').filter((l) => l && !l.startsWith('#'));

  it('its final stage is the engine-free assembly and says what the image config says', () => {
    const config = runtimeConfig({});
    expect(final[0]).toBe('FROM scratch');
    expect(final.filter((l) => l.startsWith('COPY '))).toEqual(['COPY --from=build /rootfs /']);
    expect(dockerfile).toMatch(/^RUN node scripts\/image\/build\.ts rlmesh-runtime --rootfs \/rootfs$/m);
    const instr = (op: string) => final.filter((l) => l.startsWith(`${op} `)).map((l) => l.slice(op.length + 1));
    expect(instr('USER')).toEqual([config.User]);
    expect(instr('WORKDIR')).toEqual([config.WorkingDir]);
    expect(instr('ENV').join(' ').split(' ')).toEqual(config.Env);
    expect(instr('ENTRYPOINT').map((e) => JSON.parse(e) as string[])).toEqual([config.Entrypoint]);
    expect(final.map((l) => l.split(' ')[0]).sort()).toEqual(['COPY', 'ENTRYPOINT', 'ENV', 'FROM', 'USER', 'WORKDIR']);
    const released = readImage(layout).config.config as { User: string; WorkingDir: string; Env: string[]; Entrypoint: string[] };
    expect([released.User, released.WorkingDir, released.Env, released.Entrypoint]).toEqual([config.User, config.WorkingDir, config.Env, config.Entrypoint]);
  });

  it('its --rootfs folder holds exactly the files of the released layers (owner, mode, content, links)', () => {
    const dir = temp('rootfs');
    execFileSync(join(ROOT, 'node_modules/.bin/node'), [join(ROOT, 'scripts/image/build.ts'), 'rlmesh-runtime', '--rootfs', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
    const onDisk = folderTree(dir);
    const differing = [...new Set([...onDisk.keys(), ...tree.keys()])].filter((p) => JSON.stringify(onDisk.get(p)) !== JSON.stringify(tree.get(p)));
    expect(differing.slice(0, 10)).toEqual([]);
    expect(onDisk.size).toBe(tree.size);
  }, 300_000);
});
