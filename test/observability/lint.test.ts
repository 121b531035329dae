// helm lint --strict and ct lint over every ci/*-values.yaml scenario of the
// rlmesh-observability chart, yamllint on its YAML.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { clusterInfo, helm, run } from '../support/cluster.ts';
import { CHART, KUBE_VERSION, OFFLINE_API_SERVER, root, scenarios } from './chart.ts';

describe('rlmesh-observability lint', () => {
  it('has the scenarios the user guide and the options need', () => {
    expect(scenarios()).toEqual(
      expect.arrayContaining(['spec-values.yaml', 'grafana-secret-values.yaml', 'grafana-password-values.yaml', 'staging-ca-values.yaml', 'local-only-values.yaml']),
    );
  });

  for (const s of scenarios()) {
    it(`helm lint --strict ${s}`, () => {
      const r = helm(['lint', '--strict', CHART, '-f', join(CHART, 'ci', s), ...OFFLINE_API_SERVER, '--kube-version', KUBE_VERSION]);
      expect(r.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    });
  }

  it('ct lint over every scenario (Chart.yaml schema, yamllint, helm lint)', () => {
    const etc = join(clusterInfo().bin, '../etc/ct');
    const r = run(
      join(clusterInfo().bin, 'ct'),
      ['lint', '--config', 'ct.yaml', '--charts', 'charts/rlmesh-observability', '--chart-yaml-schema', join(etc, 'chart_schema.yaml'), '--lint-conf', join(etc, 'lintconf.yaml')],
      { cwd: root },
    );
    expect(r.status, r.stderr + r.stdout).toBe(0);
    for (const s of scenarios()) expect(r.stdout).toContain(`ci/${s}`);
    expect(r.stdout).toContain('All charts linted successfully');
  });

  it('yamllint --strict on values.yaml, Chart.yaml and the scenarios', () => {
    const files = ['values.yaml', 'Chart.yaml', ...scenarios().map((s) => `ci/${s}`)].map((f) => join(CHART, f));
    const r = run(join(clusterInfo().bin, 'yamllint'), ['--strict', '-c', join(CHART, 'ci/.yamllint.yaml'), ...files]);
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it('has the runtime chart version', () => {
    const version = (chart: string) => (parse(readFileSync(join(root, 'charts', chart, 'Chart.yaml'), 'utf8')) as { version: string }).version;
    expect(version('rlmesh-observability')).toBeDefined();
    expect(version('rlmesh-observability')).toBe(version('rlmesh-runtime'));
  });
});
