// Builds the images this repository ships as OCI layouts, with no container
// engine. `npm run image` builds the runtime image; the release builds them all.
//
//   node scripts/image/build.ts [rlmesh-runtime|kubectl|prometheus ...] [--out DIR]
//   node scripts/image/build.ts rlmesh-runtime --rootfs DIR   (the Dockerfile: the same files, one folder)
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, lstatSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { walk, writeImage, type BuiltImage, type ImageConfig, type LayerSource } from './oci-layout.ts';
import { assembleRuntime, RUNTIME_IMAGE, runtimeConfig, runtimeLabels } from './runtime.ts';
import { sbomPath } from './sbom.ts';
import { goModuleComponents } from './sbom-components.ts';
import { ociLabels, ROOT, sourceFacts, type SourceFacts } from './source.ts';
import { assembleStaticImage } from './static-binary.ts';
import { baseOwner, NONROOT } from './debian-base.ts';

/** One image: how to assemble its layers in a scratch folder, and its tag, for the source being built. */
type Assembled = { layers: LayerSource[]; config: ImageConfig };
export type ImageRecipe = {
  /** repository path under the registry, e.g. rlmesh/rlmesh-runtime */
  repository: string;
  tag: (src: SourceFacts) => string;
  assemble: (stage: string, src: SourceFacts) => Assembled | Promise<Assembled>;
};

export function chartField(chart: string, field: string): string {
  const m = new RegExp(`^${field}:\\s*"?([^"\\s]+)"?`, 'm').exec(readFileSync(join(ROOT, 'charts', chart, 'Chart.yaml'), 'utf8'));
  if (!m) throw new Error(`charts/${chart}/Chart.yaml has no ${field}`);
  return m[1]!;
}

/**
 * Runs one of the project's Go build scripts (each prints the binary's path, or its folder, last) and returns the binary.
 * Each builds from the go.mod and go.sum committed beside it, with -mod=readonly.
 */
function builtBinary(script: string, name: string, args: string[], env: Record<string, string> = {}): string {
  const out = execFileSync('bash', [join(ROOT, script), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } }).trim().split('\n').pop()!;
  return out.endsWith(`/${name}`) ? out : join(out, name);
}

export const KUBECTL_VERSION = 'v1.35.4';

export const RECIPES: Record<string, ImageRecipe> = {
  'rlmesh-runtime': {
    repository: 'rlmesh/rlmesh-runtime',
    tag: (src) => {
      const appVersion = chartField('rlmesh-runtime', 'appVersion');
      if (src.version !== appVersion) throw new Error(`package.json version ${src.version} differs from charts/rlmesh-runtime appVersion ${appVersion}; they name the same image tag, so make them equal`);
      return src.version;
    },
    assemble: async (stage, src) => {
      const tree = await assembleRuntime(stage);
      return {
        layers: [
          { dir: tree.base, createdBy: `debian base + node ${tree.nodeVersion}`, owner: baseOwner },
          { dir: tree.app, createdBy: `/app: one bundle per entrypoint, third-party notices, code caches; the SBOM, /${sbomPath(RUNTIME_IMAGE)}` },
        ],
        config: runtimeConfig(runtimeLabels(tree, src)),
      };
    },
  },
  // the CRD upgrade hook: the kubectl this project builds from the Go module proxy (static)
  kubectl: {
    repository: 'rlmesh/kubectl',
    tag: () => KUBECTL_VERSION,
    assemble: (stage, src) => {
      const binary = builtBinary('test/cluster/build-binaries.sh', 'kubectl', ['kubectl']);
      const version = execFileSync(binary, ['version', '--client', '-o', 'json'], { encoding: 'utf8' });
      if (!version.includes(`"gitVersion": "${KUBECTL_VERSION}"`)) throw new Error(`the built kubectl is not ${KUBECTL_VERSION}: ${version}`);
      return assembleStaticImage(stage, { binary, name: 'kubectl', labels: ociLabels('kubectl', KUBECTL_VERSION, src), sbom: { version: KUBECTL_VERSION, components: goModuleComponents(binary) } });
    },
  },
  // the observability chart's Prometheus, built from its Go module
  prometheus: {
    repository: 'rlmesh/prometheus',
    tag: () => chartField('rlmesh-observability', 'appVersion'),
    assemble: (stage, src) => {
      const version = chartField('rlmesh-observability', 'appVersion');
      const binary = builtBinary('test/observability/build-prometheus.sh', 'prometheus', ['prometheus'], { PROMETHEUS_VERSION: version });
      return assembleStaticImage(stage, { binary, name: 'prometheus', labels: ociLabels('prometheus', version, src), sbom: { version, components: goModuleComponents(binary) } });
    },
  },
};

/** Builds one recipe into `<outDir>/<name>` (an OCI layout), in a scratch folder it removes afterwards. */
export async function buildImage(name: string, recipe: ImageRecipe, outDir: string): Promise<BuiltImage & { name: string; repository: string }> {
  const stage = mkdtempSync(join(tmpdir(), `rlmesh-image-${name}-`));
  try {
    const src = sourceFacts();
    const { layers, config } = await recipe.assemble(stage, src);
    const layout = join(outDir, name);
    rmSync(layout, { recursive: true, force: true });
    const image = await writeImage({ layout, tag: recipe.tag(src), layers, config, created: src.created });
    return { ...image, name, repository: recipe.repository };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { out: { type: 'string' }, rootfs: { type: 'string' } } });
  const names = positionals.length > 0 ? positionals : ['rlmesh-runtime'];
  for (const n of names) if (!RECIPES[n]) throw new Error(`unknown image ${n}; this repository builds ${Object.keys(RECIPES).join(', ')}`);
  if (values.rootfs) {
    if (names.length !== 1 || names[0] !== 'rlmesh-runtime') throw new Error('--rootfs assembles the rlmesh-runtime image only');
    const stage = mkdtempSync(join(tmpdir(), 'rlmesh-rootfs-'));
    const tree = await assembleRuntime(stage);
    const rootfs = resolve(values.rootfs);
    for (const dir of [tree.base, tree.app]) {
      cpSync(dir, rootfs, { recursive: true, verbatimSymlinks: true });
      // cpSync makes folders with the default mode: give each its layer's mode (/tmp 1777, the home 0770)
      for (const rel of walk(dir)) if (lstatSync(join(dir, rel)).isDirectory()) chmodSync(join(rootfs, rel), lstatSync(join(dir, rel)).mode & 0o7777);
    }
    // the layers' owners (everything root's but the user's home, 65532's and group 0's: baseOwner()), as files on disk
    execFileSync('chown', ['-R', '0:0', rootfs]);
    execFileSync('chown', [`${NONROOT.uid}:0`, join(rootfs, NONROOT.home)]);
    rmSync(stage, { recursive: true, force: true });
  } else {
    const out = resolve(values.out ?? join(ROOT, 'dist/images'));
    for (const n of names) {
      const t0 = Date.now();
      const image = await buildImage(n, RECIPES[n]!, out);
      const size = image.layers.reduce((s, l) => s + l.size, 0);
      console.log(`${n}:${image.tag} ${image.digest} ${(size / 2 ** 20).toFixed(1)} MiB compressed, ${((Date.now() - t0) / 1000).toFixed(1)} s, ${image.layout}`);
    }
  }
}
