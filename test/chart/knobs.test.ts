// The chart's ordinary knobs (lib/chart-knobs.ts) as the real helm renders them:
// commonLabels on every object, podLabels and podAnnotations on every pod,
// ServiceAccount annotations, extraEnv, extraVolumes and extraVolumeMounts,
// global.imagePullSecrets, logging, podSecurity.arbitraryUid; and
// the refusals of _validate-knobs.tpl, which must say what knobErrors() says.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHART_ENV_NAMES, CHART_LABEL_KEYS, CHART_VOLUME_NAMES, RESTRICTED_VOLUME_SOURCES, VOLUME_BLOCKS } from '../../lib/chart-knobs.ts';
import { crossFieldErrors, POD_BLOCKS, valuesObjectSchema } from '../../lib/values-schema.ts';
import { CHART, podTemplate, render, template, TOKEN, valuesFile, type K8sObject, type PodSpec } from './chart.ts';

const token = ['--set', `joinToken=${TOKEN}`];
const workloads = (o: Map<string, K8sObject>) => [...o.values()].filter((x) => ['Deployment', 'DaemonSet', 'Job'].includes(x.kind));
// gpuFeatureDiscovery on, so its DaemonSet and ServiceAccount are rendered too
const gpuOn = ['--set', 'gpuFeatureDiscovery.enabled=true'];
const scenario = render([...gpuOn, '-f', join(CHART, 'ci/common-labels-values.yaml')]);
const plain = render([...token, ...gpuOn]);

describe('commonLabels, podLabels, podAnnotations', () => {
  it('every object the chart renders carries commonLabels', () => {
    const without = [...scenario.values()].filter((o) => o.metadata.labels?.['example.com/cost-center'] !== 'ml-platform' || o.metadata.labels.owner !== 'team-rl');
    expect(without.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([]);
  });

  it('every pod template carries commonLabels, podLabels and podAnnotations; selectors stay the chart\'s own', () => {
    const w = workloads(scenario);
    expect(w.length).toBeGreaterThanOrEqual(6);
    for (const o of w) {
      const pod = podTemplate(o);
      expect(pod.metadata.labels, o.metadata.name).toMatchObject({ 'example.com/cost-center': 'ml-platform', 'example.com/data-class': 'internal' });
      expect(pod.metadata.annotations?.['example.com/contact'], o.metadata.name).toBe('rl-oncall');
      const selector = (o.spec as { selector?: { matchLabels: Record<string, string> } }).selector?.matchLabels ?? {};
      for (const k of Object.keys(selector)) expect(CHART_LABEL_KEYS, `${o.metadata.name} selects by ${k}`).toContain(k);
    }
  });

  it('a component\'s own podAnnotations win over podAnnotations on the same key', () => {
    const o = render([...token, '--set', 'podAnnotations.example\\.com/a=global', '--set', 'agent.podAnnotations.example\\.com/a=agent']);
    expect(podTemplate(o.get('Deployment/rlmesh-system/rlmesh-cluster-agent')!).metadata.annotations?.['example.com/a']).toBe('agent');
    expect(podTemplate(o.get('Deployment/rlmesh-system/rlmesh-cluster-controller')!).metadata.annotations?.['example.com/a']).toBe('global');
  });
});

describe('ServiceAccount annotations', () => {
  it('each ServiceAccount carries its component\'s serviceAccount.annotations and no other\'s', () => {
    const sa = (ns: string, name: string) => scenario.get(`ServiceAccount/${ns}/${name}`)!.metadata.annotations ?? {};
    expect(sa('rlmesh-system', 'rlmesh-cluster-controller')).toEqual({ 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/rlmesh-controller' });
    expect(sa('rlmesh-runs', 'rlmesh-artifact-cache-filler')).toEqual({ 'iam.gke.io/gcp-service-account': 'rlmesh-filler@example-project.iam.gserviceaccount.com' });
    expect(sa('rlmesh-system', 'rlmesh-cluster-agent')).toEqual({});
  });

  it('every ServiceAccount of a pod block takes them (the CRD hook\'s keeps its hook annotations)', () => {
    const args = POD_BLOCKS.flatMap((b) => ['--set', `${b}.serviceAccount.annotations.example\\.com/block=${b}`]);
    const o = render([...token, ...gpuOn, ...args]);
    // the helm test hook's ServiceAccount (rlmesh-status-test) belongs to no pod block
    const sas = [...o.values()].filter((x) => x.kind === 'ServiceAccount' && x.metadata.name !== 'rlmesh-status-test');
    expect(sas.map((s) => s.metadata.annotations?.['example.com/block']).sort()).toEqual([...POD_BLOCKS].sort());
    const hook = sas.find((s) => s.metadata.name === 'rlmesh-crd-upgrade')!;
    expect(hook.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-upgrade', 'example.com/block': 'crdUpgradeHook' });
  });
});

describe('extraEnv and logging', () => {
  it('extraEnv comes after the chart\'s own variables, in its container only', () => {
    const env = (o: Map<string, K8sObject>, name: string) => podTemplate(o.get(`Deployment/rlmesh-system/${name}`)!).spec.containers[0]!.env!;
    expect(env(scenario, 'rlmesh-cluster-controller').at(-1)).toEqual({ name: 'TZ', value: 'UTC' });
    expect(env(scenario, 'rlmesh-cluster-agent').at(-1)).toEqual({ name: 'EXAMPLE_NODE_POOL', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
    expect(env(scenario, 'rlmesh-egress-proxy').map((e) => e.name)).not.toContain('TZ');
  });

  it('the chart sets no variable CHART_ENV_NAMES does not list (so extraEnv cannot collide unnoticed)', () => {
    const names = new Set<string>();
    for (const o of [...workloads(plain), ...workloads(render(['--set', 'credentials.controlSecret=a', '--set', 'credentials.pullSecret=b', '--set', 'controlPlane.proxy.url=http://10.0.0.1:3128']))])
      for (const c of [...podTemplate(o).spec.containers, ...(podTemplate(o).spec.initContainers ?? [])]) for (const e of c.env ?? []) names.add(e.name);
    expect([...names].filter((n) => !CHART_ENV_NAMES.includes(n))).toEqual([]);
  });

  it('LOG_LEVEL and LOG_FORMAT of every runtime container follow logging', () => {
    for (const o of workloads(scenario).filter((x) => x.metadata.name !== 'rlmesh-crd-upgrade')) {
      const env = podTemplate(o).spec.containers[0]!.env!;
      expect(env.find((e) => e.name === 'LOG_LEVEL')?.value, o.metadata.name).toBe('debug');
      expect(env.find((e) => e.name === 'LOG_FORMAT')?.value, o.metadata.name).toBe('text');
    }
  });
});

describe('extraVolumes and extraVolumeMounts', () => {
  const volumes = render(['-f', join(CHART, 'ci/extra-volumes-values.yaml')]);
  const deployments: Record<(typeof VOLUME_BLOCKS)[number], string> = {
    agent: 'Deployment/rlmesh-system/rlmesh-cluster-agent',
    controller: 'Deployment/rlmesh-system/rlmesh-cluster-controller',
    egress: 'Deployment/rlmesh-system/rlmesh-egress-proxy',
    gpuFeatureDiscovery: 'DaemonSet/rlmesh-system/rlmesh-gpu-feature-discovery',
  };
  const extra: Record<(typeof VOLUME_BLOCKS)[number], { volume: string; mountPath: string }> = {
    agent: { volume: 'corp-trust', mountPath: '/etc/corp-trust' },
    controller: { volume: 'cloud-token', mountPath: '/var/run/secrets/cloud' },
    egress: { volume: 'scratch', mountPath: '/scratch' },
    gpuFeatureDiscovery: { volume: 'gfd-notes', mountPath: '/etc/gfd-notes' },
  };

  it('each component\'s pod and container get its own, after the chart\'s, and the security context stays as it was', () => {
    const before = render([...token, ...gpuOn]);
    for (const block of VOLUME_BLOCKS) {
      const pod = podTemplate(volumes.get(deployments[block])!).spec;
      const plainPod = podTemplate(before.get(deployments[block])!).spec;
      expect(pod.volumes!.map((v) => v.name), block).toEqual([...plainPod.volumes!.map((v) => v.name), extra[block].volume]);
      expect(pod.containers[0]!.volumeMounts!.at(-1), block).toMatchObject({ name: extra[block].volume, mountPath: extra[block].mountPath });
      expect(pod.containers[0]!.securityContext, block).toEqual(plainPod.containers[0]!.securityContext);
      expect(pod.securityContext, block).toEqual(plainPod.securityContext);
      // another component's volume is not there
      for (const other of VOLUME_BLOCKS.filter((b) => b !== block)) expect(pod.volumes!.map((v) => v.name), block).not.toContain(extra[other].volume);
    }
  });

  it('no pod in rlmesh-runs (the cache filler) nor the hooks takes them; the values of those blocks have no such keys', () => {
    const others = workloads(volumes).filter((x) => !Object.values(deployments).includes(`${x.kind}/${x.metadata.namespace}/${x.metadata.name}`));
    expect(others.map((x) => x.metadata.name).sort()).toEqual(['rlmesh-artifact-cache-filler', 'rlmesh-crd-upgrade']);
    for (const o of others) {
      const spec = podTemplate(o).spec;
      const mounts = [...spec.containers, ...(spec.initContainers ?? [])].flatMap((c) => c.volumeMounts ?? []).map((m) => m.name);
      for (const { volume } of Object.values(extra)) expect([...(spec.volumes ?? []).map((v) => v.name), ...mounts], o.metadata.name).not.toContain(volume);
    }
    expect(valuesObjectSchema.safeParse({ artifactCache: { filler: { extraVolumes: [] } } }).success).toBe(false);
    expect(valuesObjectSchema.safeParse({ crdUpgradeHook: { extraVolumes: [] } }).success).toBe(false);
    expect(valuesObjectSchema.safeParse({ evaluations: { extraVolumes: [] } }).success).toBe(false);
  });

  it('the chart gives its pods no volume CHART_VOLUME_NAMES does not list (so extraVolumes cannot collide unnoticed)', () => {
    const names = new Set<string>();
    const ca = '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----\n';
    const all = render(['-f', valuesFile({ credentials: { controlSecret: 'a', pullSecret: 'b' }, controlPlane: { caBundle: ca, proxy: { url: 'http://10.0.0.1:3128', existingSecret: 'p' } } }), ...gpuOn]);
    const ours = (m: Map<string, K8sObject>) => Object.values(deployments).map((k) => m.get(k)!);
    for (const o of [...ours(plain), ...ours(all)]) for (const v of podTemplate(o).spec.volumes ?? []) names.add(v.name);
    expect([...names].sort()).toEqual([...CHART_VOLUME_NAMES].sort());
  });

  it('_validate-knobs.tpl lists the same blocks, volume names and sources as lib/chart-knobs.ts', () => {
    const tpl = readFileSync(join(CHART, 'templates/_validate-knobs.tpl'), 'utf8');
    const list = (xs: readonly string[]) => `list ${xs.map((x) => `"${x}"`).join(' ')} }}`;
    for (const xs of [VOLUME_BLOCKS, CHART_VOLUME_NAMES, RESTRICTED_VOLUME_SOURCES]) expect(tpl).toContain(list(xs));
  });
});

describe('malformed new knobs: helm\'s schema refuses them at their path, as zod does (lib/chart-knobs.test.ts)', () => {
  for (const [values, at] of [
    [{ agent: { extraVolumeMounts: [{ name: 'x' }] } }, "at '/agent/extraVolumeMounts/0': missing property 'mountPath'"],
    [{ controller: { extraVolumes: [{ name: 'Bad_Name', emptyDir: {} }] } }, "at '/controller/extraVolumes/0/name'"],
    [{ artifactCache: { filler: { extraVolumes: [] } } }, "at '/artifactCache/filler': additional properties 'extraVolumes' not allowed"],
    [{ global: { imagePullSecrets: [{ secret: 'x' }] } }, "at '/global/imagePullSecrets/0'"],
    [{ egress: { hostAliases: [{ ip: 'proxy.corp', hostnames: ['a'] }] } }, "at '/egress/hostAliases/0/ip'"],
    [{ controller: { dnsConfig: { nameserver: ['10.0.0.10'] } } }, "at '/controller/dnsConfig': additional properties 'nameserver' not allowed"],
  ] as const) {
    it(at, () => {
      const r = template(['-f', valuesFile({ joinToken: TOKEN, ...values })], { allowFail: true });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(at);
    });
  }
});

describe('hostAliases and dnsConfig', () => {
  it('the pod of the component that sets them has them, no other pod does', () => {
    const o = render(['-f', join(CHART, 'ci/extra-volumes-values.yaml')]);
    for (const w of workloads(o)) {
      const spec = podTemplate(w).spec as { hostAliases?: unknown; dnsConfig?: unknown; dnsPolicy?: string };
      if (w.metadata.name === 'rlmesh-cluster-agent') {
        expect(spec.hostAliases).toEqual([{ ip: '192.0.2.20', hostnames: ['api.rlmesh.corp.example'] }]);
        expect(spec.dnsConfig).toEqual({ searches: ['corp.example'], options: [{ name: 'ndots', value: '2' }] });
      } else {
        expect(spec.hostAliases, w.metadata.name).toBeUndefined();
        expect(spec.dnsConfig, w.metadata.name).toBeUndefined();
      }
      expect(spec.dnsPolicy, w.metadata.name).toBeUndefined();
    }
  });
});

describe('the helm test hook (rlmesh status in the cluster)', () => {
  const o = render([...token]);
  const pod = o.get('Pod/rlmesh-system/rlmesh-status-test')! as unknown as K8sObject & { spec: PodSpec & { activeDeadlineSeconds: number } };
  it('a test hook pod running the image\'s CLI as rlmesh status in the release namespace, as rlmesh-status-test, with the agent\'s image', () => {
    expect(pod.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'test', 'helm.sh/hook-delete-policy': 'before-hook-creation' });
    expect(pod.spec).toMatchObject({ restartPolicy: 'Never', serviceAccountName: 'rlmesh-status-test', automountServiceAccountToken: true });
    const agent = podTemplate(o.get('Deployment/rlmesh-system/rlmesh-cluster-agent')!).spec.containers[0]!;
    expect(pod.spec.containers.map((c) => [c.image, c.args])).toEqual([[agent.image, ['cli', 'status', '--namespace', 'rlmesh-system']]]);
    expect(pod.spec.containers[0]!.resources).toEqual(agent.resources);
    expect(pod.spec.containers[0]!.securityContext).toEqual(agent.securityContext);
    expect(o.get('ServiceAccount/rlmesh-system/rlmesh-status-test')).toMatchObject({ automountServiceAccountToken: false });
  });
  it('its NetworkPolicy opens the Kubernetes API\'s addresses and ports only: no DNS, nothing in', () => {
    const np = o.get('NetworkPolicy/rlmesh-system/rlmesh-status-test')! as unknown as { spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; egress: unknown[]; ingress?: unknown } };
    expect(np.spec.podSelector.matchLabels).toEqual(Object.fromEntries(Object.entries(pod.metadata.labels!).filter(([k]) => ['app.kubernetes.io/name', 'app.kubernetes.io/instance'].includes(k))));
    expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.spec.ingress).toBeUndefined();
    expect(np.spec.egress).toEqual([{ to: [{ ipBlock: { cidr: '10.96.0.1/32' } }, { ipBlock: { cidr: '192.0.2.10/32' } }], ports: [{ protocol: 'TCP', port: 443 }, { protocol: 'TCP', port: 6443 }] }]);
  });
  it('helmTest.enabled=false renders none of it', () => {
    expect([...render([...token, '--set', 'helmTest.enabled=false']).keys()].filter((k) => k.includes('rlmesh-status-test'))).toEqual([]);
  });
});

describe('global.imagePullSecrets', () => {
  const o = render(['-f', join(CHART, 'ci/extra-volumes-values.yaml')]);
  it('every pod the chart renders pulls with them (names and {name} alike)', () => {
    const w = workloads(o);
    expect(w.length).toBeGreaterThanOrEqual(6);
    for (const x of w) expect(podTemplate(x).spec.imagePullSecrets!.map((s) => s.name), x.metadata.name).toEqual(expect.arrayContaining(['corp-mirror-pull', 'corp-mirror-pull-fallback']));
  });
  it('the controller never learns them, so no pod it starts (evaluation, NetworkPolicy probe) gets them', () => {
    const config = (o.get('ConfigMap/rlmesh-system/rlmesh-runtime-config')! as unknown as { data: Record<string, string> }).data['config.json']!;
    expect(config).not.toContain('corp-mirror-pull');
    expect(JSON.parse(config).pods.imagePullSecrets).toEqual([]);
  });
});

describe('podSecurity.arbitraryUid (OpenShift)', () => {
  it('by default every pod runs as 65532:65532 with fsGroup 65532', () => {
    for (const o of workloads(plain)) expect(podTemplate(o).spec.securityContext, o.metadata.name).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532 });
  });

  it('with it no pod or container sets a user, group or fsGroup, and the controller\'s config says so', () => {
    const o = render([...gpuOn, '-f', join(CHART, 'ci/openshift-values.yaml')]);
    for (const w of workloads(o)) {
      const spec = podTemplate(w).spec;
      for (const sc of [spec.securityContext ?? {}, ...spec.containers.map((c) => c.securityContext ?? {})]) {
        expect(Object.keys(sc).filter((k) => ['runAsUser', 'runAsGroup', 'fsGroup'].includes(k)), w.metadata.name).toEqual([]);
      }
      expect(spec.securityContext?.runAsNonRoot, w.metadata.name).toBe(true);
    }
    const config = JSON.parse((o.get('ConfigMap/rlmesh-system/rlmesh-runtime-config')! as unknown as { data: Record<string, string> }).data['config.json']!) as { pods: { arbitraryUid: boolean } };
    expect(config.pods.arbitraryUid).toBe(true);
  });
});

describe('refusals: helm and knobErrors() say the same, naming the path', () => {
  const cases: { name: string; values: Record<string, unknown>; path: string }[] = [
    ...CHART_LABEL_KEYS.map((k) => ({ name: `commonLabels ${k}`, values: { commonLabels: { [k]: 'x' } }, path: `commonLabels.${k}` })),
    { name: 'podLabels rlmesh.dev/metrics', values: { podLabels: { 'rlmesh.dev/metrics': 'false' } }, path: 'podLabels.rlmesh.dev/metrics' },
    { name: 'podLabels key that is not a key', values: { podLabels: { 'a b': 'x' } }, path: 'podLabels.a b' },
    { name: 'podAnnotations checksum/runtime-config', values: { podAnnotations: { 'checksum/runtime-config': 'x' } }, path: 'podAnnotations.checksum/runtime-config' },
    ...CHART_ENV_NAMES.map((n) => ({ name: `agent.extraEnv ${n}`, values: { agent: { extraEnv: [{ name: n, value: 'x' }] } }, path: 'agent.extraEnv.0' })),
    ...POD_BLOCKS.map((b) => ({ name: `${b}.extraEnv LOG_LEVEL`, values: b.split('.').reduceRight<Record<string, unknown>>((inner, k) => ({ [k]: inner }), { extraEnv: [{ name: 'OK', value: '1' }, { name: 'LOG_LEVEL', value: 'x' }] }), path: `${b}.extraEnv.1` })),
    { name: 'extraEnv with value and valueFrom', values: { egress: { extraEnv: [{ name: 'X', value: '1', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] } }, path: 'egress.extraEnv.0' },
    ...POD_BLOCKS.map((b) => ({ name: `${b}.serviceAccount.annotations key that is not a key`, values: b.split('.').reduceRight<Record<string, unknown>>((inner, k) => ({ [k]: inner }), { serviceAccount: { annotations: { 'bad key': 'x' } } }), path: `${b}.serviceAccount.annotations.bad key` })),
    ...VOLUME_BLOCKS.map((b) => ({ name: `${b}.extraVolumes hostPath`, values: { [b]: { extraVolumes: [{ name: 'node', hostPath: { path: '/var/lib/kubelet' } }] } }, path: `${b}.extraVolumes.0` })),
    { name: 'extraVolumes of a type restricted refuses', values: { controller: { extraVolumes: [{ name: 'share', nfs: { server: 'nfs.example.com', path: '/x' } }] } }, path: 'controller.extraVolumes.0' },
    ...CHART_VOLUME_NAMES.map((n) => ({ name: `agent.extraVolumes named ${n}`, values: { agent: { extraVolumes: [{ name: n, emptyDir: {} }] } }, path: 'agent.extraVolumes.0' })),
    { name: 'extraVolumes twice', values: { egress: { extraVolumes: [{ name: 'a', emptyDir: {} }, { name: 'a', configMap: { name: 'x' } }] } }, path: 'egress.extraVolumes.1' },
    { name: 'extraVolumeMounts of no extra volume', values: { agent: { extraVolumes: [{ name: 'a', emptyDir: {} }], extraVolumeMounts: [{ name: 'config', mountPath: '/x' }] } }, path: 'agent.extraVolumeMounts.0' },
    { name: 'dnsConfig nameserver outside ipBlock-only dnsPeers', values: { network: { dnsPeers: [{ ipBlock: { cidr: '169.254.20.10/32' } }] }, agent: { dnsConfig: { nameservers: ['169.254.20.10', '8.8.8.8'] } } }, path: 'agent.dnsConfig.nameservers.1' },
    { name: 'dnsConfig nameserver in an ipBlock\'s except', values: { network: { dnsPeers: [{ ipBlock: { cidr: '10.96.0.0/16', except: ['10.96.5.0/24'] } }] }, egress: { dnsConfig: { nameservers: ['10.96.255.255', '10.96.5.3'] } } }, path: 'egress.dnsConfig.nameservers.1' },
    { name: 'dnsConfig nameserver just outside an ipBlock', values: { network: { dnsPeers: [{ ipBlock: { cidr: '10.0.0.8/29' } }] }, gpuFeatureDiscovery: { dnsConfig: { nameservers: ['10.0.0.15', '10.0.0.16'] } } }, path: 'gpuFeatureDiscovery.dnsConfig.nameservers.1' },
    { name: 'serviceAccount.annotations key with an uppercase prefix', values: { agent: { serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': 'ok', 'IAM.gke.io/gcp-service-account': 'x' } } } }, path: 'agent.serviceAccount.annotations.IAM.gke.io/gcp-service-account' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const values = { joinToken: TOKEN, ...c.values };
      const expected = crossFieldErrors(valuesObjectSchema.parse(values));
      expect(expected.map((e) => e.path)).toEqual([c.path]);
      const r = template(['-f', valuesFile(values)], { allowFail: true });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(`- ${expected[0]!.path}: ${expected[0]!.message}`);
    });
  }
});
