// The helm on PATH against the floor the printed install commands need: the
// New install command's `helm upgrade --install … --reset-then-reuse-values`
// (controlplane/install-command.ts) is a flag Helm added in 3.14.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { CheckResult } from '../types.ts';

export const HELM_FLOOR = { major: 3, minor: 14 };
const ID = 'helm-version';
const FLOOR = `${HELM_FLOOR.major}.${HELM_FLOOR.minor}`;
const INSTALL = `Install Helm ${FLOOR} or newer (https://helm.sh/docs/intro/install/) and put it first on PATH, then run rlmesh preflight again.`;

/** What running `helm version` gave: its output, or that there was no helm, or that it failed. */
export type HelmVersionOutput = { stdout: string } | { missing: true } | { failed: string };

export function helmVersionVerdict(r: HelmVersionOutput): CheckResult {
  if ('missing' in r) {
    return { id: ID, verdict: 'fail', found: 'no helm on PATH; the install commands the platform prints run helm', fix: INSTALL };
  }
  if ('failed' in r) {
    return { id: ID, verdict: 'fail', found: `helm version failed: ${r.failed}`, fix: INSTALL };
  }
  const version = r.stdout.trim();
  const m = /^v?(\d+)\.(\d+)\.\d+/.exec(version);
  if (!m) {
    return { id: ID, verdict: 'warn', found: `helm version printed "${version}", which is not a version`, fix: `Check that the helm on PATH is Helm ${FLOOR} or newer (helm version).` };
  }
  const [major, minor] = [Number(m[1]), Number(m[2])];
  if (major > HELM_FLOOR.major || (major === HELM_FLOOR.major && minor >= HELM_FLOOR.minor)) {
    return { id: ID, verdict: 'pass', found: `Helm ${version} (floor ${FLOOR})`, fix: 'Nothing to do.' };
  }
  return {
    id: ID,
    verdict: 'fail',
    found: `Helm ${version}; the New install command needs ${FLOOR} or newer (helm upgrade --reset-then-reuse-values, which keeps the release's values when the token changes)`,
    fix: INSTALL,
  };
}

const run = promisify(execFile);

/** Runs `helm version --template {{.Version}}` with this process's PATH. */
export async function helmVersionOnPath(): Promise<HelmVersionOutput> {
  try {
    const { stdout } = await run('helm', ['version', '--template', '{{.Version}}'], { timeout: 15_000, encoding: 'utf8' });
    return { stdout };
  } catch (err) {
    const e = err as { code?: unknown; stderr?: string; message: string };
    if (e.code === 'ENOENT') return { missing: true };
    return { failed: (e.stderr?.trim() || e.message).split('\n')[0]! };
  }
}

export async function checkHelmVersion(): Promise<CheckResult> {
  return helmVersionVerdict(await helmVersionOnPath());
}
