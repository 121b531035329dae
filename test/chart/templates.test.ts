// Template assertions: every object the chart renders, rendered by the real helm.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runtimeConfigSchema } from '../../lib/runtime-config.ts';
import { imageBlocks, imageErrors, imageReference } from '../../lib/chart-values.ts';
import { AGENT_NODE_OPTIONS, CHART_APP_VERSION, crossFieldErrors, defaultValues, GPU_NODE_TERMS, imageRelocation, KUBECTL_IMAGE, RUNTIME_IMAGE, renderRuntimeConfig, valuesObjectSchema, valuesSchema } from '../../lib/values-schema.ts';
import ipaddr from 'ipaddr.js';
import { IPV4_ROWS, IPV6_GLOBAL_UNICAST, IPV6_ROWS } from '../../lib/special-purpose-registry.ts';
import { CHART, get, podTemplate, render, scenarios, template, TOKEN, valuesFile, type K8sObject, type NodeSelectorTerm } from './chart.ts';
import { ARTIFACT_SOURCES_SECRETS, MOUNTS } from '../../lib/fixed-names.ts';

const SYS = 'rlmesh-system';
const RUNS = 'rlmesh-runs';
const token = ['--set', `joinToken=${TOKEN}`];
const objs = render(token);

const workloads = (o: Map<string, K8sObject>) => [...o.values()].filter((x) => ['Deployment', 'DaemonSet', 'Job'].includes(x.kind));

describe('values', () => {
  it('values.yaml holds exactly the zod schema defaults', () => {
    expect(parse(readFileSync(join(CHART, 'values.yaml'), 'utf8'))).toEqual(defaultValues());
  });

  it('accepts the global values an umbrella chart passes down', () => {
    expect(template([...token, '--set', 'global.imageRegistry=mirror.example.com']).stdout).toContain('kind: Deployment');
  });

  it('every scenario passes the zod schema too', () => {
    for (const s of scenarios()) {
      const v = { ...(parse(readFileSync(join(CHART, 'ci', s), 'utf8')) as object) };
      const r = valuesSchema.safeParse(v);
      expect(r.success, `${s}: ${JSON.stringify(r.error?.issues)}`).toBe(true);
    }
  });
});

describe('objects', () => {
  it('namespace rlmesh-runs: restricted PodSecurity, kept on uninstall', () => {
    const ns = get(objs, 'Namespace', '', RUNS);
    expect(ns.metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
      'pod-security.kubernetes.io/warn': 'restricted',
      'app.kubernetes.io/managed-by': 'Helm',
    });
    expect(ns.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
  });

  it('ServiceAccounts mount a token only where the component calls the apiserver', () => {
    expect(get(objs, 'ServiceAccount', SYS, 'rlmesh-cluster-agent').automountServiceAccountToken).toBe(true);
    expect(get(objs, 'ServiceAccount', SYS, 'rlmesh-cluster-controller').automountServiceAccountToken).toBe(true);
    expect(get(objs, 'ServiceAccount', SYS, 'rlmesh-egress-proxy').automountServiceAccountToken).toBe(false);
    expect(podTemplate(get(objs, 'Deployment', SYS, 'rlmesh-egress-proxy')).spec.automountServiceAccountToken).toBe(false);
  });

  it('the agent: 1 replica, Recreate, spool PVC, token env, config volume, probes', () => {
    const d = get(objs, 'Deployment', SYS, 'rlmesh-cluster-agent');
    const spec = d.spec as { replicas: number; strategy: { type: string } };
    expect(spec.replicas).toBe(1);
    expect(spec.strategy.type).toBe('Recreate');
    const pod = podTemplate(d).spec;
    expect(pod.serviceAccountName).toBe('rlmesh-cluster-agent');
    const c = pod.containers[0]!;
    expect(c.args).toEqual(['agent', '--spool-dir=/var/lib/rlmesh/spool']);
    expect(c.env?.find((e) => e.name === 'RLMESH_JOIN_TOKEN')?.valueFrom?.secretKeyRef).toEqual({ name: 'rlmesh-join-token', key: 'token' });
    expect(c.env?.find((e) => e.name === 'NODE_OPTIONS')?.value).toBe(AGENT_NODE_OPTIONS);
    const plain = podTemplate(get(render(['--set', `joinToken=${TOKEN}`, '--set', 'agent.nodeOptions=']), 'Deployment', SYS, 'rlmesh-cluster-agent')).spec.containers[0]!;
    expect(plain.env?.map((e) => e.name)).not.toContain('NODE_OPTIONS');
    expect(c.volumeMounts).toEqual(expect.arrayContaining([{ name: 'config', mountPath: '/etc/rlmesh/config', readOnly: true }]));
    expect(c.volumeMounts?.find((m) => m.name === 'spool')?.mountPath).toBe('/var/lib/rlmesh/spool');
    expect(pod.volumes?.find((v) => v.name === 'spool')?.persistentVolumeClaim?.claimName).toBe('rlmesh-agent-spool');
    expect(c.livenessProbe?.httpGet?.path).toBe('/healthz');
    expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
    const pvc = get(objs, 'PersistentVolumeClaim', SYS, 'rlmesh-agent-spool');
    expect(pvc.spec).toMatchObject({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Gi' } } });
    expect(pvc.metadata.annotations?.['helm.sh/resource-policy']).toBeUndefined();
  });

  it('controller.maxConcurrent becomes the controller\'s --max-concurrent; unset, no limit is passed', () => {
    const args = (values: string[]) => podTemplate(get(render(['--set', `joinToken=${TOKEN}`, ...values]), 'Deployment', SYS, 'rlmesh-cluster-controller')).spec.containers[0]!.args;
    expect(args([])).toEqual(['controller']);
    expect(args(['--set', 'controller.maxConcurrent=3'])).toEqual(['controller', '--max-concurrent=3']);
  });

  it('every pod pulls with the cluster pull Secret (rlmesh-registry-pull, or credentials.pullSecret)', () => {
    for (const o of workloads(objs)) expect(podTemplate(o).spec.imagePullSecrets, o.metadata.name).toContainEqual({ name: 'rlmesh-registry-pull' });
    const gitops = render(['-f', join(CHART, 'ci/gitops-secrets-values.yaml')]);
    for (const o of workloads(gitops)) expect(podTemplate(o).spec.imagePullSecrets, o.metadata.name).toContainEqual({ name: 'rlmesh-registry-pull' });
    const own = render(['--set', 'credentials.controlSecret=a', '--set', 'credentials.pullSecret=my-pull']);
    for (const o of workloads(own)) expect(podTemplate(o).spec.imagePullSecrets, o.metadata.name).toContainEqual({ name: 'my-pull' });
  });

  it('with joinToken, the token is a pull Secret in both namespaces, listed last by every pod that may start before the join, and by no other', () => {
    for (const ns of [SYS, RUNS]) {
      const s = get(objs, 'Secret', ns, 'rlmesh-registry-join') as K8sObject & { type: string; data: Record<string, string> };
      expect(s.type).toBe('kubernetes.io/dockerconfigjson');
      const auths = (JSON.parse(Buffer.from(s.data['.dockerconfigjson']!, 'base64').toString()) as { auths: Record<string, { username: string; password: string }> }).auths;
      expect(Object.keys(auths)).toEqual(['registry.rlmesh.dev']);
      expect(auths['registry.rlmesh.dev']!.password).toBe(TOKEN);
    }
    for (const o of workloads(objs)) {
      const last = podTemplate(o).spec.imagePullSecrets?.at(-1);
      // the upgrade hook runs after the join: the token is spent by then
      if (o.kind === 'Job') expect(last, o.metadata.name).toEqual({ name: 'rlmesh-registry-pull' });
      else expect(last, o.metadata.name).toEqual({ name: 'rlmesh-registry-join' });
    }
    const gitops = render(['-f', join(CHART, 'ci/gitops-secrets-values.yaml')]);
    expect([...gitops.values()].filter((o) => o.kind === 'Secret' && o.metadata.name === 'rlmesh-registry-join')).toEqual([]);
    for (const o of workloads(gitops)) expect(podTemplate(o).spec.imagePullSecrets, o.metadata.name).not.toContainEqual({ name: 'rlmesh-registry-join' });
  });

  it('rlmesh-runs gets default requests and limits (LimitRange) and a ResourceQuota from evaluations.*', () => {
    const lr = get(objs, 'LimitRange', RUNS, 'rlmesh-runs-defaults') as K8sObject & { spec: { limits: object[] } };
    expect(lr.spec.limits).toEqual([
      {
        type: 'Container',
        defaultRequest: { cpu: '500m', memory: '1Gi', 'ephemeral-storage': '1Gi' },
        default: { cpu: '4', memory: '8Gi', 'ephemeral-storage': '20Gi' },
        max: { cpu: '32', memory: '256Gi', 'ephemeral-storage': '200Gi' },
      },
    ]);
    const quota = { pods: '1000', 'requests.cpu': '256', 'requests.memory': '1Ti', 'limits.memory': '1Ti', 'requests.nvidia.com/gpu': '16', 'requests.amd.com/gpu': '16' };
    expect((get(objs, 'ResourceQuota', RUNS, 'rlmesh-runs') as K8sObject & { spec: object }).spec).toEqual({ hard: quota });
    const custom = render([...token, '--set-json', 'evaluations.resourceQuota.hard={"requests.nvidia.com/gpu":"64","limits.memory":"2Ti","requests.ephemeral-storage":"10Ti"}']);
    // entries replace the defaults of their name, the others stay (helm merges maps)
    expect((get(custom, 'ResourceQuota', RUNS, 'rlmesh-runs') as K8sObject & { spec: object }).spec).toEqual({ hard: { ...quota, 'requests.nvidia.com/gpu': '64', 'limits.memory': '2Ti', 'requests.ephemeral-storage': '10Ti' } });
    // a default limit above the max is refused at its path
    const above = template([...token, '--set-string', 'evaluations.limitRange.max.cpu=2'], { allowFail: true });
    expect(above.status).not.toBe(0);
    expect(above.stderr).toContain('evaluations.limitRange.default.cpu 4 is above evaluations.limitRange.max.cpu 2');
    // disabled, the kept quota holds nothing (Helm would not delete it once it stopped being rendered)
    const none = render([...token, '--set', 'evaluations.resourceQuota.enabled=false']);
    expect((get(none, 'ResourceQuota', RUNS, 'rlmesh-runs') as K8sObject & { spec: object }).spec).toEqual({ hard: {} });
  });

  it('the fences of rlmesh-runs are kept on uninstall, as the namespace is: its policies, LimitRange and ResourceQuota', () => {
    const inRuns = [...objs.values()].filter((o) => o.metadata.namespace === RUNS && ['NetworkPolicy', 'LimitRange', 'ResourceQuota'].includes(o.kind));
    const kept = inRuns.filter((o) => o.metadata.annotations?.['helm.sh/resource-policy'] === 'keep').map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(kept).toEqual(['LimitRange/rlmesh-runs-defaults', 'NetworkPolicy/rlmesh-runs-default-deny', 'NetworkPolicy/rlmesh-runs-egress', 'ResourceQuota/rlmesh-runs']);
    // the filler's own policy goes with the filler, which the uninstall removes
    expect(inRuns.filter((o) => !kept.includes(`${o.kind}/${o.metadata.name}`)).map((o) => o.metadata.name)).toEqual(['rlmesh-artifact-cache-filler']);
  });

  it('the join-token Secret exists only with joinToken; GitOps has none and no token env', () => {
    const s = get(objs, 'Secret', SYS, 'rlmesh-join-token') as K8sObject & { data: { token: string } };
    expect(Buffer.from(s.data.token, 'base64').toString()).toBe(TOKEN);
    const gitops = render(['-f', join(CHART, 'ci/gitops-secrets-values.yaml')]);
    expect([...gitops.keys()].filter((k) => k.startsWith('Secret/'))).toEqual([]);
    const env = podTemplate(get(gitops, 'Deployment', SYS, 'rlmesh-cluster-agent')).spec.containers[0]!.env ?? [];
    expect(env.map((e) => e.name)).not.toContain('RLMESH_JOIN_TOKEN');
    // the token never appears in the rendered output except in its Secret (base64)
    expect(template(token).stdout).not.toContain(TOKEN);
  });

  it('the controller: 2 replicas, PodDisruptionBudget, its own ServiceAccount, entrypoint controller', () => {
    const d = get(objs, 'Deployment', SYS, 'rlmesh-cluster-controller');
    expect((d.spec as { replicas: number }).replicas).toBe(2);
    expect(get(objs, 'PodDisruptionBudget', SYS, 'rlmesh-cluster-controller').spec).toMatchObject({ minAvailable: 1 });
    expect(podTemplate(d).spec.serviceAccountName).toBe('rlmesh-cluster-controller');
    expect(podTemplate(d).spec.containers[0]!.args).toEqual(['controller']);
  });

  it('the cache filler: the controller in its cache-filler role in rlmesh-runs, mounting the cache PVC and the artifact-sources Secrets as a projected volume', () => {
    const d = get(objs, 'Deployment', RUNS, 'rlmesh-artifact-cache-filler');
    expect((d.spec as { replicas: number; strategy: { type: string } }).strategy.type).toBe('Recreate');
    const pod = podTemplate(d).spec;
    expect(pod.serviceAccountName).toBe('rlmesh-artifact-cache-filler');
    expect(pod.containers[0]!.args).toEqual(['controller', '--role=cache-filler', '--cache-dir=/var/lib/rlmesh/cache', `--sources-dir=${MOUNTS.artifactSourcesDir}`]);
    // the kubelet reads the credentials for it: each of the agent's Secrets, optional until the agent first writes it
    expect(pod.volumes?.find((v) => v.name === 'artifact-sources')).toEqual({
      name: 'artifact-sources',
      projected: { defaultMode: 0o440, sources: ARTIFACT_SOURCES_SECRETS.map((name) => ({ secret: { name, optional: true } })) },
    });
    expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: 'artifact-sources', mountPath: MOUNTS.artifactSourcesDir, readOnly: true });
    const role = get(objs, 'Role', RUNS, 'rlmesh-artifact-cache-filler') as K8sObject & { rules: { resources: string[] }[] };
    expect(role.rules.flatMap((r) => r.resources)).not.toContain('secrets');
    expect(pod.volumes?.find((v) => v.name === 'cache')?.persistentVolumeClaim?.claimName).toBe('rlmesh-artifact-cache');
    expect(pod.volumes?.find((v) => v.name === 'config')?.configMap?.name).toBe('rlmesh-runtime-config');
    const copy = get(objs, 'ConfigMap', RUNS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> };
    expect(copy.data).toEqual((get(objs, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data);
    expect(get(objs, 'ServiceAccount', RUNS, 'rlmesh-artifact-cache-filler').automountServiceAccountToken).toBe(true);
    get(objs, 'NetworkPolicy', RUNS, 'rlmesh-artifact-cache-filler');
  });

  it('the egress proxy: 2 replicas, Service on 3128, PodDisruptionBudget', () => {
    const d = get(objs, 'Deployment', SYS, 'rlmesh-egress-proxy');
    expect((d.spec as { replicas: number }).replicas).toBe(2);
    expect(podTemplate(d).spec.containers[0]!.args).toEqual(['egress']);
    const svc = get(objs, 'Service', SYS, 'rlmesh-egress-proxy') as K8sObject & { spec: { ports: { port: number }[]; selector: object } };
    expect(svc.spec.ports[0]!.port).toBe(3128);
    expect(svc.spec.selector).toEqual((d.spec as { selector: { matchLabels: object } }).selector.matchLabels);
    const pdb = get(objs, 'PodDisruptionBudget', SYS, 'rlmesh-egress-proxy');
    expect(pdb.spec).toMatchObject({ minAvailable: 1 });
  });

  it('ConfigMap rlmesh-runtime-config is valid runtime config and equals renderRuntimeConfig() in every scenario', () => {
    for (const s of [undefined, ...scenarios()]) {
      const args = s ? ['-f', join(CHART, 'ci', s)] : token;
      const cm = get(render(args), 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> };
      const rendered = JSON.parse(cm.data['config.json']!);
      expect(runtimeConfigSchema.parse(rendered)).toEqual(rendered);
      const values = valuesSchema.parse(s ? parse(readFileSync(join(CHART, 'ci', s), 'utf8')) : { joinToken: TOKEN });
      expect(rendered, s).toEqual(renderRuntimeConfig(values));
    }
  });

  it('egress.extraDomains are added to the built-in hosts, never replacing them', () => {
    const cm = get(render(['-f', join(CHART, 'ci/extra-domains-scheduling-values.yaml')]), 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & {
      data: Record<string, string>;
    };
    expect(JSON.parse(cm.data['config.json']!).egress.allowedDomains).toEqual([
      'api.rlmesh.dev',
      'registry.rlmesh.dev',
      'my-inputs.s3.eu-west-1.amazonaws.com',
      '*.huggingface.co',
    ]);
  });

  it('artifact cache PVC in rlmesh-runs (kept) and the default RLMeshCache', () => {
    const pvc = get(objs, 'PersistentVolumeClaim', RUNS, 'rlmesh-artifact-cache');
    expect(pvc.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
    expect(pvc.spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '100Gi' } } });
    const rwx = render(['-f', join(CHART, 'ci/rwx-multinode-values.yaml')]);
    expect(get(rwx, 'PersistentVolumeClaim', RUNS, 'rlmesh-artifact-cache').spec).toEqual({
      accessModes: ['ReadWriteMany'],
      storageClassName: 'nfs-rwx',
      resources: { requests: { storage: '500Gi' } },
    });
    // agent.spool.storageClassName unset: the spool follows storage.className, as installs made before the value existed have it
    expect(get(rwx, 'PersistentVolumeClaim', SYS, 'rlmesh-agent-spool').spec).toEqual({ accessModes: ['ReadWriteOnce'], storageClassName: 'nfs-rwx', resources: { requests: { storage: '20Gi' } } });
    expect(get(objs, 'PersistentVolumeClaim', SYS, 'rlmesh-agent-spool').spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Gi' } } });
    const split = render(['-f', join(CHART, 'ci/rwx-cache-block-spool-values.yaml')]);
    expect(get(split, 'PersistentVolumeClaim', RUNS, 'rlmesh-artifact-cache').spec).toMatchObject({ accessModes: ['ReadWriteMany'], storageClassName: 'nfs-rwx' });
    expect(get(split, 'PersistentVolumeClaim', SYS, 'rlmesh-agent-spool').spec).toEqual({ accessModes: ['ReadWriteOnce'], storageClassName: 'gp3', resources: { requests: { storage: '10Gi' } } });
    // its own class without storage.className: the cache on the default class, the spool on its own
    const own = render([...token, '--set', 'agent.spool.storageClassName=premium-rwo']);
    expect(get(own, 'PersistentVolumeClaim', SYS, 'rlmesh-agent-spool').spec).toMatchObject({ storageClassName: 'premium-rwo' });
    expect(get(own, 'PersistentVolumeClaim', RUNS, 'rlmesh-artifact-cache').spec).not.toHaveProperty('storageClassName');
    const cache = get(objs, 'RLMeshCache', '', 'default');
    expect(cache.apiVersion).toBe('rlmesh.dev/v1alpha1');
    expect(cache.spec).toEqual({ pvcName: 'rlmesh-artifact-cache', namespace: RUNS, accessModes: ['ReadWriteOnce'] });
  });

  it('RBAC objects: Roles in both namespaces, ClusterRoles, bindings to the right ServiceAccounts', () => {
    for (const [kind, ns, name] of [
      ['Role', SYS, 'rlmesh-cluster-agent'],
      ['Role', RUNS, 'rlmesh-cluster-agent'],
      ['Role', SYS, 'rlmesh-cluster-controller'],
      ['Role', RUNS, 'rlmesh-cluster-controller'],
      ['ClusterRole', '', 'rlmesh-cluster-agent'],
      ['ClusterRole', '', 'rlmesh-cluster-controller'],
      ['Role', RUNS, 'rlmesh-artifact-cache-filler'],
      ['ClusterRole', '', 'rlmesh-artifact-cache-filler'],
    ] as const) {
      get(objs, kind, ns, name);
      const binding = get(objs, `${kind}Binding`, ns, name) as K8sObject & { subjects: { name: string; namespace: string }[]; roleRef: { name: string } };
      expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name, namespace: name === 'rlmesh-artifact-cache-filler' ? RUNS : SYS }]);
      expect(binding.roleRef.name).toBe(name);
    }
    const agentRole = get(objs, 'Role', SYS, 'rlmesh-cluster-agent') as K8sObject & { rules: { resources: string[]; resourceNames?: string[]; verbs: string[] }[] };
    const named = agentRole.rules.find((r) => r.resources.includes('secrets') && r.resourceNames);
    expect(named?.resourceNames).toEqual(['rlmesh-cluster-control', 'rlmesh-registry-pull', 'rlmesh-registry-join-crd-upgrade']);
    // no rule anywhere grants exec, wildcards or Secrets to the controller
    for (const o of objs.values()) {
      if (!['Role', 'ClusterRole'].includes(o.kind)) continue;
      for (const r of (o as K8sObject & { rules: { resources: string[]; verbs: string[] }[] }).rules) {
        expect(r.verbs).not.toContain('*');
        expect(r.resources).not.toContain('*');
        expect(r.resources).not.toContain('pods/exec');
        if (o.metadata.name === 'rlmesh-cluster-controller') expect(r.resources).not.toContain('secrets');
      }
    }
    const obs = render(['-f', join(CHART, 'ci/observability-values.yaml')]);
    const obsRole = get(obs, 'Role', SYS, 'rlmesh-cluster-agent') as K8sObject & { rules: { resourceNames?: string[] }[] };
    expect(obsRole.rules.flatMap((r) => r.resourceNames ?? [])).toContain('rlmesh-cluster-relay-secret');
  });

  it("rlmesh status's least-privilege roles: read-only, no Secret; bound to the helm test hook's ServiceAccount and statusRole.subjects", () => {
    type Rules = K8sObject & { rules: { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }[] };
    const roles = [get(objs, 'Role', SYS, 'rlmesh-status'), get(objs, 'Role', RUNS, 'rlmesh-status'), get(objs, 'ClusterRole', '', 'rlmesh-status'), get(objs, 'Role', 'default', 'rlmesh-status')] as Rules[];
    for (const r of roles.flatMap((o) => o.rules)) {
      expect(r.resources).not.toContain('secrets');
      expect(r.verbs.every((v) => v === 'get' || v === 'list'), JSON.stringify(r)).toBe(true);
    }
    expect(roles[2]!.rules).toEqual([{ apiGroups: ['rlmesh.dev'], resources: ['rlmeshcaches'], verbs: ['list'] }]);
    // the API's addresses, against those the controller's NetworkPolicy opens (the api-server-addresses check)
    expect(roles[3]!.rules).toEqual([
      { apiGroups: [''], resources: ['services'], resourceNames: ['kubernetes'], verbs: ['get'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list'] },
    ]);
    expect(roles[0]!.rules).toContainEqual({ apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], resourceNames: ['rlmesh-cluster-controller'], verbs: ['get'] });
    const hook = { kind: 'ServiceAccount', name: 'rlmesh-status-test', namespace: SYS };
    for (const k of [...objs.keys()].filter((k) => k.includes('Binding/') && k.endsWith('/rlmesh-status'))) expect((objs.get(k) as K8sObject & { subjects: unknown[] }).subjects, k).toEqual([hook]);
    const noTest = render([...token, '--set', 'helmTest.enabled=false']);
    expect([...noTest.keys()].filter((k) => (k.includes('Binding/') && k.endsWith('/rlmesh-status')) || k.endsWith('/rlmesh-status-test'))).toEqual([]);
    const bound = render([...token, '--set-json', 'statusRole.subjects=[{"kind":"ServiceAccount","name":"sre","namespace":"ops"},{"kind":"Group","name":"sre-team"}]']);
    const subjects = [hook, { kind: 'ServiceAccount', name: 'sre', namespace: 'ops' }, { kind: 'Group', name: 'sre-team', apiGroup: 'rbac.authorization.k8s.io' }];
    for (const [kind, ns] of [['RoleBinding', SYS], ['RoleBinding', RUNS], ['RoleBinding', 'default'], ['ClusterRoleBinding', '']] as const) {
      const b = get(bound, kind, ns, 'rlmesh-status') as K8sObject & { subjects: unknown[]; roleRef: { kind: string; name: string } };
      expect(b.subjects).toEqual(subjects);
      expect(b.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: kind === 'RoleBinding' ? 'Role' : 'ClusterRole', name: 'rlmesh-status' });
    }
  });

  it('NetworkPolicies: default-deny in both namespaces, runs → proxy only (no DNS), filler → DNS + API, proxy → DNS + public only, agent/controller → DNS + API, GPU discovery/hook → DNS + Kubernetes API', () => {
    const deny = get(objs, 'NetworkPolicy', RUNS, 'rlmesh-runs-default-deny');
    expect(deny.spec).toEqual({ podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    expect(get(objs, 'NetworkPolicy', SYS, 'rlmesh-default-deny').spec).toEqual({ podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    type NP = { spec: { egress: { to?: Record<string, unknown>[]; ports: { protocol: string; port: number }[] }[] } };
    const runs = get(objs, 'NetworkPolicy', RUNS, 'rlmesh-runs-egress') as K8sObject & NP;
    // the proxy only: no DNS for evaluation pods
    expect(runs.spec.egress).toHaveLength(1);
    expect(runs.spec.egress[0]).toEqual({
      to: [
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': SYS } },
          podSelector: { matchLabels: { 'app.kubernetes.io/name': 'rlmesh-egress-proxy', 'app.kubernetes.io/instance': 'rlmesh' } },
        },
      ],
      ports: [{ protocol: 'TCP', port: 3128 }],
    });
    // every other pod's DNS rule: the default peers (CoreDNS) on 53
    const dnsRule = {
      to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
      ports: [
        { protocol: 'UDP', port: 53 },
        { protocol: 'TCP', port: 53 },
      ],
    };
    expect((get(objs, 'NetworkPolicy', RUNS, 'rlmesh-artifact-cache-filler') as K8sObject & NP).spec.egress[0]).toEqual(dnsRule);
    const proxy = get(objs, 'NetworkPolicy', SYS, 'rlmesh-egress-proxy') as K8sObject & NP;
    const publicRule = proxy.spec.egress[1]!;
    // against the rows the proxy refuses (lib/special-purpose-registry.ts): every row inside an ipBlock
    // is excepted by a block that covers it, and every except block is such a row
    const blocks = publicRule.to as { ipBlock: { cidr: string; except: string[] } }[];
    expect(blocks.map((b) => b.ipBlock.cidr)).toEqual(['0.0.0.0/0', IPV6_GLOBAL_UNICAST]); // fc00::/7, fe80::/10, ::1, ff00::/8, 64:ff9b::/96 lie outside 2000::/3
    const inside = (cidr: string, outer: string) => {
      const [n, bits] = ipaddr.parseCIDR(cidr);
      const [o, obits] = ipaddr.parseCIDR(outer);
      return n.kind() === o.kind() && bits >= obits && n.match(o, obits);
    };
    for (const [block, rows] of [[blocks[0]!, IPV4_ROWS], [blocks[1]!, IPV6_ROWS]] as const) {
      const cidrs = rows.map((r) => r.cidr);
      for (const c of cidrs.filter((c) => inside(c, block.ipBlock.cidr)))
        expect(block.ipBlock.except.some((e) => inside(c, e)), `registry row ${c} is not excepted from ${block.ipBlock.cidr}`).toBe(true);
      for (const e of block.ipBlock.except) expect(cidrs, `except ${e} is no registry row`).toContain(e);
    }
    for (const r of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '127.0.0.0/8', '169.254.0.0/16', '100.64.0.0/10']) expect(blocks[0]!.ipBlock.except).toContain(r);
    for (const r of ['2001:db8::/32', '2002::/16', '2001::/23']) expect(blocks[1]!.ipBlock.except).toContain(r);
    expect(publicRule.ports).toEqual([{ protocol: 'TCP', port: 443 }]);
    // the Kubernetes API: its ports at its addresses only (network.apiServerAddresses, or read at install; these
    // renders are given OFFLINE_API_SERVER); the agent alone adds TCP 443 for the control plane, to the public
    // blocks (the proxy's), the filler none
    const apiRule = (ports: readonly number[], to: string[]) => ({ to: to.map((cidr) => ({ ipBlock: { cidr } })), ports: ports.map((port) => ({ protocol: 'TCP', port })) });
    const controlPlaneRule = { to: publicRule.to, ports: [{ protocol: 'TCP', port: 443 }] };
    const offline = ['10.96.0.1/32', '192.0.2.10/32'];
    const apiOnly = render([...token, '--set', 'network.apiServerPorts={6443}']);
    const pinned = render([...token, '--set', 'network.apiServerAddresses={172.18.0.2/32,fd00::1/128}']);
    for (const [o, ports, to] of [
      [objs, [443, 6443], offline],
      [apiOnly, [6443], offline],
      [pinned, [443, 6443], ['172.18.0.2/32', 'fd00::1/128']],
    ] as const) {
      const api = apiRule(ports, [...to]);
      expect((get(o, 'NetworkPolicy', SYS, 'rlmesh-cluster-agent') as K8sObject & NP).spec.egress).toEqual([dnsRule, api, controlPlaneRule]);
      expect((get(o, 'NetworkPolicy', SYS, 'rlmesh-cluster-controller') as K8sObject & NP).spec.egress).toEqual([dnsRule, api]);
      // the filler fetches what the platform names: through the proxy (rlmesh-runs-egress), besides DNS and the API
      expect((get(o, 'NetworkPolicy', RUNS, 'rlmesh-artifact-cache-filler') as K8sObject & NP).spec.egress).toEqual([dnsRule, api]);
      // GPU discovery and the CRD hook: nothing in; DNS and the Kubernetes API only out
      for (const c of ['rlmesh-gpu-feature-discovery', 'rlmesh-crd-upgrade']) {
        const np = get(o, 'NetworkPolicy', SYS, c) as K8sObject & NP & { spec: { podSelector: unknown; policyTypes: string[]; ingress?: unknown } };
        expect(np.spec.podSelector).toEqual({ matchLabels: { 'app.kubernetes.io/name': c, 'app.kubernetes.io/instance': 'rlmesh' } });
        expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
        expect(np.spec.ingress).toBeUndefined();
        expect(np.spec.egress).toEqual([dnsRule, api]);
      }
    }
    // GKE NodeLocal DNS and OpenShift peers/ports reach every DNS rule
    const gke = get(render(['-f', join(CHART, 'ci/gke-nodelocal-dns-values.yaml')]), 'NetworkPolicy', RUNS, 'rlmesh-artifact-cache-filler') as K8sObject & NP;
    expect(gke.spec.egress[0]!.to).toEqual([{ ipBlock: { cidr: '169.254.20.10/32' } }]);
    const os = render(['-f', join(CHART, 'ci/openshift-dns-values.yaml')]);
    for (const [ns, name] of [
      [RUNS, 'rlmesh-artifact-cache-filler'],
      [SYS, 'rlmesh-egress-proxy'],
      [SYS, 'rlmesh-cluster-agent'],
    ]) {
      const np = get(os, 'NetworkPolicy', ns!, name!) as K8sObject & NP;
      const dns = np.spec.egress.find((r) => r.ports.some((p) => p.protocol === 'UDP'))!;
      expect(dns.ports.map((p) => `${p.protocol}/${p.port}`)).toEqual(['UDP/53', 'TCP/53', 'UDP/5353', 'TCP/5353']);
      expect(JSON.stringify(dns.to)).toContain('openshift-dns');
    }
  });

  it("the CRD upgrade hook: pre-upgrade Job with the project's kubectl applying the CRDs server-side, own RBAC, hook pull Secret; rights and Secret removed on failure too", () => {
    const job = get(objs, 'Job', SYS, 'rlmesh-crd-upgrade');
    expect(job.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-upgrade', 'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded' });
    const pod = podTemplate(job).spec;
    expect(pod.restartPolicy).toBe('Never');
    expect(pod.serviceAccountName).toBe('rlmesh-crd-upgrade');
    expect(pod.containers[0]!.image).toBe('registry.rlmesh.dev/rlmesh/kubectl:v1.35.4');
    expect([...pod.containers[0]!.command!, ...pod.containers[0]!.args!]).toEqual([
      'kubectl', 'apply', '--server-side', '--force-conflicts', '--field-manager=rlmesh-crd-upgrade', '-f', '/crds/',
    ]);
    expect(pod.imagePullSecrets).toEqual([{ name: 'rlmesh-registry-join-crd-upgrade' }, { name: 'rlmesh-crd-upgrade-join' }, { name: 'rlmesh-registry-pull' }]);
    // before the first join the hook pulls with the token of this upgrade: a hook Secret of its own, for controlPlane.registryHost
    const hookJoin = get(objs, 'Secret', SYS, 'rlmesh-crd-upgrade-join') as K8sObject & { type: string; data: Record<string, string> };
    // its credential and its rights go after every run, succeeded or failed: Helm before 3.19 removes a failed hook's
    // earlier objects only by hook-failed; the failed Job, which holds neither, stays for its logs
    expect(hookJoin.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-upgrade', 'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded,hook-failed' });
    for (const kind of ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding'])
      expect(get(objs, kind, kind.startsWith('Cluster') ? '' : SYS, 'rlmesh-crd-upgrade').metadata.annotations?.['helm.sh/hook-delete-policy'], kind).toBe('before-hook-creation,hook-succeeded,hook-failed');
    expect(hookJoin.type).toBe('kubernetes.io/dockerconfigjson');
    expect(hookJoin.data['.dockerconfigjson']).toBe((get(objs, 'Secret', SYS, 'rlmesh-registry-join') as K8sObject & { data: Record<string, string> }).data['.dockerconfigjson']);
    // with Secrets delivered out of band there is no token, and no such Secret
    const gitops = render(['-f', join(CHART, 'ci/gitops-secrets-values.yaml')]);
    expect([...gitops.keys()].filter((k) => k.includes('rlmesh-crd-upgrade-join'))).toEqual([]);
    const cm = get(objs, 'ConfigMap', SYS, 'rlmesh-crd-upgrade') as K8sObject & { data: Record<string, string> };
    for (const f of ['rlmesh.dev_rlmeshcaches.yaml', 'rlmesh.dev_rlmeshevaluations.yaml'])
      expect(cm.data[f]).toBe(readFileSync(join(CHART, 'crds', f), 'utf8'));
    for (const kind of ['ConfigMap', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'NetworkPolicy']) {
      const o = get(objs, kind, kind.startsWith('Cluster') ? '' : SYS, 'rlmesh-crd-upgrade');
      expect(o.metadata.annotations?.['helm.sh/hook']).toBe('pre-upgrade');
      expect(Number(o.metadata.annotations?.['helm.sh/hook-weight'])).toBeLessThan(0);
    }
    const cr = get(objs, 'ClusterRole', '', 'rlmesh-crd-upgrade') as K8sObject & { rules: { resourceNames?: string[] }[] };
    expect(cr.rules[0]!.resourceNames).toEqual(['rlmeshcaches.rlmesh.dev', 'rlmeshevaluations.rlmesh.dev']);
  });

  it('GPU feature discovery: a DaemonSet with node-label rights when on; nothing GPU-specific when off', () => {
    const ds = get(objs, 'DaemonSet', SYS, 'rlmesh-gpu-feature-discovery');
    expect(podTemplate(ds).spec.containers[0]!.args).toEqual(['gpu-discovery']);
    get(objs, 'ClusterRole', '', 'rlmesh-gpu-feature-discovery');
    const off = render(['-f', join(CHART, 'ci/gpu-discovery-off-values.yaml')]);
    expect([...off.keys()].filter((k) => k.includes('gpu'))).toEqual([]);
    expect(JSON.parse((get(off, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!).gpuFeatureDiscovery).toEqual({
      enabled: false,
      // what the agent's preflight names GPU nodes without a model label by, when discovery does not select them
      nodeSelectorTerms: GPU_NODE_TERMS,
    });
  });

  it('GPU feature discovery runs only on linux/amd64 nodes that can have GPUs: the GPU node terms, each with the platform ANDed in', () => {
    const pod = podTemplate(get(objs, 'DaemonSet', SYS, 'rlmesh-gpu-feature-discovery')).spec;
    expect(pod.nodeSelector).toBeUndefined();
    expect(requiredTerms(pod)).toEqual(GPU_NODE_TERMS.map((t) => ({ matchExpressions: [...t.matchExpressions, ...PLATFORM] })));
    const keys = requiredTerms(pod).map((t) => t.matchExpressions![0]!.key);
    for (const k of ['nvidia.com/gpu.present', 'amd.com/gpu.present', 'feature.node.kubernetes.io/amd-gpu', 'feature.node.kubernetes.io/pci-10de.present', 'cloud.google.com/gke-accelerator', 'kubernetes.azure.com/accelerator', 'karpenter.k8s.aws/instance-gpu-count'])
      expect(keys).toContain(k);
    // on those nodes, whatever NoSchedule taint a GPU pool carries
    expect(pod.tolerations).toEqual([{ operator: 'Exists', effect: 'NoSchedule' }]);

    // the operator's own terms replace the GPU terms; pod (anti-)affinity alone keeps them
    const own = podTemplate(get(render([...token, '--set-json', 'gpuFeatureDiscovery.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms=[{"matchExpressions":[{"key":"pool","operator":"In","values":["gpu"]}]}]', '--set-json', 'gpuFeatureDiscovery.tolerations=[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]']), 'DaemonSet', SYS, 'rlmesh-gpu-feature-discovery')).spec;
    expect(requiredTerms(own)).toEqual([{ matchExpressions: [{ key: 'pool', operator: 'In', values: ['gpu'] }, ...PLATFORM] }]);
    expect(own.tolerations).toEqual([{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }]);
    const anti = { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: 'other' } } } }] };
    const withAnti = podTemplate(get(render([...token, '--set-json', `gpuFeatureDiscovery.affinity.podAntiAffinity=${JSON.stringify(anti)}`]), 'DaemonSet', SYS, 'rlmesh-gpu-feature-discovery')).spec;
    expect(withAnti.affinity!.podAntiAffinity).toEqual(anti);
    expect(requiredTerms(withAnti)).toEqual(requiredTerms(pod));
  });

  it("admission: the controller's pods are shaped like its own, with images from the evaluation registries or the runtime image the probe config names", () => {
    type Policy = K8sObject & {
      spec: {
        failurePolicy: string;
        matchConstraints: { resourceRules: { operations: string[]; resources: string[] }[] };
        matchConditions: { expression: string }[];
        variables: { name: string; expression: string }[];
        validations: { expression: string; message?: string; messageExpression?: string }[];
      };
    };
    const name = `rlmesh-cluster-controller-pods.${SYS}`;
    const policyOf = (o: Map<string, K8sObject>) => get(o, 'ValidatingAdmissionPolicy', '', name) as Policy;
    const variable = (p: Policy, v: string) => p.spec.variables.find((x) => x.name === v)!.expression;
    const probeImage = (o: Map<string, K8sObject>) => (JSON.parse((get(o, 'ConfigMap', RUNS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!) as { preflight: { networkPolicyProbe: { image: string } } }).preflight.networkPolicyProbe.image;

    const policy = policyOf(objs);
    expect(policy.spec.failurePolicy).toBe('Fail');
    expect(policy.spec.matchConstraints.resourceRules).toEqual([{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['pods', 'pods/ephemeralcontainers'] }]);
    expect(policy.spec.matchConditions.map((c) => c.expression)).toEqual([`request.userInfo.username == 'system:serviceaccount:${SYS}:rlmesh-cluster-controller'`]);
    expect((get(objs, 'ValidatingAdmissionPolicyBinding', '', name).spec as object)).toEqual({ policyName: name, validationActions: ['Deny'] });
    // one validation per rule, each saying what it refused (the sandbox rule only with evaluations.runtimeClassName,
    // the user namespace rule only with evaluations.hostUsers=false, the user rule not under podSecurity.arbitraryUid)
    expect(policy.spec.validations).toHaveLength(17);
    expect(policyOf(render([...token, '--set', 'evaluations.hostUsers=false'])).spec.validations).toHaveLength(18);
    expect(policyOf(render([...token, '--set', 'podSecurity.arbitraryUid=true'])).spec.validations).toHaveLength(16);
    expect(policy.spec.validations.map((v) => v.expression).filter((e) => /runtimeClassName|priorityClassName/.test(e))).toHaveLength(2);
    for (const v of policy.spec.validations) expect(v.message ?? v.messageExpression, v.expression).toMatch(/the rlmesh controller/);
    expect(policy.spec.validations[0]!.expression).toContain("object.spec.serviceAccountName == 'default'");
    expect(variable(policy, 'otherVolumes')).toContain("v.persistentVolumeClaim.claimName == 'rlmesh-artifact-cache'");
    // the chart's runtime image (the probe's and the network-ready gate's) and controlPlane.registryHost
    expect(probeImage(objs)).toBe(RUNTIME_REF);
    expect(variable(policy, 'foreignImages')).toBe(`variables.images.filter(r, r.image != "${RUNTIME_REF}" && !["registry.rlmesh.dev/"].exists(p, r.repository.startsWith(p)))`);
    // pull Secrets: the platform's and the join token's (the probe pulls with it before the join) on any pod
    expect(variable(policy, 'unmappedPullSecrets')).toContain('!(n in ["rlmesh-registry-pull","rlmesh-registry-join"])');

    // evaluations.extraRegistries are added as prefixes, compared as the agent compares them (index.docker.io is docker.io); a pinned runtime image is allowed as pinned
    const digest = `sha256:${'c'.repeat(64)}`;
    const custom = render([...token, '--set', 'evaluations.extraRegistries={index.docker.io/corp/,localhost:5000/}', '--set', 'controlPlane.registryHost=registry.staging.example', '--set', `controller.image.digest=${digest}`]);
    const p = policyOf(custom);
    // the runtime image moved with controlPlane.registryHost
    expect(probeImage(custom)).toBe(`registry.staging.example/rlmesh/rlmesh-runtime@${digest}`);
    expect(variable(p, 'foreignImages')).toBe(`variables.images.filter(r, r.image != "registry.staging.example/rlmesh/rlmesh-runtime@${digest}" && !["registry.staging.example/","docker.io/corp/","localhost:5000/"].exists(p, r.repository.startsWith(p)))`);
    expect(p.spec.validations.at(-1)!.messageExpression).toContain('may run images only from under registry.staging.example/, docker.io/corp/, localhost:5000/ (controlPlane.registryHost, evaluations.extraRegistries)');
  });

  it('staging hosts and CA bundle: ConfigMap rlmesh-ca-bundle mounted, NODE_EXTRA_CA_CERTS set', () => {
    const st = render(['-f', join(CHART, 'ci/staging-ca-values.yaml')]);
    const ca = get(st, 'ConfigMap', SYS, 'rlmesh-ca-bundle') as K8sObject & { data: Record<string, string> };
    expect(ca.data['ca.crt']).toContain('-----BEGIN CERTIFICATE-----');
    for (const name of ['rlmesh-cluster-agent', 'rlmesh-cluster-controller', 'rlmesh-egress-proxy']) {
      const c = podTemplate(get(st, 'Deployment', SYS, name)).spec.containers[0]!;
      expect(c.env?.find((e) => e.name === 'NODE_EXTRA_CA_CERTS')?.value).toBe('/etc/rlmesh/ca/ca.crt');
      expect(c.volumeMounts?.map((m) => m.mountPath)).toContain('/etc/rlmesh/ca');
    }
    const cfg = JSON.parse((get(st, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!);
    expect(cfg.controlPlane).toEqual({
      apiHost: 'api.staging.rlmesh.dev',
      apiPort: 443,
      registryHost: 'registry.staging.rlmesh.dev',
      outputHosts: ['outputs.staging.rlmesh.dev'],
      caBundlePath: '/etc/rlmesh/ca/ca.crt',
      pinCaBundle: false,
    });
  });

  it('CA bundle from a ConfigMap or Secret: mounted at the same path in every pod of the chart, optional: false, no ConfigMap of its own', () => {
    const st = render(['-f', join(CHART, 'ci/ca-bundle-from-values.yaml')]);
    expect([...st.keys()].some((k) => k.includes('rlmesh-ca-bundle'))).toBe(false);
    const deployments = [...st.values()].filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet');
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(['rlmesh-artifact-cache-filler', 'rlmesh-cluster-agent', 'rlmesh-cluster-controller', 'rlmesh-egress-proxy', 'rlmesh-gpu-feature-discovery']);
    for (const d of deployments) {
      const pod = podTemplate(d);
      expect(pod.spec.volumes?.find((v) => v.name === 'ca-bundle'), d.metadata.name).toEqual({
        name: 'ca-bundle',
        configMap: { name: 'corp-trust-bundle', items: [{ key: 'trust-bundle.pem', path: 'ca.crt' }], optional: false },
      });
      const c = pod.spec.containers[0]!;
      expect(c.env?.find((e) => e.name === 'NODE_EXTRA_CA_CERTS')?.value, d.metadata.name).toBe('/etc/rlmesh/ca/ca.crt');
      expect(c.volumeMounts?.map((m) => m.mountPath), d.metadata.name).toContain('/etc/rlmesh/ca');
      expect(pod.metadata.annotations?.['checksum/ca-bundle'], d.metadata.name).toMatch(/^[0-9a-f]{64}$/);
    }
    for (const ns of [SYS, RUNS]) {
      const cfg = JSON.parse((get(st, 'ConfigMap', ns, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!);
      expect(cfg.controlPlane.caBundlePath).toBe('/etc/rlmesh/ca/ca.crt');
    }
    const fromSecret = [...render(['-f', join(CHART, 'ci/ca-bundle-from-secret-values.yaml')]).values()].filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet');
    expect(fromSecret.map((d) => d.metadata.name).sort()).toEqual(deployments.map((d) => d.metadata.name).sort());
    for (const d of fromSecret) {
      expect(podTemplate(d).spec.volumes?.find((v) => v.name === 'ca-bundle'), d.metadata.name).toEqual({
        name: 'ca-bundle',
        secret: { secretName: 'corp-root-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }], optional: false },
      });
    }
  });

  it("private registries: the prefixes and the operator's pull Secrets with theirs reach the runtime config and the admission policy; no Role reads those Secrets", () => {
    const o = render(['-f', join(CHART, 'ci/private-registry-values.yaml')]);
    const cfg = JSON.parse((get(o, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!);
    expect(cfg.evaluations.imagePullSecrets).toEqual([{ name: 'corp-registry-pull', registries: ['registry.corp.example:5000/evals/'] }]);
    expect(cfg.agent.imageRegistries).toEqual(['registry.rlmesh.dev', 'registry.corp.example:5000/evals/']);
    for (const r of [...o.values()].filter((x) => x.kind === 'Role' || x.kind === 'ClusterRole')) {
      for (const rule of (r as K8sObject & { rules: { resources: string[]; resourceNames?: string[] }[] }).rules) {
        if (rule.resources.includes('secrets')) expect(rule.resourceNames ?? [], `${r.kind} ${r.metadata.name}`).not.toContain('corp-registry-pull');
      }
    }
    type Policy = K8sObject & { spec: { variables: { name: string; expression: string }[]; validations: { expression: string; messageExpression?: string }[] } };
    const policy = get(o, 'ValidatingAdmissionPolicy', '', `rlmesh-cluster-controller-pods.${SYS}`) as Policy;
    const unmapped = policy.spec.variables.find((v) => v.name === 'unmappedPullSecrets')!.expression;
    expect(unmapped).toContain('!(n in {"corp-registry-pull":["registry.corp.example:5000/evals/"]} && variables.images.exists(r, r.image != ');
    expect(unmapped).toContain('{"corp-registry-pull":["registry.corp.example:5000/evals/"]}[n].exists(p, r.repository.startsWith(p))');
    expect(policy.spec.validations.find((v) => v.expression === 'size(variables.unmappedPullSecrets) == 0')!.messageExpression).toContain('evaluations.imagePullSecrets[].registries');
  });

  it('no Role or ClusterRole of the chart lets a pod read a Secret it does not own: none gets Secrets without resourceNames, none names the operator\'s registry or mirror logins, and the filler none at all', () => {
    const scenarios = [objs, render(['-f', join(CHART, 'ci/private-registry-values.yaml'), '--set', 'imagePullSecrets[0].name=corp-mirror-pull', '--set', 'gpuFeatureDiscovery.enabled=true', '--set', 'observability.enabled=true'])];
    for (const o of scenarios) {
      const roles = [...o.values()].filter((x) => x.kind === 'Role' || x.kind === 'ClusterRole') as (K8sObject & { rules: { resources: string[]; resourceNames?: string[]; verbs: string[] }[] })[];
      const bindings = [...o.values()].filter((x) => x.kind === 'RoleBinding' || x.kind === 'ClusterRoleBinding') as (K8sObject & { roleRef: { kind: string; name: string }; subjects: { name: string; namespace: string }[] })[];
      expect(roles.length).toBeGreaterThanOrEqual(8);
      for (const role of roles) {
        const subjects = bindings.filter((b) => b.roleRef.kind === role.kind && b.roleRef.name === role.metadata.name && (role.kind === 'ClusterRole' || b.metadata.namespace === role.metadata.namespace)).flatMap((b) => b.subjects);
        for (const rule of role.rules.filter((r) => r.resources.includes('secrets') || r.resources.includes('*'))) {
          const reads = rule.verbs.filter((v) => ['get', 'list', 'watch', '*'].includes(v));
          const where = `${role.kind} ${role.metadata.namespace ?? ''}/${role.metadata.name} → ${subjects.map((x) => `${x.namespace}:${x.name}`).join(', ')}`;
          if (reads.length === 0) continue;
          // a pod in rlmesh-runs (the filler) reads no Secret at all
          expect(subjects.some((x) => x.namespace === RUNS), where).toBe(false);
          expect(rule.resourceNames?.length, `${where}: ${reads.join(',')} secrets without resourceNames`).toBeGreaterThan(0);
          for (const login of ['corp-registry-pull', 'corp-mirror-pull']) expect(rule.resourceNames, where).not.toContain(login);
        }
      }
    }
  });

  it('NetworkPolicies: the metrics and health ports admit network.metricsPeers only (default: the observability chart\'s Prometheus and a Prometheus in monitoring), never every source', () => {
    type Rule = { from?: Record<string, unknown>[]; ports: { protocol: string; port: number }[] };
    const ingress = (o: Map<string, K8sObject>, ns: string, name: string) => ((get(o, 'NetworkPolicy', ns, name) as K8sObject & { spec: { ingress?: Rule[] | null } }).spec.ingress ?? []);
    const opsPorts = [{ protocol: 'TCP', port: 9090 }, { protocol: 'TCP', port: 8081 }];
    const release = { 'kubernetes.io/metadata.name': SYS };
    const defaults = [
      { namespaceSelector: { matchLabels: release }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'rlmesh-prometheus' } } },
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } },
    ];
    // and the API's addresses (OFFLINE_API_SERVER here), through which rlmesh status reads the proxy's metrics
    const api = [{ ipBlock: { cidr: '10.96.0.1/32' } }, { ipBlock: { cidr: '192.0.2.10/32' } }];
    const components = [[SYS, 'rlmesh-cluster-agent'], [SYS, 'rlmesh-cluster-controller'], [SYS, 'rlmesh-egress-proxy'], [RUNS, 'rlmesh-artifact-cache-filler']] as const;
    for (const [ns, name] of components) {
      const rules = ingress(objs, ns, name);
      expect(rules.every((r) => r.from?.length), `${name}: a rule without from admits every source`).toBe(true);
      expect(rules.find((r) => r.ports.some((p) => p.port === 9090)), name).toEqual({ from: [...defaults, ...api], ports: opsPorts });
    }
    // the controller admits the NetworkPolicy probe on its metrics port, so that only rlmesh-runs' egress policy refuses the probe
    expect(ingress(objs, SYS, 'rlmesh-cluster-controller')[1]).toEqual({
      from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': RUNS } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'rlmesh-network-policy-probe' } } }],
      ports: [{ protocol: 'TCP', port: 9090 }],
    });
    // a podSelector alone is the release namespace's, in the runs namespace's policy too; the API server's pinned addresses come in as well
    const own = render([...token, '--set-json', 'network.metricsPeers=[{"podSelector":{"matchLabels":{"app":"prom"}}},{"ipBlock":{"cidr":"10.9.0.0/24"}}]', '--set', 'network.apiServerAddresses={172.18.0.2/32}']);
    for (const [ns, name] of components) {
      expect(ingress(own, ns, name).find((r) => r.ports.some((p) => p.port === 9090))?.from, name).toEqual([
        { namespaceSelector: { matchLabels: release }, podSelector: { matchLabels: { app: 'prom' } } },
        { ipBlock: { cidr: '10.9.0.0/24' } },
        { ipBlock: { cidr: '172.18.0.2/32' } },
      ]);
    }
    // none: the API's addresses alone (the kubelet's probes come from the node)
    const none = render([...token, '--set-json', 'network.metricsPeers=[]']);
    expect(ingress(none, SYS, 'rlmesh-cluster-agent')).toEqual([{ from: api, ports: opsPorts }]);
    expect(ingress(none, SYS, 'rlmesh-egress-proxy').map((r) => r.ports)).toEqual([[{ protocol: 'TCP', port: 3128 }], opsPorts]);
  });

  it('ServiceMonitor or PodMonitor when enabled, on the metrics port', () => {
    const sm = render([...token, '--set', 'metrics.serviceMonitor.enabled=true', '--set', 'metrics.serviceMonitor.labels.release=prom']);
    expect(get(sm, 'ServiceMonitor', SYS, 'rlmesh-runtime').metadata.labels?.release).toBe('prom');
    expect((get(sm, 'Service', SYS, 'rlmesh-metrics').spec as { ports: { port: number }[] }).ports[0]!.port).toBe(9090);
    const pm = render([...token, '--set', 'metrics.podMonitor.enabled=true', '--set', 'metrics.port=9100']);
    expect(get(pm, 'PodMonitor', SYS, 'rlmesh-runtime').spec).toMatchObject({ podMetricsEndpoints: [{ port: 'metrics', interval: '30s' }] });
    expect(podTemplate(get(pm, 'Deployment', SYS, 'rlmesh-cluster-agent')).spec.containers[0]!.ports).toContainEqual({ name: 'metrics', containerPort: 9100, protocol: 'TCP' });
    expect([...objs.keys()].some((k) => k.includes('Monitor'))).toBe(false);
  });

  it('scheduling knobs reach the pods: nodeSelector, tolerations, affinity, priorityClassName, podAnnotations, imagePullSecrets', () => {
    const o = render(['-f', join(CHART, 'ci/extra-domains-scheduling-values.yaml')]);
    const agent = podTemplate(get(o, 'Deployment', SYS, 'rlmesh-cluster-agent'));
    expect(agent.spec).toMatchObject({
      nodeSelector: { 'node-role.kubernetes.io/infra': '' },
      // the operator's toleration, then the agent's own short ones for a lost node (it leaves in 30 s, not 300)
      tolerations: [
        { key: 'dedicated', operator: 'Equal', value: 'infra', effect: 'NoSchedule' },
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 },
      ],
      priorityClassName: 'system-cluster-critical',
      imagePullSecrets: [{ name: 'corp-mirror' }, { name: 'rlmesh-registry-pull' }, { name: 'rlmesh-registry-join' }],
    });
    expect(agent.metadata.annotations?.['example.com/team']).toBe('platform');
    expect(JSON.stringify(podTemplate(get(o, 'Deployment', SYS, 'rlmesh-cluster-controller')).spec)).toContain('requiredDuringSchedulingIgnoredDuringExecution');
    expect((get(o, 'Deployment', SYS, 'rlmesh-egress-proxy').spec as { replicas: number }).replicas).toBe(3);
  });
});

const PLATFORM = [
  { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
  { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
];
const requiredTerms = (spec: ReturnType<typeof podTemplate>['spec']): NodeSelectorTerm[] => spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];

describe('behind a corporate proxy (controlPlane.proxy)', () => {
  type Rule = { to?: Record<string, unknown>[]; ports: { protocol: string; port: number }[] };
  type NP = K8sObject & { spec: { egress: Rule[] } };
  const corp = render(['-f', join(CHART, 'ci/corporate-proxy-values.yaml')]);
  const proxyRule = (cidrs: string[], port: number): Rule => ({ to: cidrs.map((cidr) => ({ ipBlock: { cidr } })), ports: [{ protocol: 'TCP', port }] });
  const everyAddress443 = (r: Rule) => r.to === undefined && r.ports.length === 1 && r.ports[0]!.port === 443;
  const publicBlock = (r: Rule) => JSON.stringify(r.to ?? []).includes('0.0.0.0/0') || JSON.stringify(r.to ?? []).includes('2000::/3');

  it('the runtime config carries the proxy: url, noProxy and where its credentials are mounted', () => {
    const cfg = JSON.parse((get(corp, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!);
    expect(cfg.controlPlane.proxy).toEqual({
      url: 'http://proxy.corp.example:3128',
      noProxy: ['.corp.example', '10.20.0.0/16'],
      credentialsDir: '/etc/rlmesh/proxy-credentials',
      credentialsSecret: 'corp-proxy-credentials',
      passUnresolvedNames: false,
    });
    // without existingSecret: no credentials; without a url: no proxy at all
    const anonymous = render([...token, '--set', 'controlPlane.proxy.url=http://10.20.30.40:3128']);
    expect(JSON.parse((get(anonymous, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!).controlPlane.proxy).toEqual({
      url: 'http://10.20.30.40:3128',
      noProxy: [],
      passUnresolvedNames: false,
    });
    expect(JSON.parse((get(objs, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!).controlPlane.proxy).toBeUndefined();
  });

  it('existingSecret is mounted read-only into the agent and the egress proxy, and no other pod; no Secret read is granted for it', () => {
    for (const name of ['rlmesh-cluster-agent', 'rlmesh-egress-proxy']) {
      const spec = podTemplate(get(corp, 'Deployment', SYS, name)).spec;
      expect(spec.volumes?.find((v) => v.name === 'proxy-credentials'), name).toEqual({
        name: 'proxy-credentials',
        secret: {
          secretName: 'corp-proxy-credentials',
          optional: false,
          defaultMode: 0o440,
          items: [
            { key: 'username', path: 'username' },
            { key: 'password', path: 'password' },
          ],
        },
      });
      expect(spec.containers[0]!.volumeMounts?.find((m) => m.name === 'proxy-credentials'), name).toEqual({ name: 'proxy-credentials', mountPath: '/etc/rlmesh/proxy-credentials', readOnly: true });
    }
    for (const o of [...corp.values()].filter((x) => ['Deployment', 'DaemonSet', 'Job'].includes(x.kind) && !['rlmesh-cluster-agent', 'rlmesh-egress-proxy'].includes(x.metadata.name)))
      expect(JSON.stringify(podTemplate(o).spec), o.metadata.name).not.toContain('corp-proxy-credentials');
    // without existingSecret, nothing is mounted
    const anonymous = render([...token, '--set', 'controlPlane.proxy.url=http://10.20.30.40:3128']);
    for (const name of ['rlmesh-cluster-agent', 'rlmesh-egress-proxy']) expect(JSON.stringify(podTemplate(get(anonymous, 'Deployment', SYS, name)).spec)).not.toContain('proxy-credentials');
    // the same RBAC as without a proxy: the Secret is a volume, not an API read
    for (const o of corp.values()) if (['Role', 'ClusterRole'].includes(o.kind)) expect(o, o.metadata.name).toEqual(objs.get(`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`));
  });

  it('NetworkPolicies: the agent and the egress proxy reach the proxy on its port, and no public address; DNS, the Kubernetes API and egress.allowRanges stay', () => {
    const dnsRule = (get(objs, 'NetworkPolicy', SYS, 'rlmesh-cluster-agent') as NP).spec.egress[0]!;
    const apiRule = (get(objs, 'NetworkPolicy', SYS, 'rlmesh-cluster-agent') as NP).spec.egress[1]!;
    const toProxy = proxyRule(['10.20.30.40/32', '10.20.30.41/32'], 3128);
    const agent = get(corp, 'NetworkPolicy', SYS, 'rlmesh-cluster-agent') as NP;
    expect(agent.spec.egress).toEqual([dnsRule, apiRule, toProxy]);
    expect(agent.spec.egress.some(everyAddress443)).toBe(false);
    const proxy = get(corp, 'NetworkPolicy', SYS, 'rlmesh-egress-proxy') as NP;
    expect(proxy.spec.egress).toEqual([dnsRule, toProxy, proxyRule(['10.20.0.0/16'], 443)]);
    expect(proxy.spec.egress.some(publicBlock)).toBe(false);
    // nothing else changes: the controller, the filler, GPU discovery and the hook
    for (const [ns, name] of [
      [SYS, 'rlmesh-cluster-controller'],
      [RUNS, 'rlmesh-artifact-cache-filler'],
      [RUNS, 'rlmesh-runs-egress'],
      [SYS, 'rlmesh-gpu-feature-discovery'],
      [SYS, 'rlmesh-crd-upgrade'],
    ] as const)
      expect(get(corp, 'NetworkPolicy', ns, name).spec, name).toEqual(get(objs, 'NetworkPolicy', ns, name).spec);
    // no rule of any policy opens TCP 443 (or any port) to every address
    for (const o of corp.values()) if (o.kind === 'NetworkPolicy') for (const r of (o as NP).spec.egress ?? []) expect(everyAddress443(r) || publicBlock(r), o.metadata.name).toBe(false);
  });

  it("egress.allowRanges: the egress proxy's ipBlock of a re-opened block excepts the cloud metadata addresses inside it, which the proxy refuses anyway", () => {
    const o = render([...token, '--set', 'egress.allowRanges={100.64.0.0/10,100.100.100.0/24,10.20.0.0/16,fc00::/7,fd00:ec2::/32,fd20:ce::/32}']);
    const rule = (get(o, 'NetworkPolicy', SYS, 'rlmesh-egress-proxy') as NP).spec.egress.at(-1)!;
    expect(rule.to).toEqual([
      { ipBlock: { cidr: '100.64.0.0/10', except: ['100.100.100.200/32'] } },
      { ipBlock: { cidr: '100.100.100.0/24', except: ['100.100.100.200/32'] } },
      { ipBlock: { cidr: '10.20.0.0/16' } },
      { ipBlock: { cidr: 'fc00::/7', except: ['fd00:ec2::254/128', 'fd00:ec2::23/128', 'fd20:ce::254/128', 'fd00:c1::a9fe:a9fe/128'] } },
      { ipBlock: { cidr: 'fd00:ec2::/32', except: ['fd00:ec2::254/128', 'fd00:ec2::23/128'] } },
      { ipBlock: { cidr: 'fd20:ce::/32', except: ['fd20:ce::254/128'] } },
    ]);
  });

  it('a proxy by IP address needs no addresses: its /32 or /128, on the port of the url or its scheme', () => {
    for (const [url, rule] of [
      ['http://192.0.2.10:8080', proxyRule(['192.0.2.10/32'], 8080)],
      ['http://192.0.2.10', proxyRule(['192.0.2.10/32'], 80)],
      ['https://[2001:db8::10]/', proxyRule(['2001:db8::10/128'], 443)],
    ] as const) {
      const o = render([...token, '--set', `controlPlane.proxy.url=${url}`]);
      expect((get(o, 'NetworkPolicy', SYS, 'rlmesh-cluster-agent') as NP).spec.egress.at(-1), url).toEqual(rule);
      expect((get(o, 'NetworkPolicy', SYS, 'rlmesh-egress-proxy') as NP).spec.egress.at(-1), url).toEqual(rule);
    }
    // addresses, when given, win over the url's address
    const o = render([...token, '--set', 'controlPlane.proxy.url=http://192.0.2.10:3128', '--set', 'controlPlane.proxy.addresses={192.0.2.0/28}']);
    expect((get(o, 'NetworkPolicy', SYS, 'rlmesh-cluster-agent') as NP).spec.egress.at(-1)).toEqual(proxyRule(['192.0.2.0/28'], 3128));
  });

  it('bad proxy values are refused at helm install time with the path named and what to do, the messages crossFieldErrors() gives', () => {
    for (const [proxy, paths] of [
      [{ url: 'socks5://192.0.2.10:1080' }, ['controlPlane.proxy.url']],
      [{ url: 'http://alice:s3cret@192.0.2.10:3128' }, ['controlPlane.proxy.url']],
      [{ url: 'http://192.0.2.10:3128/proxy.pac' }, ['controlPlane.proxy.url']],
      [{ url: 'http://192.0.2.10:70000' }, ['controlPlane.proxy.url']],
      [{ url: 'http://proxy.corp.example:3128' }, ['controlPlane.proxy.addresses']],
      [{ url: 'http://proxy.corp.example:3128', addresses: ['10.20.30.40', '10.20.30.41/32'] }, ['controlPlane.proxy.addresses.0']],
      [{ existingSecret: 'corp-proxy' }, ['controlPlane.proxy.existingSecret']],
    ] as const) {
      const values = { joinToken: TOKEN, controlPlane: { proxy } };
      const r = template(['-f', valuesFile(values)], { allowFail: true });
      expect(r.status, JSON.stringify(proxy)).not.toBe(0);
      const errors = crossFieldErrors(valuesObjectSchema.parse(values));
      expect(errors.map((e) => e.path), JSON.stringify(proxy)).toEqual(paths);
      for (const e of errors) expect(r.stderr).toContain(`- ${e.path}: ${e.message}`);
      expect(r.stderr).not.toContain('s3cret');
    }
    // a noProxy entry with a scheme: values.schema.json, at its path
    const r = template([...token, '--set', 'controlPlane.proxy.url=http://192.0.2.10', '--set', 'controlPlane.proxy.noProxy={https://internal.corp}'], { allowFail: true });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("/controlPlane/proxy/noProxy/0");
  });
});

describe('node architecture: the images are linux/amd64 only', () => {
  it("every required node term of the operator's affinity gets linux/amd64 ANDed in; preferred terms and pod (anti-)affinity pass through", () => {
    const preferred = [{ weight: 10, preference: { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['z1'] }] } }];
    const podAntiAffinity = { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: 'noisy' } } }] };
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'pool', operator: 'In', values: ['infra'] }] },
            { matchExpressions: [{ key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] }], matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] },
          ],
        },
        preferredDuringSchedulingIgnoredDuringExecution: preferred,
      },
      podAntiAffinity,
    };
    const o = render(['-f', valuesFile({ joinToken: TOKEN, agent: { affinity }, crdUpgradeHook: { affinity } })]);
    for (const [kind, name] of [['Deployment', 'rlmesh-cluster-agent'], ['Job', 'rlmesh-crd-upgrade']] as const) {
      const spec = podTemplate(get(o, kind, SYS, name)).spec;
      // nodeSelectorTerms are ORed: the requirement is in both terms, or the second would let the pod onto arm64
      expect(requiredTerms(spec), name).toEqual([
        { matchExpressions: [{ key: 'pool', operator: 'In', values: ['infra'] }, ...PLATFORM] },
        // an expression the operator already wrote is not repeated
        { matchExpressions: [{ key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] }, PLATFORM[0]], matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] },
      ]);
      expect(spec.affinity!.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution, name).toEqual(preferred);
      expect(spec.affinity!.podAntiAffinity, name).toEqual(podAntiAffinity);
    }
    // the other components keep the requirement alone
    expect(requiredTerms(podTemplate(get(o, 'Deployment', SYS, 'rlmesh-cluster-controller')).spec)).toEqual([{ matchExpressions: PLATFORM }]);
    // an empty list of terms is one term of the platform's own
    const empty = render([...token, '--set-json', 'egress.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[]}}}']);
    expect(requiredTerms(podTemplate(get(empty, 'Deployment', SYS, 'rlmesh-egress-proxy')).spec)).toEqual([{ matchExpressions: PLATFORM }]);
  });
});

describe('every pod', () => {
  for (const s of [undefined, ...scenarios()]) {
    it(`is restricted, runs an image this project builds, is bounded and requires linux/amd64 (${s ?? 'token'})`, () => {
      const o = render(s ? ['-f', join(CHART, 'ci', s)] : token);
      // a scenario that moves the images (controlPlane.registryHost, global.imageRegistry) moves them all
      const relocation = imageRelocation(valuesObjectSchema.parse(s ? parse(readFileSync(join(CHART, 'ci', s), 'utf8')) : { joinToken: TOKEN }));
      const built = [imageReference(RUNTIME_IMAGE, CHART_APP_VERSION, relocation), imageReference(KUBECTL_IMAGE, '', relocation)];
      const w = workloads(o);
      expect(w.length).toBeGreaterThanOrEqual(4);
      for (const x of w) {
        const { spec } = podTemplate(x);
        const terms = requiredTerms(spec);
        expect(terms.length, x.metadata.name).toBeGreaterThan(0);
        for (const t of terms) expect(t.matchExpressions, x.metadata.name).toEqual(expect.arrayContaining(PLATFORM));
        expect(spec.securityContext, x.metadata.name).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
        for (const c of spec.containers) {
          expect(c.securityContext, x.metadata.name).toEqual({
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            runAsNonRoot: true,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          });
          expect(built, x.metadata.name).toContain(c.image);
          expect(Object.keys(c.resources?.requests ?? {}).sort()).toEqual(['cpu', 'ephemeral-storage', 'memory']);
          expect(Object.keys(c.resources?.limits ?? {}).sort()).toEqual(['cpu', 'ephemeral-storage', 'memory']);
          // the repository's chart pulls by tag: Always (test/chart/posture.test.ts has the whole rule)
          expect(c.imagePullPolicy, x.metadata.name).toBe('Always');
        }
      }
    });
  }
});

const RUNTIME_REF = `${RUNTIME_IMAGE.repository}:${CHART_APP_VERSION}`;
const IMAGE_PATHS = imageBlocks(defaultValues()).map((b) => b.path);
const digestOf = (i: number) => `sha256:${(i + 1).toString(16).padStart(2, '0').repeat(32)}`;
/** Every container image and the probe image in the runtime config, by where it is. */
function images(objects: Map<string, K8sObject>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const w of workloads(objects)) for (const c of podTemplate(w).spec.containers) out[`${w.metadata.name}/${c.name}`] = c.image;
  const cfg = JSON.parse((get(objects, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!);
  out['preflight probe'] = cfg.preflight.networkPolicyProbe.image;
  return out;
}

describe('images: repository:tag without a digest, repository@digest with one', () => {
  it('the values have six image blocks, each with an empty digest', () => {
    expect(IMAGE_PATHS).toEqual(['egress.image', 'artifactCache.filler.image', 'agent.image', 'controller.image', 'gpuFeatureDiscovery.image', 'crdUpgradeHook.image']);
    for (const b of imageBlocks(defaultValues())) expect(b.image.digest, b.path).toBe('');
  });

  it("without digests: every image is repository:tag, the runtime's tag the chart appVersion", () => {
    const all = images(objs);
    expect(all).toEqual({
      'rlmesh-cluster-agent/agent': RUNTIME_REF,
      'rlmesh-cluster-controller/controller': RUNTIME_REF,
      'rlmesh-artifact-cache-filler/cache-filler': RUNTIME_REF,
      'rlmesh-egress-proxy/egress-proxy': RUNTIME_REF,
      'rlmesh-gpu-feature-discovery/gpu-feature-discovery': RUNTIME_REF,
      'rlmesh-crd-upgrade/kubectl': 'registry.rlmesh.dev/rlmesh/kubectl:v1.35.4',
      'preflight probe': RUNTIME_REF,
    });
    expect(CHART_APP_VERSION).toBe((parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { appVersion: string }).appVersion);
    // a tag given is used as it is
    expect(images(render([...token, '--set', 'agent.image.tag=0.1.0-rc.1']))['rlmesh-cluster-agent/agent']).toBe(`${RUNTIME_IMAGE.repository}:0.1.0-rc.1`);
  });

  it('with digests (--set): every image is repository@digest, the tag ignored, the probe image too', () => {
    const set = IMAGE_PATHS.flatMap((p, i) => ['--set', `${p}.digest=${digestOf(i)}`, '--set', `${p}.tag=ignored`]);
    const o = render([...token, ...set]);
    const byPath = Object.fromEntries(IMAGE_PATHS.map((p, i) => [p, digestOf(i)]));
    expect(images(o)).toEqual({
      'rlmesh-cluster-agent/agent': `${RUNTIME_IMAGE.repository}@${byPath['agent.image']}`,
      'rlmesh-cluster-controller/controller': `${RUNTIME_IMAGE.repository}@${byPath['controller.image']}`,
      'rlmesh-artifact-cache-filler/cache-filler': `${RUNTIME_IMAGE.repository}@${byPath['artifactCache.filler.image']}`,
      'rlmesh-egress-proxy/egress-proxy': `${RUNTIME_IMAGE.repository}@${byPath['egress.image']}`,
      'rlmesh-gpu-feature-discovery/gpu-feature-discovery': `${RUNTIME_IMAGE.repository}@${byPath['gpuFeatureDiscovery.image']}`,
      'rlmesh-crd-upgrade/kubectl': `${KUBECTL_IMAGE.repository}@${byPath['crdUpgradeHook.image']}`,
      // the probe runs the controller's image
      'preflight probe': `${RUNTIME_IMAGE.repository}@${byPath['controller.image']}`,
    });
    // renderRuntimeConfig() renders the same probe image
    const v = valuesSchema.parse({ joinToken: TOKEN, controller: { image: { digest: byPath['controller.image'], tag: 'ignored' } } });
    expect(renderRuntimeConfig(v).preflight?.networkPolicyProbe.image).toBe(images(o)['preflight probe']);
  });

  it('a malformed digest is refused at its path: by values.schema.json, and by _validate.tpl when the schema is skipped', () => {
    for (const p of IMAGE_PATHS) {
      const r = template([...token, '--set', `${p}.digest=latest`], { allowFail: true });
      expect(r.status, p).not.toBe(0);
      expect(r.stderr, p).toContain(`/${p.replace(/\./g, '/')}/digest`);
      expect(r.stderr, p).toContain('sha256:[a-f0-9]{64}');
    }
    // every block at once, schema skipped: the template names each one with the zod rule's own message
    const bad = IMAGE_PATHS.flatMap((p) => ['--set', `${p}.digest=sha256:abc`]);
    const r = template([...token, ...bad, '--skip-schema-validation'], { allowFail: true });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('rlmesh-runtime: invalid values');
    const values = structuredClone(defaultValues()) as Record<string, unknown>;
    for (const b of imageBlocks(values)) b.image.digest = 'sha256:abc';
    const expected = imageErrors(values, []);
    expect(expected).toHaveLength(IMAGE_PATHS.length);
    for (const e of expected) expect(r.stderr).toContain(`${e.path}: ${e.message}`);
  });

  it('global.imageRegistry moves every image, the chart\'s and the controller\'s probe, to the mirror with path and digest kept', () => {
    const set = IMAGE_PATHS.flatMap((p, i) => ['--set', `${p}.digest=${digestOf(i)}`]);
    const byPath = Object.fromEntries(IMAGE_PATHS.map((p, i) => [p, digestOf(i)]));
    const o = render([...token, ...set, '--set', 'global.imageRegistry=mirror.corp.example:5000/rlmesh-cache']);
    const mirrored = (repository: string, digest: string) => `${repository.replace(/^registry\.rlmesh\.dev\//, 'mirror.corp.example:5000/rlmesh-cache/')}@${digest}`;
    expect(images(o)).toEqual({
      'rlmesh-cluster-agent/agent': mirrored(RUNTIME_IMAGE.repository, byPath['agent.image']!),
      'rlmesh-cluster-controller/controller': mirrored(RUNTIME_IMAGE.repository, byPath['controller.image']!),
      'rlmesh-artifact-cache-filler/cache-filler': mirrored(RUNTIME_IMAGE.repository, byPath['artifactCache.filler.image']!),
      'rlmesh-egress-proxy/egress-proxy': mirrored(RUNTIME_IMAGE.repository, byPath['egress.image']!),
      'rlmesh-gpu-feature-discovery/gpu-feature-discovery': mirrored(RUNTIME_IMAGE.repository, byPath['gpuFeatureDiscovery.image']!),
      'rlmesh-crd-upgrade/kubectl': mirrored(KUBECTL_IMAGE.repository, byPath['crdUpgradeHook.image']!),
      'preflight probe': mirrored(RUNTIME_IMAGE.repository, byPath['controller.image']!),
    });
    // the controller-pods policy lets the controller run the mirrored runtime image (the filler's and the probe's)
    expect(JSON.stringify(get(o, 'ValidatingAdmissionPolicy', '', `rlmesh-cluster-controller-pods.${SYS}`))).toContain(mirrored(RUNTIME_IMAGE.repository, byPath['controller.image']!));
    // renderRuntimeConfig() relocates the probe image the same way
    const v = valuesSchema.parse({ joinToken: TOKEN, global: { imageRegistry: 'mirror.corp.example:5000/rlmesh-cache' }, controller: { image: { digest: byPath['controller.image'] } } });
    expect(renderRuntimeConfig(v).preflight?.networkPolicyProbe.image).toBe(images(o)['preflight probe']);
    // an image the operator names on Docker Hub keeps its path under the mirror
    expect(images(render([...token, '--set', 'global.imageRegistry=mirror.corp.example', '--set', 'crdUpgradeHook.image.repository=bitnami/kubectl']))['rlmesh-crd-upgrade/kubectl']).toBe('mirror.corp.example/bitnami/kubectl:v1.35.4');
  });

  it('controlPlane.registryHost moves the images of the platform\'s registry and the join\'s pull Secret together; other registries stay', () => {
    const o = render([...token, '--set', 'controlPlane.registryHost=registry.staging.example']);
    const all = images(o);
    for (const [where, ref] of Object.entries(all)) expect(ref, where).toMatch(/^registry\.staging\.example\/rlmesh\//);
    const join = get(o, 'Secret', 'rlmesh-system', 'rlmesh-registry-join') as K8sObject & { data: Record<string, string> };
    expect(Object.keys((JSON.parse(Buffer.from(join.data['.dockerconfigjson']!, 'base64').toString('utf8')) as { auths: object }).auths)).toEqual(['registry.staging.example']);
    const own = images(render([...token, '--set', 'controlPlane.registryHost=registry.staging.example', '--set', 'agent.image.repository=images.corp.example/rlmesh/runtime']));
    expect(own['rlmesh-cluster-agent/agent']).toBe(`images.corp.example/rlmesh/runtime:${CHART_APP_VERSION}`);
    // with a mirror as well, the mirror wins: it serves what the staging registry holds
    expect(images(render([...token, '--set', 'controlPlane.registryHost=registry.staging.example', '--set', 'global.imageRegistry=mirror.corp.example']))['rlmesh-cluster-agent/agent']).toBe(`mirror.corp.example/rlmesh/rlmesh-runtime:${CHART_APP_VERSION}`);
  });

  it('kubectl with neither tag nor digest is refused (no appVersion stands in for its tag)', () => {
    const r = template([...token, '--set', 'crdUpgradeHook.image.tag='], { allowFail: true });
    expect(r.status).not.toBe(0);
    const [e] = crossFieldErrors(valuesObjectSchema.parse({ joinToken: TOKEN, crdUpgradeHook: { image: { tag: '' } } }));
    expect(e?.path).toBe('crdUpgradeHook.image.tag');
    expect(r.stderr).toContain(`${e!.path}: ${e!.message}`);
    expect(images(render([...token, '--set', 'crdUpgradeHook.image.tag=', '--set', `crdUpgradeHook.image.digest=${digestOf(0)}`]))['rlmesh-crd-upgrade/kubectl']).toBe(
      `${KUBECTL_IMAGE.repository}@${digestOf(0)}`,
    );
  });
});

describe('GitOps-clean renders', () => {
  it('renders byte-identical twice for every scenario, with no random, time or lookup functions (but the API addresses\' own, which their value overrides)', () => {
    for (const s of scenarios()) {
      const a = template(['-f', join(CHART, 'ci', s)]).stdout;
      const b = template(['-f', join(CHART, 'ci', s)]).stdout;
      expect(a === b, s).toBe(true);
    }
    const sources = readdirSync(join(CHART, 'templates'))
      .map((f) => readFileSync(join(CHART, 'templates', f), 'utf8'))
      .join('\n');
    // rlmesh.apiServerAddresses reads Service default/kubernetes only when network.apiServerAddresses is empty; a render
    // without the cluster (Argo CD, Flux) is then refused (network-policy-reach.test.ts), so what renders is the value's
    const apiServer = /\{\{- define "rlmesh\.apiServerAddresses" -\}\}[\s\S]*?\{\{- if \.Values\.network\.apiServerAddresses \}\}[\s\S]*?\{\{- else \}\}([\s\S]*?)\{\{- toJson \$cidrs \}\}\n\{\{- end \}\}/;
    expect(apiServer.exec(sources)?.[1], 'the API addresses are looked up only without the value').toMatch(/\blookup\b/);
    for (const f of ['randAlphaNum', 'randAlpha', 'uuidv4', 'now', 'lookup', 'genCA', 'genPrivateKey']) {
      const r = new RegExp(`\\b${f}\\b`);
      expect(r.test(sources.replace(apiServer, '')), f).toBe(false);
    }
  });

  it('checksum annotations roll the pods when their ConfigMaps change, and a new token rolls the agent', () => {
    const ann = (args: string[], name: string) => podTemplate(get(render(args), 'Deployment', SYS, name)).metadata.annotations ?? {};
    const base = ann(token, 'rlmesh-egress-proxy')['checksum/runtime-config'];
    expect(base).toMatch(/^[a-f0-9]{64}$/);
    expect(ann([...token, '--set', 'egress.extraDomains[0]=example.org'], 'rlmesh-egress-proxy')['checksum/runtime-config']).not.toBe(base);
    expect(ann([...token, '--set', 'controller.replicas=3'], 'rlmesh-egress-proxy')['checksum/runtime-config']).toBe(base);
    const t1 = ann(token, 'rlmesh-cluster-agent')['checksum/join-token'];
    const t2 = ann(['--set', 'joinToken=rlm_jt_another0123456789abcdefgh'], 'rlmesh-cluster-agent')['checksum/join-token'];
    expect(t1).toMatch(/^[a-f0-9]{64}$/);
    expect(t2).not.toBe(t1);
  });
});

describe('NOTES.txt', () => {
  it("prints the spec's four Verify commands for this release", () => {
    const out = template([...token, '--show-only', 'templates/runtime-config.yaml'], {}).stdout;
    expect(out).toContain('rlmesh-runtime-config');
    const notes = readFileSync(join(CHART, 'templates/NOTES.txt'), 'utf8');
    for (const line of [
      'kubectl -n {{ .Release.Namespace }} rollout status deployment/rlmesh-cluster-agent',
      'kubectl -n {{ .Release.Namespace }} rollout status deployment/rlmesh-cluster-controller',
      'kubectl get rlmeshcaches',
      'kubectl -n rlmesh-runs get pods,pvc',
    ])
      expect(notes).toContain(line);
  });
  it('points to rlmesh status and helm test, and says the New install command needs Helm 3.14', () => {
    const notes = readFileSync(join(CHART, 'templates/NOTES.txt'), 'utf8');
    expect(notes).toContain('  rlmesh status -n {{ .Release.Namespace }}\n');
    expect(notes).toContain('it needs Helm 3.14 or later.');
    expect(notes).toContain('  helm test {{ .Release.Name }} -n {{ .Release.Namespace }} --logs\n');
  });
});
