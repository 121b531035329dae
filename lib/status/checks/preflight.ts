// The agent's preflight summary (ConfigMap rlmesh-preflight, written at start
// and hourly): its failing and warning checks, each with its own fix.
import { NAMES } from '../../fixed-names.ts';
import type { PreflightReportData } from '../../preflight/run.ts';
import { configMap } from '../reads.ts';
import { ago, type CheckResult, type StatusContext } from '../types.ts';

export function preflightVerdict(namespace: string, report: PreflightReportData | undefined, now: number): CheckResult {
  const id = 'preflight';
  if (!report) return { id, verdict: 'warn', found: `the agent has not published a preflight report (no ConfigMap ${NAMES.preflightConfigMap} in ${namespace})`, fix: 'The agent runs it once its informers synced and every hour: check the agent check above, or wait a minute.' };
  const at = `at ${report.at} (${ago(now - Date.parse(report.at))} ago)`;
  const failing = report.checks.filter((c) => c.verdict === 'fail');
  const warning = report.checks.filter((c) => c.verdict === 'warn');
  if (failing.length) return { id, verdict: 'fail', found: `${failing.length} of ${report.checks.length} failed ${at}: ${failing.map((c) => `${c.id}: ${c.found}`).join('; ')}`, fix: failing.map((c) => `${c.id}: ${c.fix}`).join(' ') };
  if (warning.length) return { id, verdict: 'warn', found: `${warning.length} of ${report.checks.length} warn ${at}: ${warning.map((c) => `${c.id}: ${c.found}`).join('; ')}`, fix: warning.map((c) => `${c.id}: ${c.fix}`).join(' ') };
  return { id, verdict: 'pass', found: `all ${report.checks.length} checks passed ${at}`, fix: 'Nothing to do.' };
}

export async function checkPreflight(ctx: StatusContext): Promise<CheckResult> {
  const raw = (await configMap(ctx, ctx.namespace, NAMES.preflightConfigMap))?.data?.['report.json'];
  return preflightVerdict(ctx.namespace, raw ? (JSON.parse(raw) as PreflightReportData) : undefined, ctx.now());
}
