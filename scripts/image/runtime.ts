// The rlmesh-runtime image: the Debian base, the Node binary of the npm `node`
// package at the version package.json pins, and /app (one bundled file per
// entrypoint, the licenses of the packages bundled into them, and beside each
// component's bundle the V8 code cache taken after running its --help). The
// Dockerfile runs this same assembly (--rootfs), so an engine build and this
// one hold the same files.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assembleDebianBase, NONROOT, type DebianPackage } from './debian-base.ts';
import { BUNDLE_NODE_FLAGS, bundleEntrypoints } from './bundle.ts';
import type { ImageConfig } from './oci-layout.ts';
import { ociLabels, pinnedNodeBinary, ROOT, type SourceFacts } from './source.ts';
import { cycloneDx, sbomPath, writeBom } from './sbom.ts';
import { debianComponents, nodeComponent, npmComponents } from './sbom-components.ts';
import { COMPONENTS } from '../../bin/components.ts';
import { CODE_CACHE_SUFFIX, WRITE_CODE_CACHE_ENV } from '../../bin/run-bundle.ts';

const NODE_PATH = '/usr/local/bin/node';
export const RUNTIME_IMAGE = 'rlmesh-runtime';

/** The image config; the Dockerfile's final stage must say the same (test/image/dockerfile.test.ts). */
export function runtimeConfig(labels: Record<string, string>): ImageConfig {
  return {
    User: '65532:65532',
    Entrypoint: [NODE_PATH, ...BUNDLE_NODE_FLAGS, '/app/bin/rlmesh-runtime.js'],
    Env: ['PATH=/usr/local/bin', 'NODE_ENV=production'],
    WorkingDir: '/app',
    Labels: labels,
  };
}

export type RuntimeTree = { base: string; app: string; packages: DebianPackage[]; nodeVersion: string };

/** Assembles the two layers' folders under `stage`: base/ (OS + Node) and app/ (/app and the image's SBOM). */
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
  const metafile = await bundleEntrypoints(appDir);
  const { name, version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  writeFileSync(join(appDir, 'package.json'), `${JSON.stringify({ name, version, private: true, type: 'module' }, null, 2)}\n`);
  const components = [...debianComponents(packages, readFileSync(join(base, 'etc/os-release'), 'utf8')), nodeComponent(node), ...npmComponents(metafile)];
  writeBom(app, sbomPath(RUNTIME_IMAGE), cycloneDx({ type: 'container', name: RUNTIME_IMAGE, version }, components));
  step(`bundled; SBOM of ${components.length} components at /${sbomPath(RUNTIME_IMAGE)}`);
  // filled inside the image's own root filesystem: V8's cache bytes depend on the modules' absolute paths
  renameSync(appDir, join(base, 'app'));
  try {
    fillCodeCache(base);
  } finally {
    renameSync(join(base, 'app'), appDir);
  }
  step('code caches written');
  return { base, app, packages, nodeVersion };
}

/**
 * Runs each component's --help once, chrooted into the image's root filesystem
 * as the image's user, with the image's environment and entrypoint, and has
 * bin/run-bundle.ts write its code cache (/app/<name>/main.js.cache) at exit.
 * --predictable fixes the hash seed and V8's threads, which otherwise change
 * the bytes on every run; it is not part of V8's flag hash, so pods, running
 * without it, accept the cache. Each cache is written twice and kept only if
 * both are the same bytes, so the image stays reproducible; a component whose
 * two caches differ starts without one, compiling as it would with no cache.
 */
function fillCodeCache(rootfs: string): void {
  if (process.getuid?.() !== 0) {
    throw new Error('image: writing the code caches runs node chrooted into the image (chroot needs root); run the build as root, as the Dockerfile build does');
  }
  // exactly the image's environment: what a module sees at load (PATH, HOME, ...) changes which
  // of its functions run, and so the cache's bytes
  const chroot = execFileSync('sh', ['-c', 'command -v chroot'], { encoding: 'utf8' }).trim();
  const image = runtimeConfig({});
  const imageEnv = Object.fromEntries(image.Env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  // the image's own entrypoint, with --predictable among node's flags (before the script)
  const [nodeBinary, ...entrypoint] = image.Entrypoint;
  const script = entrypoint.pop()!;
  const cacheOf = (c: string) => join(rootfs, 'app', c, `main.js${CODE_CACHE_SUFFIX}`);
  const write = (c: string) => {
    // stdout and stderr are pipes whoever runs the build: a module that looks at them (isTTY,
    // a file or a pipe) would otherwise load differently from a terminal, a log file or a test
    execFileSync(chroot, [`--userspec=${NONROOT.uid}:${NONROOT.gid}`, rootfs, nodeBinary!, ...entrypoint, '--predictable', script, c, '--help'], {
      cwd: '/',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...imageEnv, HOME: `/${NONROOT.home}`, [WRITE_CODE_CACHE_ENV]: '1' },
    });
    if (!existsSync(cacheOf(c))) throw new Error(`image: ${c} --help wrote no code cache at /app/${c}/main.js${CODE_CACHE_SUFFIX}`);
  };
  const dropped: string[] = [];
  for (const c of COMPONENTS) {
    const dir = join(rootfs, 'app', c);
    chownSync(dir, NONROOT.uid, NONROOT.gid); // only while the cache is written
    try {
      write(c);
      const first = readFileSync(cacheOf(c));
      rmSync(cacheOf(c));
      write(c);
      if (readFileSync(cacheOf(c)).equals(first)) {
        chownSync(cacheOf(c), 0, 0); // the image's user reads the cache but cannot change it
        chmodSync(cacheOf(c), 0o644);
      } else {
        rmSync(cacheOf(c));
        dropped.push(c);
      }
    } finally {
      chownSync(dir, 0, 0);
    }
  }
  if (dropped.length > 0) console.error(`[image] code cache: ${dropped.join(', ')} gave different bytes in two runs and ship without one`);
}

export function runtimeLabels(tree: RuntimeTree, src: SourceFacts): Record<string, string> {
  return {
    ...ociLabels('rlmesh-runtime', src.version, src),
    'org.opencontainers.image.description': 'RLMesh cluster runtime: agent, controller, egress proxy, control plane, CLI, GPU discovery',
    'dev.rlmesh.image.node': tree.nodeVersion,
    'dev.rlmesh.image.debian-packages': tree.packages.map((p) => `${p.name}=${p.version}`).join(' '),
  };
}
