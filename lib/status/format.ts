// rlmesh status output: one line per check (✓ pass, ! warn, ✗ fail), and under
// each line that is not a pass what to do; or the report as JSON. What a check
// found and its fix carry text from the cluster and the platform (messages,
// fields of objects), so both are made printable first, in either format: no
// control character of theirs reaches the terminal.
import { printable } from '../terminal-text.ts';
import type { StatusReport } from './run.ts';

const safe = (r: StatusReport): StatusReport => ({ ...r, checks: r.checks.map((c) => ({ ...c, id: printable(c.id), found: printable(c.found), fix: printable(c.fix) })) });

const MARK = { pass: '✓', warn: '!', fail: '✗' } as const;

export function formatStatusTable(report: StatusReport): string {
  const r = safe(report);
  const width = Math.max(...r.checks.map((c) => c.id.length));
  const lines: string[] = [];
  for (const c of r.checks) {
    lines.push(`${MARK[c.verdict]} ${c.id.padEnd(width)}  ${c.found}`);
    if (c.verdict !== 'pass') lines.push(`  ${' '.repeat(width)}  → ${c.fix}`);
  }
  const fails = r.checks.filter((c) => c.verdict === 'fail').length;
  const warns = r.checks.filter((c) => c.verdict === 'warn').length;
  lines.push(
    '',
    fails ? `status: ${fails} check(s) failed, ${warns} warn: fix each ✗ (→ says how).` : warns ? `status: healthy, ${warns} warning(s): read each !.` : `status: healthy, all ${r.checks.length} checks pass.`,
  );
  return `${lines.join('\n')}\n`;
}

export const formatStatusJson = (r: StatusReport): string => `${JSON.stringify(safe(r), null, 2)}\n`;

export const statusExitCode = (r: StatusReport): number => (r.verdict === 'fail' ? 1 : 0);
