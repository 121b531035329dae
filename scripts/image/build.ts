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
import { assembleRuntime, runtimeConfig, runtimeLabels, runtimeOwner } from './runtime.ts';
import { ROOT, sourceFacts } from './source.ts';
import { assembleStaticImage } from './static-binary.ts';
import { NONROOT } from './debian-base.ts';

/** One image: how to assemble its layers in a scratch folder, and its tag. */
export type ImageRecipe = {
  /** repository path under the registry, e.g. rlmesh/rlmesh-runtime */
  repository: string;
  tag: () => string;
  assemble: (stage: string) => { layers: LayerSource[]; config: ImageConfig };
};

const labels = (title: string, version: string): Record<string, string> => {
  const src = sourceFacts();
  return {
    'org.opencontainers.image.title': title,
    'org.opencontainers.image.version': version,
    'org.opencontainers.image.revision': src.revision,
    'org.opencontainers.image.created': src.created.toISOString(),
  };
};

function chartField(chart: string, field: string): string {
  const m = new RegExp(`^${field}:\\s*"?([^"\\s]+)"?`, 'm').exec(readFileSync(join(ROOT, 'charts', chart, 'Chart.yaml'), 'utf8'));
  if (!m) throw new Error(`charts/${chart}/Chart.yaml has no ${field}`);
  return m[1]!;
}

function builtBinary(script: string, name: string): string {
  const out = execFileSync('bash', [join(ROOT, script)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
  return out.endsWith(`/${name}`) ? out : join(out, name);
}

const KUBECTL_VERSION = 'v1.35.4';

export const RECIPES: Record<string, ImageRecipe> = {
  'rlmesh-runtime': {
    repository: 'rlmesh/rlmesh-runtime',
    tag: () => {
      const version = sourceFacts().version;
      const appVersion = chartField('rlmesh-runtime', 'appVersion');
      if (version !== appVersion) throw new Error(`package.json version ${version} differs from charts/rlmesh-runtime appVersion ${appVersion}; they name the same image tag, so make them equal`);
      return version;
    },
    assemble: (stage) => {
      const tree = assembleRuntime(stage);
      return {
        layers: [
          { dir: tree.base, createdBy: `debian base + node ${tree.nodeVersion}`, owner: runtimeOwner },
          { dir: tree.app, createdBy: '/app: compiled JavaScript, production node_modules, compile cache' },
        ],
        config: runtimeConfig(runtimeLabels(tree)),
      };
    },
  },
  // the CRD upgrade hook: the kubectl this project builds from the Go module proxy (static)
  kubectl: {
    repository: 'rlmesh/kubectl',
    tag: () => KUBECTL_VERSION,
    assemble: (stage) => {
      const binary = builtBinary('test/cluster/build-binaries.sh', 'kubectl');
      const version = execFileSync(binary, ['version', '--client', '-o', 'json'], { encoding: 'utf8' });
      if (!version.includes(`"gitVersion": "${KUBECTL_VERSION}"`)) throw new Error(`the built kubectl is not ${KUBECTL_VERSION}: ${version}`);
      return assembleStaticImage(stage, { binary, name: 'kubectl', labels: labels('kubectl', KUBECTL_VERSION) });
    },
  },
  // the observability chart's Prometheus, built from its Go module
  prometheus: {
    repository: 'rlmesh/prometheus',
    tag: () => chartField('rlmesh-observability', 'appVersion'),
    assemble: (stage) => {
      const version = chartField('rlmesh-observability', 'appVersion');
      const binary = execFileSync('bash', [join(ROOT, 'test/observability/build-prometheus.sh')], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, PROMETHEUS_VERSION: version },
      }).trim().split('\n').pop()!;
      return assembleStaticImage(stage, { binary, name: 'prometheus', labels: labels('prometheus', version) });
    },
  },
};

/** Builds one recipe into `<outDir>/<name>` (an OCI layout), in a scratch folder it removes afterwards. */
export async function buildImage(name: string, recipe: ImageRecipe, outDir: string): Promise<BuiltImage & { name: string; repository: string }> {
  const stage = mkdtempSync(join(tmpdir(), `rlmesh-image-${name}-`));
  try {
    const { layers, config } = recipe.assemble(stage);
    const layout = join(outDir, name);
    rmSync(layout, { recursive: true, force: true });
    const image = await writeImage({ layout, tag: recipe.tag(), layers, config, created: sourceFacts().created });
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
    const tree = assembleRuntime(stage);
    const rootfs = resolve(values.rootfs);
    for (const dir of [tree.base, tree.app]) {
      cpSync(dir, rootfs, { recursive: true, verbatimSymlinks: true });
      // cpSync makes folders with the default mode: give each its layer's mode (/tmp 1777, the home 0700)
      for (const rel of walk(dir)) if (lstatSync(join(dir, rel)).isDirectory()) chmodSync(join(rootfs, rel), lstatSync(join(dir, rel)).mode & 0o7777);
    }
    // the layers' owners (everything root's but the user's home), as files on disk
    execFileSync('chown', ['-R', '0:0', rootfs]);
    execFileSync('chown', [`${NONROOT.uid}:${NONROOT.gid}`, join(rootfs, NONROOT.home)]);
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
