// rlmesh status output: one line per check (✓ pass, ! warn, ✗ fail), and under
// each line that is not a pass what to do; or the report as JSON.
import type { StatusReport } from './run.ts';

const MARK = { pass: '✓', warn: '!', fail: '✗' } as const;

export function formatStatusTable(r: StatusReport): string {
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

export const formatStatusJson = (r: StatusReport): string => `${JSON.stringify(r, null, 2)}\n`;

export const statusExitCode = (r: StatusReport): number => (r.verdict === 'fail' ? 1 : 0);
