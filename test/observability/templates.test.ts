// Template assertions for rlmesh-observability, rendered by the real helm: the
// Prometheus configuration, the relay Secret mount, restricted pods (checked by
// the real apiserver's PodSecurity admission), least RBAC, Grafana's password
// sources and the refusals, the dashboard's metric names against the real
// components' registries.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createMetrics as agentMetrics } from '../../agent/metrics.ts';
import { createMetrics as controllerMetrics } from '../../controller/metrics.ts';
import { createMetrics as egressMetrics } from '../../egress/metrics.ts';
import { imageBlocks, imageErrors } from '../../lib/chart-values.ts';
import {
  defaultObservabilityValues,
  observabilityCrossFieldErrors,
  observabilityValuesObjectSchema,
  observabilityValuesSchema,
  PROMETHEUS_IMAGE,
} from '../../lib/observability-values-schema.ts';
import { matchesSelector, type LabelSelector } from '../../lib/preflight/label-selector.ts';
import { kubectl } from '../support/cluster.ts';
import { CHART, CLUSTER, get, podTemplate, prometheusConfig, render, root, scenarios, template, valuesFile, type K8sObject } from './chart.ts';

const spec = ['-f', join(CHART, 'ci/spec-values.yaml')];
const URL = `https://api.rlmesh.dev/v1/cells/${CLUSTER}/metrics`;
const base = { prometheus: { clusterLabel: CLUSTER, remoteWrite: [{ url: URL }] } };
// the chart names no Grafana image: the scenarios name a mirror
const GRAFANA = { repository: 'mirror.example.com/grafana/grafana', tag: '12.1.1' };

describe('values', () => {
  it('values.yaml holds exactly the zod schema defaults', () => {
    expect(parse(readFileSync(join(CHART, 'values.yaml'), 'utf8'))).toEqual(defaultObservabilityValues());
  });

  it('every scenario passes the zod schema too', () => {
    for (const s of scenarios()) {
      const r = observabilityValuesSchema.safeParse(parse(readFileSync(join(CHART, 'ci', s), 'utf8')));
      expect(r.success, `${s}: ${JSON.stringify(r.error?.issues)}`).toBe(true);
    }
  });

  it('the spec defaults: relay Secret rlmesh-cluster-relay-secret, Bearer from /etc/rlmesh/relay/relay-secret, Grafana off', () => {
    const d = observabilityValuesSchema.parse({ prometheus: { clusterLabel: CLUSTER, remoteWrite: [{ url: URL }] } });
    expect(d.grafana.enabled).toBe(false);
    expect(d.prometheus.relayCredentialSecretName).toBe('rlmesh-cluster-relay-secret');
    expect(d.prometheus.remoteWrite[0]!.authorization).toEqual({ type: 'Bearer', credentials_file: '/etc/rlmesh/relay/relay-secret' });
  });

  it('helm refuses an unknown value through values.schema.json (strict schema)', () => {
    const r = template([...spec, '--set', 'prometheus.scrapeIntervall=10s'], { allowFail: true });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/scrapeIntervall/);
  });

  it('helm and zod refuse a plain-http remote-write URL and a credentials file outside the relay mount', () => {
    const bad = [
      { prometheus: { clusterLabel: CLUSTER, remoteWrite: [{ url: 'http://api.rlmesh.dev/v1/cells/x/metrics' }] } },
      { prometheus: { clusterLabel: CLUSTER, remoteWrite: [{ url: URL, authorization: { type: 'Bearer', credentials_file: '/tmp/relay' } }] } },
      { prometheus: { clusterLabel: CLUSTER, remoteWrite: [{ url: URL, authorization: { type: 'Basic' } }] } },
    ];
    for (const v of bad) {
      expect(observabilityValuesSchema.safeParse(v).success, JSON.stringify(v)).toBe(false);
      const r = template(['-f', valuesFile(v)], { allowFail: true });
      expect(r.status, JSON.stringify(v)).not.toBe(0);
      expect(r.stderr).toMatch(/values don't meet the specifications of the schema/);
    }
  });
});

describe('refusals (templates/_validate.tpl and the zod refinement say the same)', () => {
  const cases: { name: string; values: unknown; names: string[] }[] = [
    { name: 'grafana.enabled=true without a password source', values: { ...base, grafana: { enabled: true, image: GRAFANA } }, names: ['grafana.adminPassword', 'grafana.adminPasswordSecretName'] },
    { name: 'both password sources', values: { ...base, grafana: { enabled: true, image: GRAFANA, adminPassword: 'x', adminPasswordSecretName: 'y' } }, names: ['grafana.adminPassword', 'grafana.adminPasswordSecretName'] },
    {
      name: 'grafana.enabled=true without an image (the chart names none)',
      values: { ...base, grafana: { enabled: true, adminPasswordSecretName: 'g' } },
      names: ['grafana.image.repository', 'mirror the Grafana version you trust into your registry'],
    },
    {
      name: 'grafana.enabled=true with a repository but neither tag nor digest',
      values: { ...base, grafana: { enabled: true, adminPasswordSecretName: 'g', image: { repository: GRAFANA.repository } } },
      names: ['grafana.image.tag and grafana.image.digest are both empty'],
    },
    { name: 'Prometheus with neither tag nor digest', values: { prometheus: { ...base.prometheus, image: { tag: '' } } }, names: ['prometheus.image.tag and prometheus.image.digest are both empty'] },
    { name: 'no cluster label', values: { prometheus: { remoteWrite: [{ url: URL }] } }, names: ['prometheus.clusterLabel'] },
    { name: 'URL of another cluster', values: { prometheus: { clusterLabel: 'c_other', remoteWrite: [{ url: URL }] } }, names: ['prometheus.remoteWrite[0].url', 'prometheus.clusterLabel'] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const z = observabilityValuesSchema.safeParse(c.values);
      expect(z.success).toBe(false);
      const messages = z.error!.issues.map((i) => i.message);
      const r = template(['-f', valuesFile(c.values)], { allowFail: true });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain('rlmesh-observability: invalid values');
      for (const m of messages) expect(r.stderr).toContain(m);
      for (const n of c.names) expect(messages.join('\n')).toContain(n);
    });
  }
});

describe('Prometheus', () => {
  const objs = render(spec);

  it('renders Prometheus, its config, ServiceAccount, Service, discovery RBAC and its NetworkPolicy, and no Grafana', () => {
    expect([...objs.keys()].sort()).toEqual(
      [
        'ConfigMap/rlmesh-system/rlmesh-prometheus-config',
        'Deployment/rlmesh-system/rlmesh-prometheus',
        'NetworkPolicy/rlmesh-system/rlmesh-prometheus',
        'Role/rlmesh-system/rlmesh-prometheus-discovery',
        'RoleBinding/rlmesh-system/rlmesh-prometheus-discovery',
        'Service/rlmesh-system/rlmesh-prometheus',
        'ServiceAccount/rlmesh-system/rlmesh-prometheus',
      ].sort(),
    );
  });

  it('prometheus.yml: cluster external label, runtime pods by Kubernetes SD in rlmesh-system, remote write with the credentials file', () => {
    const cfg = prometheusConfig(objs);
    expect(cfg.global.external_labels).toEqual({ cluster: CLUSTER });
    const job = cfg.scrape_configs.find((j) => j.job_name === 'rlmesh-runtime') as Record<string, unknown> & {
      kubernetes_sd_configs: { role: string; namespaces: { names: string[] }; selectors: { role: string; label: string }[] }[];
      relabel_configs: { source_labels: string[]; regex?: string; action?: string; target_label?: string }[];
    };
    expect(job.kubernetes_sd_configs).toEqual([
      { role: 'pod', namespaces: { names: ['rlmesh-system'] }, selectors: [{ role: 'pod', label: 'app.kubernetes.io/part-of=rlmesh-runtime,rlmesh.dev/metrics=true' }] },
    ]);
    expect(job.relabel_configs[0]).toEqual({ source_labels: ['__meta_kubernetes_pod_container_port_name'], regex: 'metrics', action: 'keep' });
    expect(job.relabel_configs.map((r) => r.target_label).filter(Boolean)).toEqual(['component', 'namespace', 'pod']);
    expect(cfg.remote_write).toEqual([
      { name: 'rlmesh-relay-0', url: URL, authorization: { type: 'Bearer', credentials_file: '/etc/rlmesh/relay/relay-secret' } },
    ]);
  });

  it("the Deployment: the project's Prometheus, the relay Secret at /etc/rlmesh/relay (key relay-secret), restricted, pull Secret", () => {
    const d = get(objs, 'Deployment', 'rlmesh-prometheus');
    const t = podTemplate(d);
    const c = t.spec.containers[0]!;
    expect(c.image).toBe(`${PROMETHEUS_IMAGE.repository}:${PROMETHEUS_IMAGE.tag}`);
    expect(c.image).toBe('registry.rlmesh.dev/rlmesh/prometheus:v3.5.0');
    expect(t.spec.volumes?.find((v) => v.name === 'relay-credential')?.secret).toEqual({
      secretName: 'rlmesh-cluster-relay-secret',
      items: [{ key: 'relay-secret', path: 'relay-secret' }],
    });
    expect(c.volumeMounts).toContainEqual({ name: 'relay-credential', mountPath: '/etc/rlmesh/relay', readOnly: true });
    expect(c.args).toContain('--config.file=/etc/prometheus/prometheus.yml');
    expect(t.spec.serviceAccountName).toBe('rlmesh-prometheus');
    expect(t.spec.imagePullSecrets).toEqual([{ name: 'rlmesh-registry-pull' }]);
    expect(t.spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(c.resources?.limits).toBeDefined();
  });

  it('least RBAC: list and watch pods in the runtime namespace, nothing else', () => {
    const role = get(objs, 'Role', 'rlmesh-prometheus-discovery') as K8sObject & { rules: unknown };
    expect(role.rules).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] }]);
    expect([...objs.values()].filter((o) => o.kind.startsWith('Cluster'))).toEqual([]);
    const other = render([...spec, '--set', 'prometheus.runtimeNamespace=rlmesh-other']);
    expect(other.has('Role/rlmesh-other/rlmesh-prometheus-discovery')).toBe(true);
    expect((get(other, 'RoleBinding', 'rlmesh-prometheus-discovery', 'rlmesh-other') as K8sObject & { subjects: unknown }).subjects).toEqual([
      { kind: 'ServiceAccount', name: 'rlmesh-prometheus', namespace: 'rlmesh-system' },
    ]);
  });

  it('a private CA: ConfigMap, mount and tls_config.ca_file; queue_config passes through', () => {
    const o = render(['-f', join(CHART, 'ci/staging-ca-values.yaml')]);
    const cfg = prometheusConfig(o);
    expect(cfg.remote_write?.[0]?.tls_config).toEqual({ ca_file: '/etc/rlmesh/ca/ca.crt' });
    expect(cfg.remote_write?.[0]?.queue_config).toEqual({ batch_send_deadline: '5s', max_samples_per_send: 2000, max_backoff: '30s' });
    expect(cfg.global.scrape_interval).toBe('15s');
    const cm = get(o, 'ConfigMap', 'rlmesh-prometheus-ca-bundle') as K8sObject & { data: Record<string, string> };
    expect(cm.data['ca.crt']).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(podTemplate(get(o, 'Deployment', 'rlmesh-prometheus')).spec.containers[0]!.volumeMounts).toContainEqual({ name: 'ca-bundle', mountPath: '/etc/rlmesh/ca', readOnly: true });
  });

  it('a config change rolls the Deployment (checksum annotation); the same values render byte-identically', () => {
    const sum = (args: string[]) => podTemplate(get(render(args), 'Deployment', 'rlmesh-prometheus')).metadata.annotations?.['checksum/prometheus-config'];
    expect(sum(spec)).toMatch(/^[a-f0-9]{64}$/);
    expect(sum([...spec, '--set', 'prometheus.scrapeInterval=10s'])).not.toBe(sum(spec));
    expect(template(spec).stdout).toBe(template(spec).stdout);
  });
});

describe('Grafana', () => {
  it('with adminPasswordSecretName: the password comes from that Secret; no Secret is rendered', () => {
    const o = render(['-f', join(CHART, 'ci/grafana-secret-values.yaml')]);
    expect([...o.values()].filter((x) => x.kind === 'Secret')).toEqual([]);
    const t = podTemplate(get(o, 'Deployment', 'rlmesh-grafana'));
    const c = t.spec.containers[0]!;
    expect(c.image).toBe(`${GRAFANA.repository}:${GRAFANA.tag}`);
    expect(c.env?.find((e) => e.name === 'GF_SECURITY_ADMIN_PASSWORD')?.valueFrom?.secretKeyRef).toEqual({ name: 'grafana-admin', key: 'admin-password' });
    expect(c.env?.find((e) => e.name === 'GF_PLUGINS_PREINSTALL_DISABLED')?.value).toBe('true');
    expect(t.spec.automountServiceAccountToken).toBe(false);
    expect(t.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 472 });
  });

  it('with adminPassword: stored in Secret rlmesh-grafana-admin and referenced, never in the pod spec', () => {
    const o = render(['-f', join(CHART, 'ci/grafana-password-values.yaml')]);
    const s = get(o, 'Secret', 'rlmesh-grafana-admin') as K8sObject & { data: Record<string, string> };
    expect(Buffer.from(s.data['admin-password']!, 'base64').toString()).toBe('ci-only-password');
    const d = get(o, 'Deployment', 'rlmesh-grafana');
    expect(JSON.stringify(d)).not.toContain('ci-only-password');
    expect(podTemplate(d).spec.containers[0]!.env?.find((e) => e.name === 'GF_SECURITY_ADMIN_PASSWORD')?.valueFrom?.secretKeyRef).toEqual({ name: 'rlmesh-grafana-admin', key: 'admin-password' });
  });

  it('provisions the Prometheus data source and the runtime dashboard', () => {
    const o = render(['-f', join(CHART, 'ci/grafana-secret-values.yaml')]);
    const prov = get(o, 'ConfigMap', 'rlmesh-grafana-provisioning') as K8sObject & { data: Record<string, string> };
    const ds = parse(prov.data['datasources.yaml']!) as { datasources: { uid: string; url: string; type: string }[] };
    expect(ds.datasources).toEqual([expect.objectContaining({ uid: 'rlmesh-prometheus', type: 'prometheus', url: 'http://rlmesh-prometheus.rlmesh-system.svc:9090' })]);
    const dash = get(o, 'ConfigMap', 'rlmesh-grafana-dashboards') as K8sObject & { data: Record<string, string> };
    const json = JSON.parse(dash.data['rlmesh-runtime.json']!) as { uid: string; panels: { title: string }[] };
    expect(json.uid).toBe('rlmesh-runtime');
    const titles = json.panels.map((p) => p.title).join('\n');
    for (const t of ['Agent session', 'Evaluations by phase', 'Cache used', 'Decisions by outcome']) expect(titles).toContain(t);
  });
});

describe('images: repository:tag without a digest, repository@digest with one', () => {
  const PROM = 'sha256:' + '1a'.repeat(32);
  const GRAF = 'sha256:' + '2b'.repeat(32);
  const images = (o: Map<string, K8sObject>) =>
    Object.fromEntries([...o.values()].filter((x) => x.kind === 'Deployment').map((d) => [d.metadata.name, podTemplate(d).spec.containers.map((c) => c.image)]));
  const mirror = ['-f', join(CHART, 'ci/grafana-secret-values.yaml')];

  it('the values have two image blocks, each with an empty digest; Grafana names no image', () => {
    expect(imageBlocks(defaultObservabilityValues()).map((b) => [b.path, b.image.digest])).toEqual([
      ['prometheus.image', ''],
      ['grafana.image', ''],
    ]);
    expect(defaultObservabilityValues().grafana.image).toMatchObject({ repository: '', tag: '' });
  });

  it('without digests: every image is repository:tag', () => {
    expect(images(render(mirror))).toEqual({ 'rlmesh-prometheus': ['registry.rlmesh.dev/rlmesh/prometheus:v3.5.0'], 'rlmesh-grafana': ['mirror.example.com/grafana/grafana:12.1.1'] });
  });

  it('with digests (--set): every image is repository@digest, the tag ignored', () => {
    const o = render([...mirror, '--set', `prometheus.image.digest=${PROM}`, '--set', `grafana.image.digest=${GRAF}`]);
    expect(images(o)).toEqual({ 'rlmesh-prometheus': [`registry.rlmesh.dev/rlmesh/prometheus@${PROM}`], 'rlmesh-grafana': [`mirror.example.com/grafana/grafana@${GRAF}`] });
    // a digest alone is enough for a mirrored Grafana
    const digestOnly = render([...spec, '--set', 'grafana.enabled=true', '--set', 'grafana.adminPasswordSecretName=g', '--set', `grafana.image.repository=${GRAFANA.repository}`, '--set', `grafana.image.digest=${GRAF}`]);
    expect(images(digestOnly)['rlmesh-grafana']).toEqual([`${GRAFANA.repository}@${GRAF}`]);
  });

  it('global.imageRegistry moves both images to the mirror, path and digest kept (ci/scheduling-mirror-values.yaml)', () => {
    const o = render(['-f', join(CHART, 'ci/scheduling-mirror-values.yaml'), '--set', `prometheus.image.digest=${PROM}`]);
    expect(images(o)).toEqual({ 'rlmesh-prometheus': [`mirror.example.com/rlmesh/prometheus@${PROM}`], 'rlmesh-grafana': ['mirror.example.com/grafana/grafana:12.1.1'] });
    const r = template([...mirror, '--set', 'global.imageRegistry=https://mirror.example.com'], { allowFail: true });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('/global/imageRegistry');
  });

  it('a malformed digest is refused at its path: by values.schema.json, and by _validate.tpl when the schema is skipped', () => {
    for (const p of ['prometheus.image', 'grafana.image']) {
      const r = template([...mirror, '--set', `${p}.digest=latest`], { allowFail: true });
      expect(r.status, p).not.toBe(0);
      expect(r.stderr, p).toContain(`/${p.replace('.', '/')}/digest`);
      expect(r.stderr, p).toContain('sha256:[a-f0-9]{64}');
    }
    const r = template([...mirror, '--set', 'prometheus.image.digest=sha256:abc', '--set', 'grafana.image.digest=latest', '--skip-schema-validation'], { allowFail: true });
    expect(r.status).not.toBe(0);
    const values = observabilityValuesObjectSchema.parse(parse(readFileSync(join(CHART, 'ci/grafana-secret-values.yaml'), 'utf8')));
    values.prometheus.image.digest = 'sha256:abc';
    values.grafana.image.digest = 'latest';
    const expected = imageErrors(values, []);
    expect(expected.map((e) => e.path)).toEqual(['prometheus.image.digest', 'grafana.image.digest']);
    for (const e of expected) expect(r.stderr).toContain(`${e.path}: ${e.message}`);
  });

  it('grafana.enabled without an image is refused before anything renders, saying what to do', () => {
    const r = template([...spec, '--set', 'grafana.enabled=true', '--set', 'grafana.adminPasswordSecretName=g'], { allowFail: true });
    expect(r.status).not.toBe(0);
    const errors = observabilityCrossFieldErrors(observabilityValuesObjectSchema.parse({ ...parse(readFileSync(join(CHART, 'ci/spec-values.yaml'), 'utf8')), grafana: { enabled: true, adminPasswordSecretName: 'g' } }));
    expect(errors.map((e) => e.path)).toEqual(['grafana.image.repository']);
    expect(r.stderr).toContain(`grafana.image.repository: ${errors[0]!.message}`);
    expect(r.stderr).toMatch(/mirror the Grafana version you trust into your registry and set grafana\.image\.repository, grafana\.image\.tag and grafana\.image\.digest/);
    expect(r.stdout).not.toContain('kind: Deployment');
  });
});

describe('the dashboard', () => {
  const dashboard = JSON.parse(readFileSync(join(CHART, 'files/dashboards/rlmesh-runtime.json'), 'utf8')) as {
    panels: { title: string; type: string; targets?: { expr: string }[] }[];
  };
  const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

  it('shows connection state, evaluations by phase, cache and egress', () => {
    const all = exprs.join('\n');
    for (const prefix of ['rlmesh_agent_session_state', 'rlmesh_controller_phase_transitions_total', 'rlmesh_controller_cache_', 'rlmesh_egress_']) expect(all).toContain(prefix);
  });

  const registries = [
    agentMetrics({ spoolBytes: () => 0, spoolRecords: () => 0, spoolMaxBytes: 1, credentialAgeSeconds: () => 0 }).registry,
    controllerMetrics().registry,
    egressMetrics().registry,
  ];

  it('queries only metrics the agent, controller and egress proxy really export', async () => {
    const known = new Set<string>();
    for (const r of registries) for (const m of await r.getMetricsAsJSON()) known.add(m.name);
    const used = new Set(exprs.flatMap((e) => e.match(/rlmesh_[a-z0-9_]+/g) ?? []).map((n) => n.replace(/_(bucket|sum|count)$/, '')));
    expect(used.size).toBeGreaterThan(15);
    for (const n of used) expect(known, `${n} is not exported by any component`).toContain(n);
  });

  it('groups and filters only by labels the queried metrics carry, so a renamed label fails here too', () => {
    // prom-client keeps each metric's configured labelNames on the metric
    const labelsOf = new Map(registries.flatMap((r) => r.getMetricsAsArray()).map((m) => [m.name, (m as { labelNames?: readonly string[] }).labelNames ?? []]));
    // added by Prometheus: histogram buckets, and the chart's relabelling of each target
    const scrapeLabels = ['le', 'component', 'namespace', 'pod', 'job', 'instance'];
    let checked = 0;
    for (const e of exprs) {
      const names = (e.match(/rlmesh_[a-z0-9_]+/g) ?? []).map((n) => n.replace(/_(bucket|sum|count)$/, ''));
      const carried = new Set([...scrapeLabels, ...names.flatMap((n) => labelsOf.get(n) ?? [])]);
      const grouped = [...e.matchAll(/\bby \(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((l) => l.trim()));
      const filtered = [...e.matchAll(/\{([^}]*)\}/g)].flatMap((m) => [...m[1]!.matchAll(/([a-z_]+)\s*(=~|!~|!=|=)/g)].map((l) => l[1]!));
      for (const l of [...grouped, ...filtered]) {
        expect(carried, `${e}: no queried metric has the label ${l}`).toContain(l);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(10);
  });
});

describe('restricted PodSecurity on the real apiserver', () => {
  const NS = 'rlmesh-obs-psa';
  beforeAll(() => {
    kubectl(['delete', 'namespace', NS, '--ignore-not-found', '--wait=true']);
    kubectl(['create', 'namespace', NS]);
    kubectl(['label', 'namespace', NS, 'pod-security.kubernetes.io/enforce=restricted']);
  });
  afterAll(() => {
    kubectl(['delete', 'namespace', NS, '--ignore-not-found', '--wait=false']);
  });

  it('every scenario: every object passes server-side dry-run, every pod template is admitted as a Pod', () => {
    for (const s of scenarios()) {
      const o = render(['-f', join(CHART, 'ci', s)]);
      const objects = [...o.values()].map((x) => ({ ...x, metadata: { ...x.metadata, namespace: NS } }));
      const r = kubectl(['create', '--dry-run=server', '-f', '-'], { input: objects.map((x) => JSON.stringify(x)).join('\n'), allowFail: true });
      expect(r.status, `${s}: ${r.stderr}`).toBe(0);
      expect(r.stderr, s).not.toMatch(/would violate PodSecurity/);
      for (const w of [...o.values()].filter((x) => x.kind === 'Deployment')) {
        const t = podTemplate(w);
        const { serviceAccountName: _sa, ...podSpec } = t.spec;
        const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: `${w.metadata.name}-psa`, namespace: NS }, spec: podSpec };
        const p = kubectl(['create', '--dry-run=server', '-f', '-'], { input: JSON.stringify(pod), allowFail: true });
        expect(p.status, `${s} ${w.metadata.name}: ${p.stderr}`).toBe(0);
      }
    }
  });
});

describe('NetworkPolicies (the runtime chart denies all traffic in rlmesh-system by default)', () => {
  type Policy = { spec: { podSelector: LabelSelector; policyTypes: string[]; ingress?: { from?: { podSelector?: LabelSelector }[]; ports?: { port: number }[] }[]; egress?: unknown[] } };
  it('every pod of every scenario has a policy of its own for ingress and egress', () => {
    for (const s of scenarios()) {
      const objects = render(['-f', join(CHART, 'ci', s)]);
      const policies = [...objects.values()].filter((o) => o.kind === 'NetworkPolicy') as unknown as Policy[];
      const pods = [...objects.values()].filter((o) => ['Deployment', 'StatefulSet', 'DaemonSet', 'Job'].includes(o.kind));
      expect(pods.length, s).toBeGreaterThan(0);
      for (const pod of pods) {
        const labels = podTemplate(pod).metadata.labels;
        const own = policies.filter((p) => matchesSelector(p.spec.podSelector, labels));
        expect(own.flatMap((p) => p.spec.policyTypes).sort(), `${s}: ${pod.metadata.name}`).toEqual(['Egress', 'Ingress']);
      }
    }
  });

  it('only Grafana reaches Prometheus, on 9090; without Grafana nothing does', () => {
    const withGrafana = render(['-f', join(CHART, 'ci/grafana-password-values.yaml')]);
    const prom = get(withGrafana, 'NetworkPolicy', 'rlmesh-prometheus') as unknown as Policy;
    const grafanaSelector = { matchLabels: { 'app.kubernetes.io/name': 'rlmesh-grafana', 'app.kubernetes.io/instance': 'rlmesh-observability' } };
    expect(prom.spec.ingress).toEqual([{ from: [{ podSelector: grafanaSelector }], ports: [{ protocol: 'TCP', port: 9090 }] }]);
    expect(matchesSelector(grafanaSelector, podTemplate(get(withGrafana, 'Deployment', 'rlmesh-grafana')).metadata.labels)).toBe(true);
    const alone = get(render(spec), 'NetworkPolicy', 'rlmesh-prometheus') as unknown as Policy;
    expect(alone.spec.ingress).toEqual([]);
  });

  it('DNS only to the runtime\'s network.dnsPeers on network.dnsPorts (OpenShift: 5353 after DNAT), never to anywhere', () => {
    type Rule = { to?: unknown[]; ports?: { protocol: string; port: number }[] };
    const runtime = parse(readFileSync(join(root, 'charts/rlmesh-runtime/ci/openshift-dns-values.yaml'), 'utf8')) as { network: { dnsPeers: unknown[]; dnsPorts: number[] } };
    const objects = render(['-f', join(CHART, 'ci/openshift-dns-values.yaml'), '--set', 'grafana.enabled=true', '--set', 'grafana.adminPassword=x', '--set', 'grafana.image.repository=registry.example.com/grafana', '--set', 'grafana.image.tag=12.1.1']);
    for (const name of ['rlmesh-prometheus', 'rlmesh-grafana']) {
      const egress = (get(objects, 'NetworkPolicy', name) as unknown as { spec: { egress: Rule[] } }).spec.egress;
      const dns = egress.filter((e) => e.ports?.some((p) => p.protocol === 'UDP'));
      expect(dns, name).toEqual([{ to: runtime.network.dnsPeers, ports: runtime.network.dnsPorts.flatMap((port) => [{ protocol: 'UDP', port }, { protocol: 'TCP', port }]) }]);
    }
    // the defaults are the runtime chart's defaults (CoreDNS in kube-system, port 53): one schema for both
    const dflt = (get(render(spec), 'NetworkPolicy', 'rlmesh-prometheus') as unknown as { spec: { egress: Rule[] } }).spec.egress.find((e) => e.ports?.some((p) => p.protocol === 'UDP'));
    expect(dflt?.to).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }]);
  });
});
