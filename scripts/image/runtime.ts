// The rlmesh-runtime image: the Debian base, the Node binary of the npm `node`
// package at the version package.json pins, and /app (one bundled file per
// entrypoint, the licenses of the packages bundled into them, and a V8 compile
// cache filled by starting every entrypoint once). The Dockerfile runs this same assembly (--rootfs), so an
// engine build and this one hold the same files.
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assembleDebianBase, NONROOT, type DebianPackage } from './debian-base.ts';
import { BUNDLE_NODE_FLAGS, bundleEntrypoints } from './bundle.ts';
import { walk, type ImageConfig } from './oci-layout.ts';
import { ociLabels, pinnedNodeBinary, ROOT, type SourceFacts } from './source.ts';

export const COMPONENTS = ['agent', 'controller', 'egress', 'controlplane', 'cli', 'gpu-discovery'] as const;

const NODE_PATH = '/usr/local/bin/node';

/** The image config; the Dockerfile's final stage must say the same (test/image/dockerfile.test.ts). */
export function runtimeConfig(labels: Record<string, string>): ImageConfig {
  return {
    User: '65532:65532',
    Entrypoint: [NODE_PATH, ...BUNDLE_NODE_FLAGS, '/app/bin/rlmesh-runtime.js'],
    Env: ['PATH=/usr/local/bin', 'NODE_ENV=production', 'NODE_COMPILE_CACHE=/app/.node-compile-cache', 'NODE_COMPILE_CACHE_PORTABLE=1'],
    WorkingDir: '/app',
    Labels: labels,
  };
}

export type RuntimeTree = { base: string; app: string; packages: DebianPackage[]; nodeVersion: string };

/** Assembles the two layers' folders under `stage`: base/ (OS + Node) and app/ (/app). */
export async function assembleRuntime(stage: string): Promise<RuntimeTree> {
  const t0 = Date.now();
  const step = (what: string) => console.error(`[image] ${what} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  const base = join(stage, 'base');
  const app = join(stage, 'app');
  const node = pinnedNodeBinary();
  const packages = assembleDebianBase(base, { libraries: true });
  mkdirSync(join(base, 'usr/local/bin'), { recursive: true });
  cpSync(node, join(base, NODE_PATH.slice(1)));
  const nodeVersion = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  step(`base: ${packages.map((p) => `${p.name}=${p.version}`).join(' ')}, node ${nodeVersion}`);

  const appDir = join(app, 'app');
  await bundleEntrypoints(appDir);
  const { name, version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  writeFileSync(join(appDir, 'package.json'), `${JSON.stringify({ name, version, private: true, type: 'module' }, null, 2)}\n`);
  step('bundled');
  // filled inside the image's own root filesystem: V8's cache bytes depend on the modules' absolute paths
  renameSync(appDir, join(base, 'app'));
  try {
    fillCompileCache(base);
  } finally {
    renameSync(join(base, 'app'), appDir);
  }
  step('compile cache filled');
  return { base, app, packages, nodeVersion };
}

/**
 * Starts each entrypoint once, chrooted into the image's root filesystem, so
 * V8's compile cache holds its modules as the pods load them from /app.
 * --predictable fixes the hash seed and V8's threads, which otherwise change
 * the bytes on every run; it is not part of V8's flag hash, so pods, running
 * without it, accept the cache. A module whose entry still differs between two
 * fills (what runs before `--help` exits is not always the same) is left out:
 * it compiles at start as it would with no cache, and the image stays the
 * same bytes.
 *
 * The fill runs as the image's user: Node keeps a cache per user id
 * (/app/.node-compile-cache/v24.x-x64-<flags>-<uid>/), and a pod running as
 * 65532 does not read the entries root would write under -0.
 */
function fillCompileCache(rootfs: string): void {
  if (process.getuid?.() !== 0) {
    throw new Error('image: filling the compile cache runs node chrooted into the image (chroot needs root); run the build as root, as the Dockerfile build does');
  }
  // exactly the image's environment: what a module sees at load (PATH, HOME, ...) changes which
  // of its functions run, and so the cache's bytes
  const chroot = execFileSync('sh', ['-c', 'command -v chroot'], { encoding: 'utf8' }).trim();
  const image = runtimeConfig({});
  const imageEnv = Object.fromEntries(image.Env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  // the image's own entrypoint, with --predictable among node's flags (before the script)
  const [nodeBinary, ...entrypoint] = image.Entrypoint;
  const script = entrypoint.pop()!;
  const fill = (dir: string) => {
    mkdirSync(join(rootfs, 'app', dir));
    execFileSync('chown', [`${NONROOT.uid}:${NONROOT.gid}`, join(rootfs, 'app', dir)]);
    for (const c of COMPONENTS) {
      // stdout and stderr are pipes whoever runs the build: a module that looks at them (isTTY,
      // a file or a pipe) would otherwise load differently from a terminal, a log file or a test
      execFileSync(chroot, [`--userspec=${NONROOT.uid}:${NONROOT.gid}`, rootfs, nodeBinary!, ...entrypoint, '--predictable', script, c, '--help'], {
        cwd: '/',
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...imageEnv, HOME: `/${NONROOT.home}`, NODE_COMPILE_CACHE: `/app/${dir}` },
      });
    }
  };
  const cache = join(rootfs, 'app/.node-compile-cache');
  const second = join(rootfs, 'app/.node-compile-cache-check');
  fill('.node-compile-cache');
  fill('.node-compile-cache-check');
  let dropped = 0;
  for (const rel of walk(cache)) {
    const a = join(cache, rel);
    if (lstatSync(a).isDirectory()) {
      chmodSync(a, 0o755);
      continue;
    }
    const b = join(second, rel);
    if (!existsSync(b) || !readFileSync(a).equals(readFileSync(b))) {
      rmSync(a);
      dropped++;
    } else chmodSync(a, 0o644); // written 0600; the image's user 65532 must read it
  }
  chmodSync(cache, 0o755);
  execFileSync('chown', ['-R', '0:0', cache]); // the image's user reads the cache but cannot change it
  rmSync(second, { recursive: true });
  if (dropped > 0) console.error(`[image] compile cache: ${dropped} entries differed between two fills and were left out`);
}

export function runtimeLabels(tree: RuntimeTree, src: SourceFacts): Record<string, string> {
  return {
    ...ociLabels('rlmesh-runtime', src.version, src),
    'org.opencontainers.image.description': 'RLMesh cluster runtime: agent, controller, egress proxy, control plane, CLI, GPU discovery',
    'dev.rlmesh.image.node': tree.nodeVersion,
    'dev.rlmesh.image.debian-packages': tree.packages.map((p) => `${p.name}=${p.version}`).join(' '),
  };
}
