// Builds the rlmesh CLI as the two things a platform engineer installs without
// this repository:
//   - an npm package (rlmesh-cli-<version>.tgz, "npm install -g" it): one
//     bundled CommonJS file with no runtime dependencies, its bin `rlmesh`,
//     and the licenses of the code bundled into it;
//   - a single executable for linux/amd64 (rlmesh-<version>-linux-amd64):
//     the Node.js binary this project pins (devDependency `node`) with the
//     same bundle injected as a Single Executable Application, so it needs no
//     Node.js at all;
//   - beside each, its SBOM (CycloneDX 1.5, scripts/image/sbom.ts): the npm
//     packages bundled into it, and for the executable the Node.js binary too.
// Node 24's SEA runs only a CommonJS main (an ESM main, "mainFormat", came in
// Node 25), hence CommonJS for both. The version is package.json's. The same
// commit gives the same bytes: esbuild's output is deterministic, `npm pack`
// fixes every mtime, and the blob carries no code cache or snapshot.
//
//   node scripts/release/cli.ts [--out DIR]    (default dist/cli; prints the two artifacts' paths, then their SBOMs')
//   import { buildCli } from './scripts/release/cli.ts'; await buildCli({ outDir })
import { execFileSync } from 'node:child_process';
import { pinnedNodeBinary } from '../image/source.ts';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { build, type Metafile } from 'esbuild';
import { asciiOnly, BUNDLE_NODE_FLAGS, COMMON, failOnWarnings, thirdPartyNotices } from '../image/bundle.ts';
import { cycloneDx, writeBom } from '../image/sbom.ts';
import { nodeComponent, npmComponents } from '../image/sbom-components.ts';

const root = resolve(import.meta.dirname, '../..');

/** The npm package's name: `npm pack` names its tarball rlmesh-cli-<version>.tgz. */
export const CLI_PACKAGE_NAME = '@rlmesh/cli';

export type CliArtifacts = { npmPackage: string; executable: string; version: string; sboms: { npmPackage: string; executable: string } };

/** What the SEA fuse is called in every Node.js binary (doc/api/single-executable-applications.md). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

export async function buildCli({ outDir }: { outDir: string }): Promise<CliArtifacts> {
  if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`the CLI is built on linux/amd64 (the pinned Node.js binary's platform), not ${process.platform}/${process.arch}`);
  const { version } = rootPackage();
  const node = pinnedNodeBinary();
  outDir = resolve(outDir);
  mkdirSync(outDir, { recursive: true });
  const staging = mkdtempSync(join(tmpdir(), 'rlmesh-cli-build-'));
  try {
    const { code, metafile } = await bundle();

    // (a) the npm package, packed from a staging directory that holds only what it ships
    const pkgDir = join(staging, 'package');
    mkdirSync(pkgDir);
    writeFileSync(join(pkgDir, 'rlmesh.cjs'), `#!/usr/bin/env node\n${code}`, { mode: 0o755 });
    writeFileSync(join(pkgDir, 'package.json'), `${JSON.stringify(packageJson(version), null, 2)}\n`);
    writeFileSync(join(pkgDir, 'README.md'), packageReadme(version));
    writeFileSync(join(pkgDir, 'THIRD-PARTY-NOTICES.txt'), thirdPartyNotices(metafile, 'The rlmesh CLI bundles code from these open-source packages.'));
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', outDir], {
        cwd: pkgDir,
        encoding: 'utf8',
        // npm itself runs on the pinned Node.js, whatever node comes first on PATH
        env: { ...process.env, PATH: [dirname(node), process.env.PATH ?? ''].join(delimiter), npm_config_update_notifier: 'false', npm_config_fund: 'false' },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    ) as { filename: string }[];
    const npmPackage = join(outDir, packed[0]!.filename.replace(/^@/, '').replace('/', '-'));
    if (!existsSync(npmPackage)) throw new Error(`npm pack reported ${packed[0]!.filename} but ${npmPackage} is not there`);

    // (b) the single executable: the SEA blob injected into a copy of the pinned node binary
    const seaDir = join(staging, 'sea');
    mkdirSync(seaDir);
    writeFileSync(join(seaDir, 'rlmesh.cjs'), code);
    writeFileSync(
      join(seaDir, 'sea-config.json'),
      JSON.stringify({
        main: 'rlmesh.cjs',
        output: 'rlmesh.blob',
        disableExperimentalSEAWarning: true,
        useSnapshot: false,
        useCodeCache: false,
        // the injected bundle is outside node_modules/, unlike the npm package's rlmesh.cjs
        execArgv: [...BUNDLE_NODE_FLAGS],
      }),
    );
    execFileSync(node, ['--experimental-sea-config', 'sea-config.json'], { cwd: seaDir, stdio: ['ignore', 'pipe', 'pipe'] });
    const executable = join(outDir, `rlmesh-${version}-linux-amd64`);
    rmSync(executable, { force: true });
    copyFileSync(node, executable);
    chmodSync(executable, 0o755);
    // postject's CLI, in a process of its own: its ELF library prints a harmless "Can't find string offset
    // for section name '.note…'" for each of node's notes, kept out of sight unless the injection fails
    const postject = join(dirname(createRequire(import.meta.url).resolve('postject')), 'cli.js');
    execFileSync(node, [postject, executable, 'NODE_SEA_BLOB', join(seaDir, 'rlmesh.blob'), '--sentinel-fuse', SEA_FUSE], { stdio: ['ignore', 'pipe', 'pipe'] });

    const bundled = npmComponents(metafile);
    const sboms = {
      npmPackage: writeBom(outDir, `rlmesh-cli-${version}.cdx.json`, cycloneDx({ type: 'application', name: CLI_PACKAGE_NAME, version }, bundled)),
      executable: writeBom(outDir, `rlmesh-${version}-linux-amd64.cdx.json`, cycloneDx({ type: 'application', name: 'rlmesh', version }, [nodeComponent(node), ...bundled])),
    };
    return { npmPackage, executable, version, sboms };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

const rootPackage = (): { version: string } => JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };

export { pinnedNodeBinary };

async function bundle(): Promise<{ code: string; metafile: Metafile }> {
  const result = await build({
    ...COMMON,
    entryPoints: ['scripts/release/cli-entry.ts'],
    format: 'cjs',
    // cli/main.ts and cli/preflight.ts start themselves under `if (import.meta.main)`; the entry starts the bundle
    define: { 'import.meta.main': 'false' },
    write: false,
  });
  await failOnWarnings('the CLI', result.warnings);
  return { code: asciiOnly(result.outputFiles[0]!.text), metafile: result.metafile };
}

function packageJson(version: string): Record<string, unknown> {
  return {
    name: CLI_PACKAGE_NAME,
    version,
    description: 'rlmesh: check a Kubernetes cluster before installing the RLMesh runtime (rlmesh preflight) and claim a join token as Kubernetes Secrets (rlmesh clusters join).',
    keywords: ['rlmesh', 'kubernetes', 'cli'],
    type: 'commonjs',
    bin: { rlmesh: 'rlmesh.cjs' },
    files: ['rlmesh.cjs', 'README.md', 'THIRD-PARTY-NOTICES.txt'],
    engines: { node: '>=24' },
  };
}

function packageReadme(version: string): string {
  return `# ${CLI_PACKAGE_NAME} ${version}

The \`rlmesh\` command line of the RLMesh runtime, one file with no dependencies; it needs Node.js 24 or later.

\`\`\`sh
npm install -g ./rlmesh-cli-${version}.tgz
rlmesh preflight -f values.yaml          # check the cluster of your kube context before helm install
rlmesh clusters join --token rlm_jt_… --format k8s-secret --out rlmesh-secrets.yaml
rlmesh --help
\`\`\`

Without Node.js, use the single executable \`rlmesh-${version}-linux-amd64\` instead: \`install -m 0755 rlmesh-${version}-linux-amd64 /usr/local/bin/rlmesh\`.

The licenses of the open-source packages bundled into \`rlmesh.cjs\` are in THIRD-PARTY-NOTICES.txt.
`;
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { out: { type: 'string', default: join(root, 'dist', 'cli') } }, strict: true });
  const started = performance.now();
  const artifacts = await buildCli({ outDir: values.out });
  for (const path of [artifacts.npmPackage, artifacts.executable, artifacts.sboms.npmPackage, artifacts.sboms.executable]) console.log(path);
  const mib = (p: string): string => `${(statSync(p).size / 2 ** 20).toFixed(1)} MiB`;
  console.error(`rlmesh ${artifacts.version}: npm package ${mib(artifacts.npmPackage)}, executable ${mib(artifacts.executable)}, in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
