// The version skew policy, in one place: which agent versions a control plane
// accepts, which chart versions `helm upgrade` moves between, and which charts a
// CLI reads. The control plane enforces the first at the session's Hello, the
// agent reports what it was told, `rlmesh status` and the docs say the same.
//
// A version is MAJOR.MINOR.PATCH[-PRERELEASE] (semver). A release line is
// MAJOR.MINOR; patch releases and pre-releases of a line are interchangeable
// here. The window is SUPPORTED_MINORS_BEHIND minor versions of the same major:
//   - a control plane of line M.m accepts agents of M.(m-2) to M.m; the oldest
//     line of that window is accepted with a warning (the next control plane
//     refuses it). An agent newer than the control plane, or of another major,
//     is refused: the platform upgrades its control plane first.
//   - `helm upgrade` from chart A to chart B is supported when B is not older
//     than A, of the same major, and at most SUPPORTED_MINORS_BEHIND minors ahead
//     (so an agent of A is still accepted by a control plane of B's line).
//     Older charts upgrade in steps. Going back is supported only within a line
//     (helm rollback after a patch upgrade): a newer line may have moved the CRDs.
//   - the CLI reads charts of its own major within the same window either way.

/** How many minor versions an agent (or a chart being upgraded) may be behind. */
export const SUPPORTED_MINORS_BEHIND = 2;

export type Version = { major: number; minor: number; patch: number; prerelease: string };

const SEMVER = /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/;

export function parseVersion(v: string): Version | undefined {
  const m = SEMVER.exec(v.trim());
  if (!m) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), prerelease: m[4] ?? '' };
}

/**
 * supported: inside the window. oldest: inside, on its oldest line (warned).
 * unsupported: outside (refused); the line says what happened, why and what to do.
 */
export type SkewVerdict = { verdict: 'supported' | 'oldest' | 'unsupported'; line: string };

const line = (v: Version): string => `${v.major}.${v.minor}`;
const window = (newest: Version): string =>
  newest.minor >= SUPPORTED_MINORS_BEHIND
    ? `${newest.major}.${newest.minor - SUPPORTED_MINORS_BEHIND} to ${line(newest)}`
    : `${newest.major}.0 to ${line(newest)}`;
const notSemver = (what: string, v: string): string =>
  `${what} "${v}" is not a version MAJOR.MINOR.PATCH, so its compatibility cannot be judged`;

/** Whether a control plane of version `controlPlane` accepts an agent that announces `agent`. */
export function agentSkew(controlPlane: string, agent: string): SkewVerdict {
  const cp = parseVersion(controlPlane);
  const a = parseVersion(agent);
  const policy = `this control plane runs ${controlPlane} and accepts agents ${cp ? window(cp) : '(unknown)'} (the same major version, at most ${SUPPORTED_MINORS_BEHIND} minor versions older, never newer)`;
  if (!cp) return { verdict: 'unsupported', line: `${notSemver('the control plane version', controlPlane)}; run a released control plane, whose package.json carries its version` };
  if (!a) {
    return {
      verdict: 'unsupported',
      line: `agent version refused: ${notSemver(`the agent's announced version`, agent)} and ${policy}; install a released chart (helm upgrade rlmesh <chart> --version ${line(cp)}.x --reuse-values), whose agent announces its version`,
    };
  }
  if (a.major !== cp.major || a.minor > cp.minor) {
    const newer = a.major > cp.major || (a.major === cp.major && a.minor > cp.minor);
    return {
      verdict: 'unsupported',
      line: newer
        ? `agent ${agent} refused: it is newer than the control plane, and ${policy}; install a chart of the line ${line(cp)} (helm upgrade rlmesh <chart> --version ${line(cp)}.x --reuse-values), or wait until the platform runs ${line(a)}`
        : `agent ${agent} refused: it is too old, and ${policy}; upgrade the chart to ${line(cp)} (helm upgrade rlmesh <chart> --version ${line(cp)}.x --reuse-values), in steps of at most ${SUPPORTED_MINORS_BEHIND} minor versions (docs: Upgrades)`,
    };
  }
  const behind = cp.minor - a.minor;
  if (behind > SUPPORTED_MINORS_BEHIND) {
    return {
      verdict: 'unsupported',
      line: `agent ${agent} refused: it is ${behind} minor versions older than the control plane, and ${policy}; upgrade the chart (helm upgrade rlmesh <chart> --version ${cp.major}.${a.minor + SUPPORTED_MINORS_BEHIND}.x --reuse-values, then on to ${line(cp)}), in steps of at most ${SUPPORTED_MINORS_BEHIND} minor versions`,
    };
  }
  if (behind === SUPPORTED_MINORS_BEHIND) {
    return {
      verdict: 'oldest',
      line: `agent ${agent} is accepted but is the oldest line ${policy}: the control plane's next minor version will refuse it; upgrade the chart to ${line(cp)} (helm upgrade rlmesh <chart> --version ${line(cp)}.x --reuse-values)`,
    };
  }
  return { verdict: 'supported', line: `agent ${agent} is supported: ${policy}` };
}

/** Whether `helm upgrade` from chart version `from` (installed) to `to` is a supported move. */
export function chartUpgrade(from: string, to: string): SkewVerdict {
  const f = parseVersion(from);
  const t = parseVersion(to);
  if (!f) return { verdict: 'unsupported', line: `${notSemver('the installed chart version', from)}; upgrade from a released chart, or uninstall and install ${to} (the spool of unsent updates is kept on its PVC)` };
  if (!t) return { verdict: 'unsupported', line: `${notSemver('the target chart version', to)}; upgrade to a released chart version` };
  const rule = `upgrades move forward within one major version, at most ${SUPPORTED_MINORS_BEHIND} minor versions at a time, and go back only within a release line`;
  if (t.major !== f.major) {
    return { verdict: 'unsupported', line: `upgrade from chart ${from} to ${to} is not supported: it changes the major version, and ${rule}; follow that major version's upgrade notes (docs: Upgrades)` };
  }
  if (t.minor < f.minor) {
    return { verdict: 'unsupported', line: `going back from chart ${from} to ${to} is not supported: ${line(f)} may have moved the CRDs past what ${line(t)} reads, and ${rule}; upgrade to a newer patch of ${line(f)} instead` };
  }
  if (t.minor - f.minor > SUPPORTED_MINORS_BEHIND) {
    return {
      verdict: 'unsupported',
      line: `upgrade from chart ${from} to ${to} is not supported: it skips ${t.minor - f.minor} minor versions, and ${rule}; upgrade to ${f.major}.${f.minor + SUPPORTED_MINORS_BEHIND}.x first (helm upgrade … --version ${f.major}.${f.minor + SUPPORTED_MINORS_BEHIND}.x --reuse-values)`,
    };
  }
  return { verdict: 'supported', line: `upgrade from chart ${from} to ${to} is supported: ${rule}` };
}

/** Whether a CLI of version `cli` reads what a chart of version `chart` installed. */
export function cliSkew(cli: string, chart: string): SkewVerdict {
  const c = parseVersion(cli);
  const h = parseVersion(chart);
  const rule = `the CLI reads charts of its own major version at most ${SUPPORTED_MINORS_BEHIND} minor versions older or newer`;
  if (!c || !h) return { verdict: 'unsupported', line: `${notSemver(!c ? 'the CLI version' : 'the chart version', !c ? cli : chart)}; use a released CLI and chart` };
  if (c.major !== h.major || Math.abs(c.minor - h.minor) > SUPPORTED_MINORS_BEHIND) {
    return { verdict: 'unsupported', line: `CLI ${cli} does not support chart ${chart}: ${rule}; install the CLI of the chart's release (${line(h)})` };
  }
  return { verdict: 'supported', line: `CLI ${cli} supports chart ${chart}: ${rule}` };
}

/** What `rlmesh status` prints of a skew: nothing when supported, else the problem and its fix. */
export type SkewFinding = { ok: true } | { ok: false; problem: string; fix: string };

/** cliSkew as a status finding. */
export function cliChartSkew(cliVersion: string, chartVersion: string): SkewFinding {
  const v = cliSkew(cliVersion, chartVersion);
  if (v.verdict !== 'unsupported') return { ok: true };
  const chart = parseVersion(chartVersion);
  return { ok: false, problem: v.line, fix: chart ? `Use the rlmesh CLI ${chart.major}.${chart.minor}.x that the chart's release ships.` : 'Use a CLI and a chart of released versions (x.y.z).' };
}

/** Whether a component runs its chart's version (appVersion), as a status finding: a rollout in progress or an image set by hand. */
export function componentSkew(component: string, componentVersion: string, appVersion: string): SkewFinding {
  const c = parseVersion(componentVersion);
  const a = parseVersion(appVersion);
  if (c && a && c.major === a.major && c.minor === a.minor) return { ok: true };
  return {
    ok: false,
    problem: `${component} runs ${componentVersion}, the chart's appVersion is ${appVersion}`,
    fix: `Let the rollout finish (kubectl -n rlmesh-system rollout status deployment/${component}), or helm upgrade so every component runs ${appVersion}.`,
  };
}
