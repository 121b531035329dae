// The supported version skew, in one place: what `rlmesh status` judges a
// release by. The rule for now: the CLI and the chart of the same minor
// (major.minor), and every runtime image of the chart's appVersion. A wider
// policy (which agent versions a control plane accepts, which chart versions
// upgrade to which) extends this module.

export type SkewFinding = { ok: true } | { ok: false; problem: string; fix: string };

const minor = (v: string): string | undefined => /^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$/.exec(v.trim())?.slice(1, 3).join('.');

/** Whether this CLI may inspect and operate a release of `chartVersion`. */
export function cliChartSkew(cliVersion: string, chartVersion: string): SkewFinding {
  const cli = minor(cliVersion);
  const chart = minor(chartVersion);
  if (!cli || !chart) return { ok: false, problem: `cannot read the versions (CLI ${cliVersion}, chart ${chartVersion})`, fix: 'Use a CLI and a chart of released versions (x.y.z).' };
  if (cli === chart) return { ok: true };
  return {
    ok: false,
    problem: `CLI ${cliVersion} and chart ${chartVersion} are of different minors (${cli} and ${chart}); the supported skew is the same minor`,
    fix: `Use the rlmesh CLI ${chart}.x that the chart's release ships, or upgrade the chart to ${cli}.x.`,
  };
}

/** Whether a component runs the version of its chart (its appVersion). */
export function componentSkew(component: string, componentVersion: string, appVersion: string): SkewFinding {
  if (minor(componentVersion) !== undefined && minor(componentVersion) === minor(appVersion)) return { ok: true };
  return {
    ok: false,
    problem: `${component} runs ${componentVersion}, the chart's appVersion is ${appVersion}`,
    fix: `Let the rollout finish (kubectl -n rlmesh-system rollout status deployment/${component}), or helm upgrade so every component runs ${appVersion}.`,
  };
}
