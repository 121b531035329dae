// rlmesh drain's usage and its errors before it reaches a cluster: each says what
// happened and what to do. What it does on a cluster: test/e2e/drain.test.ts.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../test/support/temp.ts';
import { drain } from './drain.ts';

function io() {
  const out = { stdout: '', stderr: '' };
  return { out, io: { stdout: { write: (s: string) => ((out.stdout += s), true) }, stderr: { write: (s: string) => ((out.stderr += s), true) } } as never };
}

describe('rlmesh drain', () => {
  it('--help names the ConfigMap, what the agent does, and the rights it needs', async () => {
    const { out, io: i } = io();
    expect(await drain(['--help'], i)).toBe(0);
    expect(out.stdout).toMatch(/rlmesh-operator-drain/);
    expect(out.stdout).toMatch(/refuses every new assignment/);
    expect(out.stdout).toMatch(/create on configmaps/);
    expect(out.stdout).toMatch(/--undo/);
  });

  it('refuses a bad --wait-seconds and an unknown option as usage errors (exit 2)', async () => {
    const a = io();
    expect(await drain(['--wait-seconds', 'soon'], a.io)).toBe(2);
    expect(a.out.stderr).toBe('rlmesh drain: --wait-seconds must be a whole number of seconds, 0 or more, not "soon"; run rlmesh drain --help\n');
    const b = io();
    expect(await drain(['--force'], b.io)).toBe(2);
    expect(b.out.stderr).toMatch(/^rlmesh drain: .*--force.*; run rlmesh drain --help\n$/);
  });

  it('an API server it cannot reach: exit 1, naming what it tried and what to check', async () => {
    const file = join(tempDir('rlmesh-drain-'), 'kubeconfig');
    writeFileSync(file, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'x',
      clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }], users: [{ name: 'u', user: { token: 't' } }], contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    }));
    const { out, io: i } = io();
    expect(await drain(['--kubeconfig', file], i)).toBe(1);
    expect(out.stderr).toMatch(/^rlmesh drain: could not read Deployment rlmesh-system\/rlmesh-cluster-agent: .*; check that the Kubernetes API is reachable from here and run the command again\n$/);
  });
});
