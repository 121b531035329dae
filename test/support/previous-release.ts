// The previous release of this repository, for the upgrade test: a pinned
// earlier commit, checked out as a detached git worktree, given a version of
// its own (so its chart and runtime image do not replace the current ones in
// the local registry), and released by its own release script. What it
// published is kept under the cluster's folder and reused while the registry
// still serves its chart, so only the first run pays for the build.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clusterDir, clusterInfo, helm, registryAuthFile } from './cluster.ts';
import { ROOT } from './runtime.ts';
import type { Release } from './release.ts';

/** The commit released as "the previous release": the last one before the version skew policy. */
export const PREVIOUS_COMMIT = '6054ebe74ec0e075f9915cf6f026e9de3f355b09';

/**
 * Its version: the line it belongs to (0.1) with the commit as a pre-release, which sorts
 * before 0.1.0 and never collides with a version the current tree releases.
 */
export const PREVIOUS_VERSION = `0.1.0-git-${PREVIOUS_COMMIT.slice(0, 7)}`;

const outDir = (): string => join(clusterDir(), 'previous-release', PREVIOUS_COMMIT.slice(0, 12));

const git = (args: string[], cwd = ROOT): string => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/** The previous release as published (built now unless the local registry still serves the cached one). */
export function previousRelease(): Release & { built: boolean; seconds: number } {
  const t0 = Date.now();
  const file = join(outDir(), 'release.json');
  if (existsSync(file)) {
    const cached = JSON.parse(readFileSync(file, 'utf8')) as Release;
    const chart = cached.charts['rlmesh-runtime']!;
    // the cluster (and its registry) may have been recreated since: then build again
    if (cached.registry === clusterInfo().registry && helm(['show', 'chart', chart.ref, '--version', chart.version, '--plain-http'], { allowFail: true }).status === 0) {
      return { ...cached, built: false, seconds: (Date.now() - t0) / 1000 };
    }
  }
  build();
  return { ...(JSON.parse(readFileSync(file, 'utf8')) as Release), built: true, seconds: (Date.now() - t0) / 1000 };
}

function build(): void {
  try {
    git(['cat-file', '-e', `${PREVIOUS_COMMIT}^{commit}`]);
  } catch {
    throw new Error(`the previous release's commit ${PREVIOUS_COMMIT} is not in this clone (a shallow clone?): fetch the full history (git fetch --unshallow) so the upgrade test can build it`);
  }
  const tree = join(mkdtempSync(join(tmpdir(), 'rlmesh-previous-')), 'src');
  git(['worktree', 'add', '--detach', '--quiet', tree, PREVIOUS_COMMIT]);
  try {
    // the same dependencies as now: share node_modules; otherwise install that commit's own
    const sameLock = git(['show', `${PREVIOUS_COMMIT}:package-lock.json`]) === readFileSync(join(ROOT, 'package-lock.json'), 'utf8').trimEnd();
    if (sameLock) symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'));
    else execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: tree, stdio: ['ignore', 'inherit', 'inherit'] });
    setVersion(tree, PREVIOUS_VERSION);
    // committed, so the images record a clean revision (that commit plus the version change)
    git(['-c', 'user.name=rlmesh upgrade test', '-c', 'user.email=upgrade-test@rlmesh.invalid', 'commit', '--quiet', '--no-verify', '-am', `release ${PREVIOUS_COMMIT.slice(0, 7)} as ${PREVIOUS_VERSION}`], tree);
    const env = { ...process.env, PATH: `${join(tree, 'node_modules/.bin')}:${clusterInfo().bin}:${process.env.PATH}` };
    execFileSync(join(tree, 'node_modules/.bin/node'), [join(tree, 'scripts/release/release.ts'), '--registry', clusterInfo().registry, '--plain-http', '--authfile', registryAuthFile(), '--out', outDir()], {
      cwd: tree,
      env,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  } finally {
    // the shared node_modules goes first, as a link: a recursive removal that followed it would empty the original
    const link = join(tree, 'node_modules');
    if (lstatSync(link, { throwIfNoEntry: false })?.isSymbolicLink()) unlinkSync(link);
    git(['worktree', 'remove', '--force', tree]);
    rmSync(join(tree, '..'), { recursive: true, force: true });
  }
  // what the test reads is release.json; the image layouts and the CLI are hundreds of MB
  for (const big of ['images', 'cli', 'charts-src']) rmSync(join(outDir(), big), { recursive: true, force: true });
}

/** The version in every place the release reads it: package.json, both charts, the runtime image's tag. */
function setVersion(tree: string, version: string): void {
  const edit = (path: string, f: (s: string) => string) => writeFileSync(join(tree, path), f(readFileSync(join(tree, path), 'utf8')));
  edit('package.json', (s) => s.replace(/^ {2}"version": "[^"]+"/m, `  "version": "${version}"`));
  for (const chart of ['rlmesh-runtime', 'rlmesh-observability']) edit(`charts/${chart}/Chart.yaml`, (s) => s.replace(/^version: .*$/m, `version: ${version}`));
  edit('charts/rlmesh-runtime/Chart.yaml', (s) => s.replace(/^appVersion: .*$/m, `appVersion: "${version}"`));
}
