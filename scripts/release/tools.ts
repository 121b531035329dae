// Where the release finds the programs it runs (helm, skopeo, cosign).
//
// PATH first. Then the project's own build of the test tools: test/cluster/build-binaries.sh
// (run by ./test/ci, ./demo and test/install-deps.sh) builds helm from Go modules into
// ${RLMESH_TESTBIN:-~/.cache/rlmesh-testbin}/<Kubernetes version>/bin, and
// test/support/build-cosign.sh builds cosign into …/cosign-<version>; neither is on PATH,
// so `npm run release` after the test command finds them there.
import { accessSync, constants, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { ROOT } from '../image/source.ts';

/** Where build-binaries.sh puts its binaries, for the version it builds by default (or K8S_VERSION). */
export function projectBinDir(env: NodeJS.ProcessEnv = process.env, root = ROOT): string {
  const script = readFileSync(join(root, 'test/cluster/build-binaries.sh'), 'utf8');
  const fallback = /K8S_VERSION="\$\{K8S_VERSION:-(v[0-9.]+)\}"/.exec(script)?.[1];
  if (!fallback) throw new Error('release: test/cluster/build-binaries.sh no longer names its default K8S_VERSION');
  const testbin = env.RLMESH_TESTBIN || join(homedir(), '.cache/rlmesh-testbin');
  return join(testbin, env.K8S_VERSION || fallback, 'bin');
}

/** Where test/support/build-cosign.sh puts cosign, for the version it builds by default (or COSIGN_VERSION). */
export function projectCosignDir(env: NodeJS.ProcessEnv = process.env, root = ROOT): string {
  const script = readFileSync(join(root, 'test/support/build-cosign.sh'), 'utf8');
  const fallback = /VERSION="\$\{COSIGN_VERSION:-(v[0-9.]+)\}"/.exec(script)?.[1];
  if (!fallback) throw new Error('release: test/support/build-cosign.sh no longer names its default COSIGN_VERSION');
  const testbin = env.RLMESH_TESTBIN || join(homedir(), '.cache/rlmesh-testbin');
  return join(testbin, `cosign-${env.COSIGN_VERSION || fallback}`);
}

const executable = (file: string): boolean => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** How to get each tool when neither PATH nor the project's build has it. */
const HOW_TO_GET: Record<string, string> = {
  helm: 'run `bash test/cluster/build-binaries.sh` (builds helm from Go modules into {bin}), or install helm 3.8 or later and put it on PATH',
  skopeo: 'install it with your package manager (`apt-get install skopeo` on Debian and Ubuntu; test/install-deps.sh does this)',
  cosign: 'run `bash test/support/build-cosign.sh` (builds cosign from its Go module into {bin}; test/install-deps.sh does this), or install cosign v2 and put it on PATH',
};

/**
 * The path of `cmd`: the first executable on PATH, else the one build-binaries.sh (or, for cosign, build-cosign.sh) built.
 * Throws, naming both places and how to get the tool, when neither has it.
 */
export function findTool(cmd: string, env: NodeJS.ProcessEnv = process.env, root = ROOT): string {
  for (const dir of (env.PATH ?? '').split(delimiter).filter(Boolean)) {
    if (executable(join(dir, cmd))) return join(dir, cmd);
  }
  const bin = cmd === 'cosign' ? projectCosignDir(env, root) : projectBinDir(env, root);
  if (executable(join(bin, cmd))) return join(bin, cmd);
  const how = (HOW_TO_GET[cmd] ?? 'install it and put it on PATH').replace('{bin}', bin);
  throw new Error(`release: ${cmd} is not on PATH nor in ${bin}; the release pushes images with skopeo, packages and pushes charts with helm and signs them with cosign: ${how}`);
}
