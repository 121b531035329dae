// The runtime chart's alert rules and Grafana dashboard (metrics.prometheusRule,
// metrics.grafanaDashboard). The rules, as the chart renders them, run in
// `promtool test rules` (promtool v3.5.0, built from the Prometheus Go module by
// test/observability/build-prometheus.sh): input series in, the alerts that fire
// out, with their labels and their expanded annotations. Every metric name the
// rules and the dashboard's queries use must be one the components export: the
// names come from the components' own prom-client registries (createMetrics()).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createMetrics as agentMetrics } from '../../agent/metrics.ts';
import { createMetrics as controllerMetrics } from '../../controller/metrics.ts';
import { createMetrics as egressMetrics } from '../../egress/metrics.ts';
import { valuesSchema } from '../../lib/values-schema.ts';
import { CHART, render, root, template, TOKEN, type K8sObject } from './chart.ts';

type Rule = { alert: string; expr: string; for?: string; labels: Record<string, string>; annotations: Record<string, string> };
type PromRule = K8sObject & { spec: { groups: { name: string; rules: Rule[] }[] } };
type Dashboard = { panels: { title?: string; targets?: { expr: string }[] }[]; templating: { list: { name: string; type: string }[] } };

const T = ['--set', `joinToken=${TOKEN}`];
const SYS = 'rlmesh-system';
let promtool = '';
let dir = '';
let rule: PromRule;

/** Every metric name the components export, from their registries (histograms and summaries with their series suffixes). */
async function exportedNames(): Promise<Set<string>> {
  const registries: Registry[] = [
    agentMetrics({ spoolBytes: () => 0, spoolRecords: () => 0, spoolMaxBytes: 1, credentialAgeSeconds: () => 0 }).registry,
    controllerMetrics().registry,
    egressMetrics().registry,
  ];
  const names = new Set<string>();
  for (const r of registries) {
    for (const m of await r.getMetricsAsJSON()) {
      names.add(m.name);
      const type = String(m.type);
      if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(m.name + s);
      if (type === 'summary') for (const s of ['_sum', '_count']) names.add(m.name + s);
    }
  }
  return names;
}

/** The rlmesh_* metric names a PromQL expression reads (every series the components export has the prefix; label names never do). */
const metricNames = (expr: string): string[] => [...new Set(expr.match(/\brlmesh_[a-z0-9_]+/g) ?? [])];

const ruleOf = (alert: string, severity: string): Rule => rule.spec.groups.flatMap((g) => g.rules).find((r) => r.alert === alert && r.labels.severity === severity)!;

/** The annotations Prometheus renders for `alert`: its templates with $value and $labels filled as given. */
function expanded(alert: string, severity: string, fill: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(ruleOf(alert, severity).annotations)) {
    out[k] = v.replace(/\{\{ *(\$[a-zA-Z.]+(?: \| \w+(?: "[^"]*")?)?) *\}\}/g, (whole, key: string) => {
      if (!(key in fill)) throw new Error(`no value for ${whole} in ${alert}`);
      return fill[key]!;
    });
  }
  return out;
}

type Expected = { alertname: string; eval_time: string; exp_alerts: { exp_labels: Record<string, string>; exp_annotations: Record<string, string> }[] };

function runPromtool(name: string, interval: string, series: { series: string; values: string }[], tests: Expected[]): { status: number | null; out: string } {
  const file = join(dir, `${name}.test.yaml`);
  writeFileSync(file, stringify({ rule_files: ['rules.yaml'], evaluation_interval: '1m', tests: [{ interval, input_series: series, alert_rule_test: tests }] }, { lineWidth: 0 }));
  const r = spawnSync(promtool, ['test', 'rules', file], { encoding: 'utf8', cwd: dir, timeout: 120_000 });
  return { status: r.status, out: r.stdout + r.stderr };
}


beforeAll(() => {
  const build = spawnSync('bash', [join(root, 'test/observability/build-prometheus.sh'), 'promtool'], { encoding: 'utf8', timeout: 1_700_000 });
  if (build.status !== 0) throw new Error(`building promtool from the Prometheus Go module failed (test/observability/build-prometheus.sh promtool):\n${build.stderr.slice(-4000)}`);
  promtool = build.stdout.trim().split('\n').at(-1)!;
  dir = mkdtempSync(join(tmpdir(), 'rlmesh-alert-rules-'));
  rule = render([...T, '--set', 'metrics.prometheusRule.enabled=true']).get(`PrometheusRule/${SYS}/rlmesh-runtime`) as PromRule;
  writeFileSync(join(dir, 'rules.yaml'), stringify({ groups: rule.spec.groups }, { lineWidth: 0 }));
}, 1_800_000);
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('PrometheusRule', () => {
  it('is rendered when enabled, with auto only where the API is served, with the user\'s labels', () => {
    expect(rule.metadata.namespace).toBe(SYS);
    const alerts = new Set(rule.spec.groups.flatMap((g) => g.rules.map((r) => r.alert)));
    expect([...alerts].sort()).toEqual(['RLMeshAgentDisconnected', 'RLMeshAgentSpoolFilling', 'RLMeshArtifactCacheFull', 'RLMeshCredentialNearExpiry', 'RLMeshEgressRefusalsHigh', 'RLMeshEvaluationsFailing']);
    expect(render(T).has(`PrometheusRule/${SYS}/rlmesh-runtime`)).toBe(false);
    const auto = [...T, '--set', 'metrics.prometheusRule.enabled=auto'];
    expect(render(auto).has(`PrometheusRule/${SYS}/rlmesh-runtime`)).toBe(false);
    const served = render([...auto, '--api-versions', 'monitoring.coreos.com/v1/PrometheusRule', '--set', 'metrics.prometheusRule.labels.release=kube-prometheus-stack', '--set', 'metrics.prometheusRule.alertLabels.team=platform']);
    const r = served.get(`PrometheusRule/${SYS}/rlmesh-runtime`) as PromRule;
    expect(r.metadata.labels?.release).toBe('kube-prometheus-stack');
    for (const x of r.spec.groups.flatMap((g) => g.rules)) expect(x.labels).toMatchObject({ team: 'platform' });
  });

  it('every alert says what to do: a runbook-style description with a command or a value to change', () => {
    for (const x of rule.spec.groups.flatMap((g) => g.rules)) {
      expect(x.annotations.summary, x.alert).toBeTruthy();
      expect(x.annotations.description, x.alert).toMatch(/kubectl|helm upgrade|New install command/);
      expect(['critical', 'warning']).toContain(x.labels.severity);
    }
  });

  it('passes promtool check rules', () => {
    const r = spawnSync(promtool, ['check', 'rules', join(dir, 'rules.yaml')], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toContain('SUCCESS: 7 rules found');
    expect(r.status).toBe(0);
  });

  it('agent disconnected: fires after 10 minutes not connected, or with no agent series at all', () => {
    const labels = { namespace: SYS };
    const r = runPromtool('disconnected', '1m', [{ series: `rlmesh_agent_session_state{namespace="${SYS}",state="connected"}`, values: '1x5 0x30' }], [
      { alertname: 'RLMeshAgentDisconnected', eval_time: '10m', exp_alerts: [] },
      { alertname: 'RLMeshAgentDisconnected', eval_time: '20m', exp_alerts: [{ exp_labels: { severity: 'critical', ...labels }, exp_annotations: expanded('RLMeshAgentDisconnected', 'critical', {}) }] },
    ]);
    expect(r.out).toContain('SUCCESS');
    const absent = runPromtool('absent', '1m', [{ series: `rlmesh_egress_active_tunnels{namespace="${SYS}"}`, values: '0x30' }], [
      { alertname: 'RLMeshAgentDisconnected', eval_time: '9m', exp_alerts: [] },
      { alertname: 'RLMeshAgentDisconnected', eval_time: '15m', exp_alerts: [{ exp_labels: { severity: 'critical', namespace: SYS, state: 'connected' }, exp_annotations: expanded('RLMeshAgentDisconnected', 'critical', {}) }] },
    ]);
    expect(absent.out).toContain('SUCCESS');
    // another namespace's agent (another installation) does not count
    const other = runPromtool('other-namespace', '1m', [{ series: `rlmesh_agent_session_state{namespace="team-b",state="connected"}`, values: '0x30' }, { series: `rlmesh_agent_session_state{namespace="${SYS}",state="connected"}`, values: '1x30' }], [
      { alertname: 'RLMeshAgentDisconnected', eval_time: '25m', exp_alerts: [] },
    ]);
    expect(other.out).toContain('SUCCESS');
  });

  it('spool filling: above 75% of its maximum (90% of agent.spool.size) for 5 minutes', () => {
    const r = runPromtool('spool', '1m', [
      { series: `rlmesh_agent_spool_bytes{namespace="${SYS}"}`, values: '100x5 800x20' },
      { series: `rlmesh_agent_spool_max_bytes{namespace="${SYS}"}`, values: '1000x25' },
    ], [
      { alertname: 'RLMeshAgentSpoolFilling', eval_time: '8m', exp_alerts: [] },
      { alertname: 'RLMeshAgentSpoolFilling', eval_time: '15m', exp_alerts: [{ exp_labels: { severity: 'warning', namespace: SYS }, exp_annotations: expanded('RLMeshAgentSpoolFilling', 'warning', { '$value | humanizePercentage': '80%' }) }] },
    ]);
    expect(r.out).toContain('SUCCESS');
  });

  it('credential near expiry: a rotation not stored for 15 minutes (warning), less than two hours left (critical); none pending, nothing', () => {
    // promtool's clock starts at the Unix epoch: at 20m, time() is 1200
    const r = runPromtool('credential', '1m', [
      { series: `rlmesh_agent_credential_valid_until_seconds{namespace="${SYS}",purpose="pull"}`, values: '0x4 87600x30' },
      { series: `rlmesh_agent_credential_valid_until_seconds{namespace="${SYS}",purpose="control"}`, values: '0x4 6600x30' },
      { series: `rlmesh_agent_credential_valid_until_seconds{namespace="${SYS}",purpose="relay"}`, values: '0x35' },
    ], [
      { alertname: 'RLMeshCredentialNearExpiry', eval_time: '5m', exp_alerts: [{ exp_labels: { severity: 'critical', namespace: SYS, purpose: 'control' }, exp_annotations: expanded('RLMeshCredentialNearExpiry', 'critical', { '$labels.purpose': 'control', '$value | humanizeDuration': '1h 45m 0s' }) }] },
      {
        alertname: 'RLMeshCredentialNearExpiry',
        eval_time: '20m',
        exp_alerts: [
          { exp_labels: { severity: 'critical', namespace: SYS, purpose: 'control' }, exp_annotations: expanded('RLMeshCredentialNearExpiry', 'critical', { '$labels.purpose': 'control', '$value | humanizeDuration': '1h 30m 0s' }) },
          { exp_labels: { severity: 'warning', namespace: SYS, purpose: 'control' }, exp_annotations: expanded('RLMeshCredentialNearExpiry', 'warning', { '$labels.purpose': 'control', '$value | humanizeDuration': '1h 30m 0s' }) },
          { exp_labels: { severity: 'warning', namespace: SYS, purpose: 'pull' }, exp_annotations: expanded('RLMeshCredentialNearExpiry', 'warning', { '$labels.purpose': 'pull', '$value | humanizeDuration': '1d 0h 0m 0s' }) },
        ],
      },
    ]);
    expect(r.out).toContain('SUCCESS');
  });

  it('evaluations failing: most of the last hour\'s finished evaluations failed (at least three)', () => {
    const failed = `rlmesh_controller_phase_transitions_total{namespace="${SYS}",phase="Failed",reason="StartDeadlineExceeded"}`;
    const ok = `rlmesh_controller_phase_transitions_total{namespace="${SYS}",phase="Succeeded",reason="Completed"}`;
    const r = runPromtool('failing', '1m', [
      { series: failed, values: '0x10 0+1x30' },
      { series: ok, values: '0x40' },
    ], [
      { alertname: 'RLMeshEvaluationsFailing', eval_time: '12m', exp_alerts: [] },
      { alertname: 'RLMeshEvaluationsFailing', eval_time: '20m', exp_alerts: [{ exp_labels: { severity: 'warning', namespace: SYS }, exp_annotations: expanded('RLMeshEvaluationsFailing', 'warning', { '$value | humanizePercentage': '100%' }) }] },
    ]);
    expect(r.out).toContain('SUCCESS');
    // a third failing is the normal business of evaluations, not the cluster's
    const fine = runPromtool('failing-some', '1m', [
      { series: failed, values: '0+1x40' },
      { series: ok, values: '0+2x40' },
    ], [{ alertname: 'RLMeshEvaluationsFailing', eval_time: '40m', exp_alerts: [] }]);
    expect(fine.out).toContain('SUCCESS');
  });

  it('egress refusals: far more than over the day before, and not when that is the usual rate', () => {
    const refused = `rlmesh_egress_decisions_total{namespace="${SYS}",outcome="refused",rule="not-allowed",pod="rlmesh-egress-proxy-a"}`;
    // a day at 1 refusal a minute, then 60 a minute
    const r = runPromtool('egress', '1m', [{ series: refused, values: '0+1x1440 1440+60x60' }], [
      { alertname: 'RLMeshEgressRefusalsHigh', eval_time: '1440m', exp_alerts: [] },
      { alertname: 'RLMeshEgressRefusalsHigh', eval_time: '1470m', exp_alerts: [{ exp_labels: { severity: 'warning', namespace: SYS }, exp_annotations: expanded('RLMeshEgressRefusalsHigh', 'warning', { '$value | printf "%.2f"': '1.00' }) }] },
    ]);
    expect(r.out).toContain('SUCCESS');
    const usual = runPromtool('egress-usual', '1m', [{ series: refused, values: '0+60x1500' }], [{ alertname: 'RLMeshEgressRefusalsHigh', eval_time: '1490m', exp_alerts: [] }]);
    expect(usual.out).toContain('SUCCESS');
  });

  it('artifact cache full: above 95% for 30 minutes, from the cache filler in rlmesh-runs', () => {
    const r = runPromtool('cache', '1m', [
      { series: `rlmesh_controller_cache_bytes{namespace="rlmesh-runs",pod="rlmesh-artifact-cache-filler-a"}`, values: '50x5 97x40' },
      { series: `rlmesh_controller_cache_capacity_bytes{namespace="rlmesh-runs",pod="rlmesh-artifact-cache-filler-a"}`, values: '100x45' },
    ], [
      { alertname: 'RLMeshArtifactCacheFull', eval_time: '30m', exp_alerts: [] },
      { alertname: 'RLMeshArtifactCacheFull', eval_time: '40m', exp_alerts: [{ exp_labels: { severity: 'warning', namespace: 'rlmesh-runs' }, exp_annotations: expanded('RLMeshArtifactCacheFull', 'warning', { '$value | humanizePercentage': '97%' }) }] },
    ]);
    expect(r.out).toContain('SUCCESS');
  });
});

describe('Grafana dashboard', () => {
  const dashboardOf = (objects: Map<string, K8sObject>, ns = SYS) => objects.get(`ConfigMap/${ns}/rlmesh-runtime-dashboard`) as (K8sObject & { data: Record<string, string> }) | undefined;

  it('a ConfigMap with the sidecar\'s label when enabled, in the namespace asked for, with the data source as a variable', () => {
    expect(dashboardOf(render(T))).toBeUndefined();
    const cm = dashboardOf(render([...T, '--set', 'metrics.grafanaDashboard.enabled=true']))!;
    expect(cm.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    const d = JSON.parse(cm.data['rlmesh-runtime.json']!) as Dashboard;
    expect(d.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource' }));
    expect(JSON.stringify(d)).not.toContain('"uid":"rlmesh-prometheus"');
    const custom = render([...T, '--set', 'metrics.grafanaDashboard.enabled=true', '--set', 'metrics.grafanaDashboard.namespace=monitoring', '--set-json', 'metrics.grafanaDashboard.labels={"my_dashboards":"yes"}', '--set', 'metrics.grafanaDashboard.annotations.grafana_folder=RLMesh']);
    const moved = dashboardOf(custom, 'monitoring')!;
    expect(moved.metadata.labels).toMatchObject({ my_dashboards: 'yes' });
    expect(moved.metadata.annotations).toEqual({ grafana_folder: 'RLMesh' });
    // both charts carry the same dashboard (scripts/generators/grafana-dashboard.ts copies lib/dashboards/)
    expect(cm.data['rlmesh-runtime.json']).toBe(readFileSync(join(root, 'charts/rlmesh-observability/files/dashboards/rlmesh-runtime.json'), 'utf8').trimEnd());
  });

  it('refuses a dashboard without a label and labels the chart owns, naming the value', () => {
    // helm merges labels with the chart's default grafana_dashboard: "1", so only a values file checked by the schema can empty them
    const noLabel = valuesSchema.safeParse({ joinToken: TOKEN, metrics: { grafanaDashboard: { enabled: true, labels: {} } } });
    expect(noLabel.success).toBe(false);
    const issue = noLabel.error!.issues.find((i) => i.path.join('.') === 'metrics.grafanaDashboard.labels');
    expect(issue?.message).toContain("Grafana's dashboard sidecar finds dashboards only by label");
    const reserved = template([...T, '--set', 'metrics.prometheusRule.labels.app\\.kubernetes\\.io/name=x', '--set', 'metrics.prometheusRule.alertLabels.severity=page'], { allowFail: true });
    expect(reserved.status).not.toBe(0);
    expect(reserved.stderr).toContain('metrics.prometheusRule.labels.app.kubernetes.io/name');
    expect(reserved.stderr).toContain('metrics.prometheusRule.alertLabels.severity');
  });
});

describe('metric names', () => {
  it('every metric the rules and the dashboard read is one a component exports', async () => {
    const exported = await exportedNames();
    expect(exported).toContain('rlmesh_agent_session_state');
    expect(exported).toContain('rlmesh_controller_reconcile_seconds_bucket');
    const used: [string, string][] = [];
    for (const r of rule.spec.groups.flatMap((g) => g.rules)) {
      const names = metricNames(r.expr);
      expect(names.length, `${r.alert} reads no rlmesh_ metric`).toBeGreaterThan(0);
      for (const n of names) used.push([`alert ${r.alert}`, n]);
    }
    const d = JSON.parse(readFileSync(join(CHART, 'files/dashboards/rlmesh-runtime.json'), 'utf8')) as Dashboard;
    const targets = d.panels.flatMap((p) => (p.targets ?? []).map((t) => [p.title ?? '', t.expr] as const));
    expect(targets.length).toBeGreaterThan(10);
    for (const [title, expr] of targets) {
      const names = metricNames(expr);
      expect(names.length, `panel ${title} reads no rlmesh_ metric: ${expr}`).toBeGreaterThan(0);
      for (const n of names) used.push([`panel ${title}`, n]);
    }
    const unknown = used.filter(([, n]) => !exported.has(n));
    expect(unknown, 'metrics the components do not export').toEqual([]);
  });
});
