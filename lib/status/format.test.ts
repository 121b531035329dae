// rlmesh status prints text it did not write (a kubelet message, a line the
// platform sent, a field of an object): no control character of that text may
// reach the terminal, in the table or in the JSON.
import { describe, expect, it } from 'vitest';
import { printable } from '../terminal-text.ts';
import { credentialsVerdict } from './checks/credentials.ts';
import { formatStatusJson, formatStatusTable } from './format.ts';
import type { StatusReport } from './run.ts';

// what a hostile message could carry: a colour, a cursor move and line erase, a window title (OSC), a
// hyperlink, the 8-bit CSI, a carriage return that rewrites the line, a bell, a backspace, a NUL
const HOSTILE = 'pull access denied\u001b[31m red\u001b[2K\u001b[1A up\u001b]0;pwned\u0007 title\u001b]8;;https://evil.example\u001b\\link\u001b]8;;\u001b\\ \u009b2J eight-bit\r\n✓ all good\u0007\b\u0000 end';

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

describe('text rlmesh status did not write', () => {
  it('loses every escape sequence and control character, and keeps the words', () => {
    const out = printable(HOSTILE);
    expect(out).not.toMatch(CONTROL);
    expect(out).toBe('pull access denied red up titlelink  eight-bit  ✓ all good    end');
    expect(printable('plain text: 10.0.0.1:443, naïve ✓ ✗ → fine')).toBe('plain text: 10.0.0.1:443, naïve ✓ ✗ → fine');
  });

  it('reaches neither the table nor the JSON, whose own line breaks stay', () => {
    const check = credentialsVerdict({
      namespace: 'rlmesh-system', runsNamespace: 'rlmesh-runs', controlSecret: 'rlmesh-cluster-control', pullSecret: 'rlmesh-registry-pull',
      control: { annotations: {} }, pull: [{ namespace: 'rlmesh-system', meta: {} }, { namespace: 'rlmesh-runs', meta: {} }], agent: undefined,
      pullRefusals: [{ namespace: 'rlmesh-runs', pod: 'ev-1', reason: 'ErrImagePull', message: HOSTILE }], now: Date.now(),
    });
    expect(check.found).toContain('\u001b[31m'); // the check itself keeps what it read
    const report: StatusReport = { at: new Date().toISOString(), namespace: 'rlmesh-system', verdict: check.verdict, checks: [check] };
    const table = formatStatusTable(report);
    expect(table.replaceAll('\n', '')).not.toMatch(CONTROL);
    expect(table.split('\n')).toHaveLength(5); // the check, its fix, a blank line, the summary, and the final newline's empty rest
    expect(table).toContain('the registry refuses it: pod rlmesh-runs/ev-1 ErrImagePull: pull access denied red up');
    const json = formatStatusJson(report);
    expect(json).not.toMatch(/\\u00(1b|07|9b|0d|08)|\\[rb]/i);
    expect(json.replaceAll('\n', '')).not.toMatch(CONTROL);
  });
});
