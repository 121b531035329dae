// The demo as a new user runs it (test/demo.ts, what ./demo runs after installing
// the dependencies), the way a newcomer meets it: after the test command, with the
// cluster stopped by test/cluster/down, so that nothing the previous cluster left
// (its release, its registry's address) carries over. It finishes, every command of
// its "Look at it yourself" step succeeds afterwards, and it ends with rlmesh status,
// every check ✓ and exit 0. It stops the cluster: the exclusive project runs it.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/runtime.ts';
import { cleanSlate } from './harness.ts';

// as a user's shell starts it: without this test runner's VITEST* variables
const userEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST')));
const demo = (args: string[] = []) => spawnSync(process.execPath, [join(ROOT, 'test/demo.ts'), ...args], { encoding: 'utf8', timeout: 600_000, maxBuffer: 16 * 1024 * 1024, env: userEnv });

/** The indented lines of the step whose title starts with `title`. */
function stepLines(out: string, title: string): string[] {
  const start = out.search(new RegExp(`^\\[\\d+\\] ${title}`, 'm'));
  if (start < 0) throw new Error(`no step "${title}" in the demo's output:\n${out}`);
  const rest = out.slice(start).split('\n').slice(1);
  const end = rest.findIndex((l) => /^\[\d+\] /.test(l));
  return (end < 0 ? rest : rest.slice(0, end)).filter((l) => l.startsWith('    ')).map((l) => l.slice(4));
}

afterAll(() => {
  demo(['stop']);
  cleanSlate();
});

describe('./demo after test/cluster/down', () => {
  it('starts a new cluster, releases to its registry, finishes, every command it prints at its end succeeds, and it ends with rlmesh status', () => {
    const down = spawnSync(join(ROOT, 'test/cluster/down'), { encoding: 'utf8', timeout: 300_000, env: userEnv });
    expect(down.status, `test/cluster/down failed:\n${down.stdout}\n${down.stderr}`).toBe(0);
    const r = demo();
    expect(r.status, `the demo failed:\n${r.stdout}\n${r.stderr}`).toBe(0);
    const steps = [...r.stdout.matchAll(/^\[\d+\] (.*)$/gm)].map((m) => m[1]!);
    expect(steps.at(-1)).toMatch(/^Is it healthy\? rlmesh status/);

    const look = stepLines(r.stdout, 'Look at it yourself');
    expect(look.filter((c) => c.startsWith('kubectl ')).length).toBeGreaterThanOrEqual(3);
    // the user pastes them one after the other into one shell
    const shell = spawnSync('bash', ['-euo', 'pipefail', '-c', look.join('\n')], { encoding: 'utf8', env: { ...userEnv, KUBECONFIG: '' } });
    expect(shell.status, `a printed command failed:\n${shell.stdout}\n${shell.stderr}`).toBe(0);
    expect(shell.stdout).toMatch(/Succeeded/);

    const health = stepLines(r.stdout, 'Is it healthy');
    expect(health.join('\n')).toMatch(/^✓ release /m);
    expect(health.join('\n')).toMatch(/^✓ agent +cluster \S+ connected since/m);
    const againAt = health.findIndex((l) => l.startsWith('run it again: '));
    expect(againAt, health.join('\n')).toBeGreaterThan(0);
    expect(health[againAt - 1], health.join('\n')).toBe('every check passed');
    // the command it prints to run rlmesh status again works in the same shell
    const again = /^run it again: (.*?) {3}\(/.exec(health[againAt]!)![1]!;
    const rerun = spawnSync('bash', ['-euo', 'pipefail', '-c', `${look.filter((c) => c.startsWith('export ')).join('\n')}\n${again} -o json`], { encoding: 'utf8', env: userEnv });
    const report = JSON.parse(rerun.stdout) as { checks: { id: string; verdict: string; found: string }[] };
    expect(report.checks.filter((c) => c.verdict !== 'pass')).toEqual([]);
    expect(report.checks.find((c) => c.id === 'preflight')?.found).toMatch(/^all \d+ checks passed/);
    expect(rerun.status, rerun.stderr).toBe(0);
  }, 900_000);
});
