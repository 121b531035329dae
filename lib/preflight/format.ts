// Output of a preflight report: a table for people, JSON for scripts, and
// the one-line summary the agent publishes.
import type { PreflightReportData } from './run.ts';
import { worstVerdict } from './run.ts';
import type { Verdict } from './types.ts';

export function summaryLine(report: PreflightReportData): string {
  const by = (v: Verdict): string[] => report.checks.filter((c) => c.verdict === v).map((c) => c.id);
  const parts = (['fail', 'warn', 'pass'] as const).map((v) => {
    const ids = by(v);
    return ids.length && v !== 'pass' ? `${ids.length} ${v} (${ids.join(', ')})` : `${ids.length} ${v}`;
  });
  return `${worstVerdict(report.checks)}: ${parts.join(', ')} at ${report.at}`;
}

export function formatTable(report: PreflightReportData): string {
  const width = Math.max(5, ...report.checks.map((c) => c.id.length));
  const lines: string[] = [];
  for (const c of report.checks) {
    lines.push(`${c.verdict.toUpperCase().padEnd(4)}  ${c.id.padEnd(width)}  ${c.found}`);
    if (c.verdict !== 'pass') lines.push(`${' '.repeat(6 + width)}  fix: ${c.fix}`);
  }
  const worst = worstVerdict(report.checks);
  const tail =
    worst === 'fail' ? 'fix every FAIL before installing.' : worst === 'warn' ? 'the cluster can take the runtime; read each WARN.' : 'the cluster meets every prerequisite.';
  lines.push('', `preflight ${summaryLine(report)}: ${tail}`);
  return `${lines.join('\n')}\n`;
}

export const formatJson = (report: PreflightReportData): string => `${JSON.stringify(report, null, 2)}\n`;

/** Process exit code: non-zero on any fail. */
export const exitCode = (report: PreflightReportData): number => (worstVerdict(report.checks) === 'fail' ? 1 : 0);
