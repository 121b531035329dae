// The chart on the real local cluster: server-side dry-run of every scenario
// (PodSecurity enforced), helm push to the OCI registry and install from oci://,
// upgrade --reuse-values, upgrade --install with a new token, the CRD hook,
// uninstall (what stays, what goes) and reinstall adopting what was kept.
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { clusterInfo, helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { releasedChart } from '../support/release.ts';
import { until } from '../support/until.ts';
import { CHART, HOOK_ON_KWOK, get, podTemplate, render, scenarios, template, type K8sObject } from './chart.ts';
import { parseAllDocuments } from 'yaml';
import { tempDir } from '../support/temp.ts';

const SYS = 'rlmesh-system';
const RUNS = 'rlmesh-runs';
const T1 = 'rlm_jt_first0123456789abcdefghij';
const T2 = 'rlm_jt_second0123456789abcdefghi';
const T3 = 'rlm_jt_third0123456789abcdefghij';
const CRDS = ['rlmeshcaches.rlmesh.dev', 'rlmeshevaluations.rlmesh.dev'];

let ref = '';
const plain = ['--plain-http'];

const json = <T>(args: string[]): T => JSON.parse(kubectl([...args, '-o', 'json']).stdout) as T;
const exists = (args: string[]): boolean => kubectl(['get', ...args], { allowFail: true }).status === 0;
const secretToken = (): string =>
  Buffer.from(json<{ data: { token: string } }>(['-n', SYS, 'get', 'secret', 'rlmesh-join-token']).data.token, 'base64').toString();
const agentAnnotations = (): Record<string, string> =>
  json<{ spec: { template: { metadata: { annotations: Record<string, string> } } } }>(['-n', SYS, 'get', 'deployment', 'rlmesh-cluster-agent']).spec.template.metadata.annotations;

beforeAll(async () => {
  // start from a cluster without the release or its kept objects
  helm(['uninstall', 'rlmesh', '-n', SYS, '--wait', '--ignore-not-found'], { allowFail: true });
  kubectl(['delete', 'namespace', RUNS, '--ignore-not-found', '--wait=true', '--timeout=120s']);
  kubectl(['delete', 'rlmeshcaches.rlmesh.dev', 'default', '--ignore-not-found'], { allowFail: true });
  kubectl(['-n', SYS, 'delete', 'secret', 'rlmesh-registry-join-crd-upgrade', '--ignore-not-found'], { allowFail: true });
  await until('rlmesh-runs to be gone', () => !exists(['namespace', RUNS]), { timeoutMs: 90_000, intervalMs: 500 });

  // what the release step of the test command published to the local registry
  ref = releasedChart().ref;
  expect(ref).toBe(`oci://${clusterInfo().registry}/rlmesh/charts/rlmesh-runtime`);
});

describe('the chart on the local cluster', () => {
  it('installs from oci:// with a join token: every object, CRDs, restricted runs namespace', () => {
    const r = helm(['install', 'rlmesh', ref, '--version', '0.1.0', '-n', SYS, '--create-namespace', '--set', `joinToken=${T1}`, ...HOOK_ON_KWOK, ...plain]);
    expect(r.stdout).toContain('STATUS: deployed');
    // NOTES.txt: the spec's four Verify commands for this release
    for (const line of [
      `kubectl -n ${SYS} rollout status deployment/rlmesh-cluster-agent`,
      `kubectl -n ${SYS} rollout status deployment/rlmesh-cluster-controller`,
      'kubectl get rlmeshcaches',
      'kubectl -n rlmesh-runs get pods,pvc',
    ])
      expect(r.stdout).toContain(line);
    for (const d of ['rlmesh-cluster-agent', 'rlmesh-cluster-controller', 'rlmesh-egress-proxy']) expect(exists(['-n', SYS, 'deployment', d]), d).toBe(true);
    for (const c of CRDS) expect(exists(['crd', c])).toBe(true);
    expect(exists(['rlmeshcaches.rlmesh.dev', 'default'])).toBe(true);
    const ns = json<{ metadata: { labels: Record<string, string> } }>(['get', 'namespace', RUNS]);
    expect(ns.metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
    expect(exists(['-n', RUNS, 'pvc', 'rlmesh-artifact-cache'])).toBe(true);
    expect(exists(['-n', SYS, 'pvc', 'rlmesh-agent-spool'])).toBe(true);
    expect(secretToken()).toBe(T1);
  });

  it('server-side dry-run of every scenario against the apiserver; pod templates pass enforced restricted PodSecurity', () => {
    // what the release already has is replaced (validated whole, no merge); the rest is created
    const key = (o: K8sObject) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    const installed = new Set(
      parseAllDocuments(helm(['get', 'manifest', 'rlmesh', '-n', SYS]).stdout)
        .map((d) => d.toJS() as K8sObject | null)
        .filter((o): o is K8sObject => o !== null)
        .map(key),
    );
    for (const s of scenarios()) {
      const rendered = template(['-f', join(CHART, 'ci', s)]).stdout;
      const docs = parseAllDocuments(rendered).map((d) => d.toJS() as K8sObject | null).filter((o): o is K8sObject => o !== null);
      // a bound PVC's spec is immutable: validate the scenario's PVCs as new claims
      for (const o of docs) if (o.kind === 'PersistentVolumeClaim') o.metadata.name = `${o.metadata.name}-dryrun`;
      for (const [verb, group] of [
        ['replace', docs.filter((o) => installed.has(key(o)))],
        ['create', docs.filter((o) => !installed.has(key(o)))],
      ] as const) {
        if (group.length === 0) continue;
        const input = group.map((o) => JSON.stringify(o)).join('\n');
        const r = kubectl([verb, '--dry-run=server', '-f', '-'], { input, allowFail: true });
        // ServiceMonitor/PodMonitor CRDs are not on this cluster; no scenario enables them
        expect(r.status, `${s} ${verb}: ${r.stderr}`).toBe(0);
        expect(r.stderr, s).not.toMatch(/would violate PodSecurity/);
      }
      // each pod template as a Pod in rlmesh-runs, where restricted is enforced
      for (const doc of parseAllDocuments(rendered)) {
        const o = doc.toJS() as K8sObject | null;
        if (!o || !['Deployment', 'DaemonSet', 'Job', 'Pod'].includes(o.kind)) continue;
        // the helm test hook is a Pod itself
        const t = o.kind === 'Pod' ? (o as unknown as ReturnType<typeof podTemplate>) : podTemplate(o);
        const { serviceAccountName: _sa, ...spec } = t.spec;
        const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: `dryrun-${o.metadata.name}`, namespace: RUNS }, spec };
        const p = kubectl(['create', '--dry-run=server', '-f', '-'], { input: JSON.stringify(pod), allowFail: true });
        expect(p.status, `${s} ${o.kind}/${o.metadata.name}: ${p.stderr}`).toBe(0);
        expect(p.stderr).not.toMatch(/PodSecurity/);
      }
    }
  });

  it('upgrade --reuse-values keeps the used token and runs the CRD hook Job (kwok completes it)', () => {
    const before = agentAnnotations();
    const r = helm(['upgrade', 'rlmesh', ref, '--version', '0.1.0', '-n', SYS, '--reuse-values', ...plain]);
    expect(r.stdout).toContain('has been upgraded');
    expect(secretToken()).toBe(T1);
    expect(agentAnnotations()['checksum/join-token']).toBe(before['checksum/join-token']);
    const events = kubectl(['-n', SYS, 'get', 'events', '--field-selector', 'involvedObject.kind=Job,involvedObject.name=rlmesh-crd-upgrade', '-o', 'jsonpath={range .items[*]}{.reason}{"\\n"}{end}']).stdout;
    expect(events).toContain('SuccessfulCreate');
    expect(events).toContain('Completed');
    // hook objects are gone once it succeeded
    expect(exists(['-n', SYS, 'job', 'rlmesh-crd-upgrade'])).toBe(false);
    expect(exists(['clusterrole', 'rlmesh-crd-upgrade'])).toBe(false);
  });

  it('a CRD hook that fails (its pod never scheduled, Helm times out) leaves neither its join-token pull Secret nor its rights behind', () => {
    const failed = helm(['upgrade', 'rlmesh', ref, '--version', '0.1.0', '-n', SYS, '--reuse-values', '--set', 'crdUpgradeHook.nodeSelector.type=nowhere', '--timeout', '20s', ...plain], { allowFail: true });
    expect(failed.status).not.toBe(0);
    expect(failed.stderr).toMatch(/pre-upgrade hooks failed/);
    expect(exists(['-n', SYS, 'secret', 'rlmesh-crd-upgrade-join'])).toBe(false);
    expect(exists(['-n', SYS, 'serviceaccount', 'rlmesh-crd-upgrade'])).toBe(false);
    expect(exists(['clusterrole', 'rlmesh-crd-upgrade'])).toBe(false);
    expect(exists(['clusterrolebinding', 'rlmesh-crd-upgrade'])).toBe(false);
    // the failed Job stays for its events until the next upgrade, which replaces it and succeeds
    expect(exists(['-n', SYS, 'job', 'rlmesh-crd-upgrade'])).toBe(true);
    helm(['upgrade', 'rlmesh', ref, '--version', '0.1.0', '-n', SYS, '--reuse-values', '--set', 'crdUpgradeHook.nodeSelector.type=kwok', ...plain]);
    expect(exists(['-n', SYS, 'job', 'rlmesh-crd-upgrade'])).toBe(false);
    expect(secretToken()).toBe(T1);
  });

  it('upgrade --reuse-values to a newer chart version fills in the values that version added', () => {
    // a next chart version with a new value (and a template that uses it)
    const dir = tempDir('rlmesh-chart-next-');
    const next = join(dir, 'rlmesh-runtime');
    cpSync(CHART, next, { recursive: true });
    const chartYaml = join(next, 'Chart.yaml');
    writeFileSync(chartYaml, readFileSync(chartYaml, 'utf8').replace(/^version: .*$/m, 'version: 0.1.1'));
    writeFileSync(join(next, 'values.yaml'), `${readFileSync(join(next, 'values.yaml'), 'utf8')}newFeature:\n  settings:\n    port: 1234\n`);
    // npm run generate writes the same defaults into templates/_defaults.tpl
    const defaultsTpl = join(next, 'templates/_defaults.tpl');
    writeFileSync(
      defaultsTpl,
      readFileSync(defaultsTpl, 'utf8').replace(/^\{".*\}$/m, (j) => JSON.stringify({ ...JSON.parse(j), newFeature: { settings: { port: 1234 } } })),
    );
    const schema = JSON.parse(readFileSync(join(next, 'values.schema.json'), 'utf8')) as { properties: Record<string, unknown> };
    schema.properties.newFeature = { type: 'object' };
    writeFileSync(join(next, 'values.schema.json'), JSON.stringify(schema));
    writeFileSync(
      join(next, 'templates/new-feature.yaml'),
      '{{- include "rlmesh.defaults" . }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rlmesh-new-feature\n  namespace: {{ .Release.Namespace }}\ndata:\n  port: {{ .Values.newFeature.settings.port | quote }}\n',
    );
    helm(['upgrade', 'rlmesh', next, '-n', SYS, '--reuse-values']);
    expect(json<{ data: { port: string } }>(['-n', SYS, 'get', 'configmap', 'rlmesh-new-feature']).data.port).toBe('1234');
    expect(secretToken()).toBe(T1);
    // and back to the published version
    helm(['upgrade', 'rlmesh', ref, '--version', '0.1.0', '-n', SYS, '--reuse-values', ...plain]);
    expect(exists(['-n', SYS, 'configmap', 'rlmesh-new-feature'])).toBe(false);
  });

  it("the hook's own apply command, run as its ServiceAccount, puts the chart's CRDs back", async () => {
    const hook = render(['--set', `joinToken=${T1}`, '--show-only', 'templates/crd-upgrade-hook.yaml']);
    for (const kind of ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding']) {
      const o = get(hook, kind, kind === 'ServiceAccount' ? SYS : '', 'rlmesh-crd-upgrade');
      kubectl(['apply', '-f', '-'], { input: JSON.stringify(o) });
    }
    try {
      const path = '/spec/versions/0/schema/openAPIV3Schema/description';
      kubectl(['patch', 'crd', CRDS[0]!, '--type=json', '-p', JSON.stringify([{ op: 'replace', path, value: 'stale' }])]);
      const desc = () => json<{ spec: { versions: { schema: { openAPIV3Schema: { description: string } } }[] } }>(['get', 'crd', CRDS[0]!]).spec.versions[0]!.schema.openAPIV3Schema.description;
      expect(desc()).toBe('stale');
      const cm = get(hook, 'ConfigMap', SYS, 'rlmesh-crd-upgrade') as K8sObject & { data: Record<string, string> };
      const dir = tempDir('rlmesh-crds-');
      for (const [f, body] of Object.entries(cm.data)) writeFileSync(join(dir, f), body);
      const c = podTemplate(get(hook, 'Job', SYS, 'rlmesh-crd-upgrade')).spec.containers[0]!;
      const args = c.args!.map((a) => (a === '/crds/' ? dir : a));
      const kubeconfig = await serviceAccountKubeconfig(SYS, 'rlmesh-crd-upgrade');
      const out = execFileSync(join(clusterInfo().bin, c.command![0]!), ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' });
      expect(out).toContain('rlmeshcaches.rlmesh.dev serverside-applied');
      expect(desc()).not.toBe('stale');
      expect(desc()).toContain('RLMeshCache');
    } finally {
      for (const kind of ['ClusterRoleBinding', 'ClusterRole']) kubectl(['delete', kind.toLowerCase(), 'rlmesh-crd-upgrade', '--ignore-not-found']);
      kubectl(['-n', SYS, 'delete', 'serviceaccount', 'rlmesh-crd-upgrade', '--ignore-not-found']);
    }
  });

  it('upgrade --install with a new token replaces it and rolls the agent', () => {
    const before = agentAnnotations();
    helm(['upgrade', '--install', 'rlmesh', ref, '--version', '0.1.0', '-n', SYS, '--create-namespace', '--set', `joinToken=${T2}`, ...HOOK_ON_KWOK, ...plain]);
    expect(secretToken()).toBe(T2);
    expect(agentAnnotations()['checksum/join-token']).not.toBe(before['checksum/join-token']);
  });

  it('uninstall keeps rlmesh-runs, the artifact cache, the CRDs and the hook pull Secret; removes the spool PVC', async () => {
    // the agent writes the hook pull Secret at join: do it with the agent's own token
    const agent = await serviceAccountKubeconfig(SYS, 'rlmesh-cluster-agent');
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'rlmesh-registry-join-crd-upgrade', namespace: SYS },
      type: 'kubernetes.io/dockerconfigjson',
      data: { '.dockerconfigjson': Buffer.from('{"auths":{}}').toString('base64') },
    };
    execFileSync(join(clusterInfo().bin, 'kubectl'), ['--kubeconfig', agent, 'create', '-f', '-'], { input: JSON.stringify(secret) });
    const cacheUid = json<{ metadata: { uid: string } }>(['-n', RUNS, 'get', 'pvc', 'rlmesh-artifact-cache']).metadata.uid;

    const r = helm(['uninstall', 'rlmesh', '-n', SYS, '--wait']);
    expect(r.stdout + r.stderr).toMatch(/resource-policy|kept|uninstalled/);
    await until('the spool PVC to go', () => !exists(['-n', SYS, 'pvc', 'rlmesh-agent-spool']), { timeoutMs: 90_000, intervalMs: 500 });
    expect(exists(['namespace', RUNS])).toBe(true);
    expect(json<{ metadata: { uid: string } }>(['-n', RUNS, 'get', 'pvc', 'rlmesh-artifact-cache']).metadata.uid).toBe(cacheUid);
    for (const c of CRDS) expect(exists(['crd', c])).toBe(true);
    expect(exists(['-n', SYS, 'secret', 'rlmesh-registry-join-crd-upgrade'])).toBe(true);
    expect(exists(['-n', SYS, 'deployment', 'rlmesh-cluster-agent'])).toBe(false);

    // install again: the kept namespace and PVC are adopted, no manual step
    helm(['install', 'rlmesh', ref, '--version', '0.1.0', '-n', SYS, '--set', `joinToken=${T3}`, ...HOOK_ON_KWOK, ...plain]);
    const pvc = json<{ metadata: { uid: string; annotations: Record<string, string> } }>(['-n', RUNS, 'get', 'pvc', 'rlmesh-artifact-cache']);
    expect(pvc.metadata.uid).toBe(cacheUid);
    expect(pvc.metadata.annotations['meta.helm.sh/release-name']).toBe('rlmesh');
    expect(secretToken()).toBe(T3);
    expect(exists(['-n', SYS, 'pvc', 'rlmesh-agent-spool'])).toBe(true);
    expect(helm(['status', 'rlmesh', '-n', SYS]).stdout).toContain('STATUS: deployed');
  });
});
