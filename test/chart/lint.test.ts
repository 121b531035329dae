// helm lint --strict and ct lint over every ci/*-values.yaml scenario, yamllint on the values.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clusterInfo, helm, run } from '../support/cluster.ts';
import { CHART, OFFLINE_API_SERVER, root, scenarios } from './chart.ts';

describe('lint', () => {
  it('has at least 8 scenarios', () => expect(scenarios().length).toBeGreaterThanOrEqual(8));

  for (const s of scenarios()) {
    it(`helm lint --strict ${s}`, () => {
      const r = helm(['lint', '--strict', CHART, '-f', join(CHART, 'ci', s), ...OFFLINE_API_SERVER, '--kube-version', '1.35.4']);
      expect(r.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    });
  }

  it('ct lint over every scenario (schema, yamllint, helm lint --strict)', () => {
    const etc = join(clusterInfo().bin, '../etc/ct');
    const r = run(join(clusterInfo().bin, 'ct'), ['lint', '--config', 'ct.yaml', '--charts', 'charts/rlmesh-runtime', '--chart-yaml-schema', join(etc, 'chart_schema.yaml'), '--lint-conf', join(CHART, 'ci/.yamllint.yaml')], { cwd: root });
    expect(r.status, r.stderr + r.stdout).toBe(0);
    for (const s of scenarios()) expect(r.stdout).toContain(`ci/${s}`);
    expect(r.stdout).toContain('All charts linted successfully');
  });

  it('yamllint on values.yaml, Chart.yaml and the scenarios', () => {
    const files = ['values.yaml', 'Chart.yaml', ...scenarios().map((s) => `ci/${s}`)].map((f) => join(CHART, f));
    const r = run(join(clusterInfo().bin, 'yamllint'), ['--strict', '-c', join(CHART, 'ci/.yamllint.yaml'), ...files, join(root, 'ct.yaml')]);
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });
});
