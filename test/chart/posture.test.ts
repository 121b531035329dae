// The production posture an independent manifest analyzer checks, on the chart as
// `helm template` renders it for every ci/*-values.yaml scenario, each also with
// gpuFeatureDiscovery.enabled=true (hooks included):
// - every pod template (Deployments, DaemonSets, Jobs, the CRD upgrade hook) is
//   selected by NetworkPolicies of its namespace for both ingress and egress, which
//   exist when the pod runs, and every such namespace denies by default;
// - every workload with two or more replicas has a PodDisruptionBudget that selects
//   it and still lets a drain evict one, and a spread rule by kubernetes.io/hostname;
// - every container and init container has ephemeral-storage requests and limits,
//   the limit at least its request and every emptyDir the pod mounts;
// and the pull-policy rule: Always for an image pulled by tag, IfNotPresent for one
// pinned by digest (its own or, in a released chart, the released one), an explicit
// pullPolicy as it is.
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { matchesSelector } from '../../lib/preflight/label-selector.ts';
import { imageBlocks } from '../../lib/chart-values.ts';
import { CHART_APP_VERSION, defaultValues, KUBECTL_IMAGE, TMP_SIZE_LIMIT } from '../../lib/values-schema.ts';
import { parseQuantity } from '../../lib/quantity.ts';
import { stampDigests } from '../../scripts/release/stamp-digests.ts';
import { CHART, render, scenarios, TOKEN, type Container, type K8sObject, type LabelSelector, type PodSpec } from './chart.ts';
import { tempDir } from '../support/temp.ts';

const token = ['--set', `joinToken=${TOKEN}`];
const HOSTNAME = 'kubernetes.io/hostname';

/** Every render the posture is checked on: each scenario as it is and with GPU discovery on. */
const RENDERS: { name: string; args: string[] }[] = scenarios().flatMap((s) => [
  { name: s, args: ['-f', join(CHART, 'ci', s)] },
  { name: `${s} + gpuFeatureDiscovery.enabled=true`, args: ['-f', join(CHART, 'ci', s), '--set', 'gpuFeatureDiscovery.enabled=true'] },
]);

type Pod = { metadata: { labels?: Record<string, string> }; spec: PodSpec };
type Workload = { o: K8sObject; key: string; ns: string; replicas: number | undefined; pod: Pod };
type Policy = K8sObject & { spec: { podSelector: LabelSelector; policyTypes?: string[]; ingress?: unknown[]; egress?: unknown[] } };
type Pdb = K8sObject & { spec: { selector: LabelSelector; minAvailable?: number | string; maxUnavailable?: number | string } };

/** Everything that makes pods, with its pod template. */
function workloads(objects: Map<string, K8sObject>): Workload[] {
  const out: Workload[] = [];
  for (const o of objects.values()) {
    const spec = o.spec as { replicas?: number; template?: Pod; jobTemplate?: { spec: { template: Pod } } } | undefined;
    let pod: Pod | undefined;
    if (['Deployment', 'StatefulSet', 'ReplicaSet', 'DaemonSet', 'Job'].includes(o.kind)) pod = spec!.template;
    else if (o.kind === 'CronJob') pod = spec!.jobTemplate!.spec.template;
    else if (o.kind === 'Pod') pod = o as unknown as Pod;
    else continue;
    const replicas = ['Deployment', 'StatefulSet', 'ReplicaSet'].includes(o.kind) ? (spec!.replicas ?? 1) : undefined;
    out.push({ o, key: `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`, ns: o.metadata.namespace!, replicas, pod: pod! });
  }
  return out;
}

const ofKind = <T extends K8sObject>(objects: Map<string, K8sObject>, kind: string, ns: string) =>
  [...objects.values()].filter((o) => o.kind === kind && o.metadata.namespace === ns) as T[];

/** A policy's directions: policyTypes, or as the API defaults them (Ingress, plus Egress when it has egress rules). */
const directions = (p: Policy) => p.spec.policyTypes ?? ['Ingress', ...(p.spec.egress ? ['Egress'] : [])];
const hookOf = (o: K8sObject) => ({
  events: (o.metadata.annotations?.['helm.sh/hook'] ?? '').split(',').filter(Boolean),
  weight: Number(o.metadata.annotations?.['helm.sh/hook-weight'] ?? 0),
});
/** A policy that exists while w's pods run: a release object for a release pod; for a hook's pod, one too or a hook of its events created before it. */
function inPlaceFor(policy: K8sObject, w: Workload): boolean {
  const p = hookOf(policy);
  const h = hookOf(w.o);
  if (p.events.length === 0) return true;
  return h.events.length > 0 && h.events.every((e) => p.events.includes(e)) && p.weight < h.weight;
}

function networkPolicyProblems(objects: Map<string, K8sObject>): string[] {
  const problems: string[] = [];
  const w = workloads(objects);
  for (const ns of new Set(w.map((x) => x.ns))) {
    const deny = ofKind<Policy>(objects, 'NetworkPolicy', ns).filter(
      (p) =>
        hookOf(p).events.length === 0 &&
        Object.keys(p.spec.podSelector.matchLabels ?? {}).length === 0 &&
        (p.spec.podSelector.matchExpressions ?? []).length === 0 &&
        ['Ingress', 'Egress'].every((d) => directions(p).includes(d)) &&
        (p.spec.ingress ?? []).length === 0 &&
        (p.spec.egress ?? []).length === 0,
    );
    if (deny.length === 0) problems.push(`namespace ${ns} has pods but no default-deny NetworkPolicy (podSelector {}, Ingress and Egress, no rules)`);
  }
  for (const x of w) {
    const labels = x.pod.metadata.labels ?? {};
    const selecting = ofKind<Policy>(objects, 'NetworkPolicy', x.ns).filter((p) => matchesSelector(p.spec.podSelector, labels));
    const own = selecting.filter((p) => Object.keys(p.spec.podSelector.matchLabels ?? {}).length > 0 || (p.spec.podSelector.matchExpressions ?? []).length > 0);
    if (own.length === 0) problems.push(`${x.key}: no NetworkPolicy of ${x.ns} selects its pods by their labels ${JSON.stringify(labels)}`);
    for (const d of ['Ingress', 'Egress'])
      if (!own.some((p) => directions(p).includes(d))) problems.push(`${x.key}: no NetworkPolicy selecting its pods covers ${d}`);
    for (const p of own) if (!inPlaceFor(p, x)) problems.push(`${x.key}: NetworkPolicy ${p.metadata.name} does not exist yet when its pods run (hook ${JSON.stringify(hookOf(p))} vs ${JSON.stringify(hookOf(x.o))})`);
  }
  return problems;
}

/** A drain may evict one replica of `replicas` under this budget. */
function allowsOneEviction(pdb: Pdb, replicas: number): boolean {
  const count = (v: number | string) => (typeof v === 'number' ? v : Math.ceil((Number(v.replace('%', '')) / 100) * replicas));
  if (pdb.spec.minAvailable !== undefined) return count(pdb.spec.minAvailable) <= replicas - 1;
  if (pdb.spec.maxUnavailable !== undefined) return count(pdb.spec.maxUnavailable) >= 1;
  return false;
}

function spreadsByHostname(pod: Pod): boolean {
  const labels = pod.metadata.labels ?? {};
  const spread = (pod.spec.topologySpreadConstraints ?? []).some((c) => c.topologyKey === HOSTNAME && c.labelSelector && matchesSelector(c.labelSelector, labels));
  const anti = pod.spec.affinity?.podAntiAffinity;
  const terms = [...(anti?.requiredDuringSchedulingIgnoredDuringExecution ?? []), ...(anti?.preferredDuringSchedulingIgnoredDuringExecution ?? []).map((t) => t.podAffinityTerm)];
  return spread || terms.some((t) => t.topologyKey === HOSTNAME && t.labelSelector && matchesSelector(t.labelSelector, labels));
}

function replicaProblems(objects: Map<string, K8sObject>): string[] {
  const problems: string[] = [];
  for (const x of workloads(objects)) {
    if (x.replicas === undefined || x.replicas < 2) continue;
    const labels = x.pod.metadata.labels ?? {};
    const pdbs = ofKind<Pdb>(objects, 'PodDisruptionBudget', x.ns).filter((p) => matchesSelector(p.spec.selector, labels));
    if (pdbs.length === 0) problems.push(`${x.key}: ${x.replicas} replicas and no PodDisruptionBudget selects them`);
    for (const p of pdbs) if (!allowsOneEviction(p, x.replicas)) problems.push(`${x.key}: PodDisruptionBudget ${p.metadata.name} lets a drain evict none of ${x.replicas} replicas`);
    if (!spreadsByHostname(x.pod)) problems.push(`${x.key}: ${x.replicas} replicas and no topology spread constraint or pod anti-affinity by ${HOSTNAME} that selects them`);
  }
  return problems;
}

const containersOf = (spec: PodSpec): Container[] => [...(spec.initContainers ?? []), ...spec.containers];

function storageProblems(objects: Map<string, K8sObject>): string[] {
  const problems: string[] = [];
  for (const x of workloads(objects)) {
    const emptyDirs = (x.pod.spec.volumes ?? []).filter((v) => v.emptyDir);
    for (const v of emptyDirs) if (!v.emptyDir!.sizeLimit) problems.push(`${x.key}: emptyDir ${v.name} has no sizeLimit`);
    for (const c of containersOf(x.pod.spec)) {
      const req = c.resources?.requests?.['ephemeral-storage'];
      const lim = c.resources?.limits?.['ephemeral-storage'];
      if (!req) problems.push(`${x.key} container ${c.name}: no ephemeral-storage request`);
      if (!lim) problems.push(`${x.key} container ${c.name}: no ephemeral-storage limit`);
      if (!lim) continue;
      if (req && parseQuantity(lim) < parseQuantity(req)) problems.push(`${x.key} container ${c.name}: ephemeral-storage limit ${lim} below its request ${req}`);
      for (const v of emptyDirs)
        if (v.emptyDir!.sizeLimit && parseQuantity(lim) < parseQuantity(v.emptyDir!.sizeLimit))
          problems.push(`${x.key} container ${c.name}: ephemeral-storage limit ${lim} below emptyDir ${v.name}'s ${v.emptyDir!.sizeLimit}`);
    }
  }
  return problems;
}

describe.each(RENDERS)('posture of the rendered chart: $name', ({ args }) => {
  const objects = render(args);

  it('renders the pods the analyzer looks at', () => {
    const kinds = workloads(objects).map((x) => x.key);
    expect(kinds).toEqual(expect.arrayContaining(['Deployment/rlmesh-system/rlmesh-cluster-agent', 'Deployment/rlmesh-system/rlmesh-cluster-controller', 'Job/rlmesh-system/rlmesh-crd-upgrade']));
    if (args.includes('gpuFeatureDiscovery.enabled=true')) expect(kinds).toContain('DaemonSet/rlmesh-system/rlmesh-gpu-feature-discovery');
  });

  it('every pod is fenced: a default-deny in its namespace and NetworkPolicies of its own for ingress and egress', () => {
    expect(networkPolicyProblems(objects)).toEqual([]);
  });

  it('every multi-replica workload has a PodDisruptionBudget that allows a drain and a spread rule by hostname', () => {
    expect(workloads(objects).filter((x) => (x.replicas ?? 0) >= 2).length).toBeGreaterThanOrEqual(2);
    expect(replicaProblems(objects)).toEqual([]);
  });

  it('every container and init container has ephemeral-storage requests and limits covering its emptyDirs', () => {
    expect(storageProblems(objects)).toEqual([]);
  });
});

describe('the posture checks themselves', () => {
  const objects = render(token);
  const without = (pred: (o: K8sObject) => boolean) => new Map([...objects].filter(([, o]) => !pred(o)));

  it('fail a pod no policy selects, a namespace without default-deny, a hook pod whose policy comes after it', () => {
    expect(networkPolicyProblems(without((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'rlmesh-gpu-feature-discovery'))).toEqual([
      expect.stringContaining('DaemonSet/rlmesh-system/rlmesh-gpu-feature-discovery: no NetworkPolicy'),
      expect.stringContaining('DaemonSet/rlmesh-system/rlmesh-gpu-feature-discovery: no NetworkPolicy selecting its pods covers Ingress'),
      expect.stringContaining('DaemonSet/rlmesh-system/rlmesh-gpu-feature-discovery: no NetworkPolicy selecting its pods covers Egress'),
    ]);
    expect(networkPolicyProblems(without((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'rlmesh-default-deny'))).toEqual([
      expect.stringContaining('namespace rlmesh-system has pods but no default-deny'),
    ]);
    const late = structuredClone(objects);
    late.get('NetworkPolicy/rlmesh-system/rlmesh-crd-upgrade')!.metadata.annotations!['helm.sh/hook-weight'] = '5';
    expect(networkPolicyProblems(late)).toEqual([expect.stringContaining('Job/rlmesh-system/rlmesh-crd-upgrade: NetworkPolicy rlmesh-crd-upgrade does not exist yet')]);
  });

  it('fail a multi-replica workload without a budget or a spread rule', () => {
    const bare = structuredClone(without((o) => o.kind === 'PodDisruptionBudget' && o.metadata.name === 'rlmesh-cluster-controller'));
    delete (bare.get('Deployment/rlmesh-system/rlmesh-cluster-controller')!.spec as { template: Pod }).template.spec.topologySpreadConstraints;
    expect(replicaProblems(bare)).toEqual([
      expect.stringContaining('rlmesh-cluster-controller: 2 replicas and no PodDisruptionBudget'),
      expect.stringContaining('rlmesh-cluster-controller: 2 replicas and no topology spread constraint'),
    ]);
  });

  it('fail a container without ephemeral storage, or with less than its emptyDir', () => {
    const o = structuredClone(objects);
    const c = (o.get('Job/rlmesh-system/rlmesh-crd-upgrade')!.spec as { template: Pod }).template.spec.containers[0]!;
    delete c.resources!.requests!['ephemeral-storage'];
    c.resources!.limits!['ephemeral-storage'] = '32Mi';
    expect(storageProblems(o)).toEqual([
      'Job/rlmesh-system/rlmesh-crd-upgrade container kubectl: no ephemeral-storage request',
      `Job/rlmesh-system/rlmesh-crd-upgrade container kubectl: ephemeral-storage limit 32Mi below emptyDir tmp's ${TMP_SIZE_LIMIT}`,
    ]);
  });
});

describe('replicas, budgets and spreading follow the values', () => {
  const pdb = (o: Map<string, K8sObject>, name: string) => o.get(`PodDisruptionBudget/rlmesh-system/${name}`) as Pdb | undefined;
  const spread = (o: Map<string, K8sObject>, name: string) => (o.get(`Deployment/rlmesh-system/${name}`)!.spec as { template: Pod }).template.spec.topologySpreadConstraints;

  it('defaults: a soft spread by hostname (a single-node cluster still schedules every replica) and minAvailable 1', () => {
    const o = render(token);
    for (const name of ['rlmesh-cluster-controller', 'rlmesh-egress-proxy']) {
      expect(pdb(o, name)?.spec).toEqual({ minAvailable: 1, selector: { matchLabels: { 'app.kubernetes.io/name': name, 'app.kubernetes.io/instance': 'rlmesh' } } });
      expect(spread(o, name)).toEqual([
        {
          maxSkew: 1,
          topologyKey: HOSTNAME,
          whenUnsatisfiable: 'ScheduleAnyway',
          nodeTaintsPolicy: 'Honor',
          labelSelector: { matchLabels: { 'app.kubernetes.io/name': name, 'app.kubernetes.io/instance': 'rlmesh' } },
        },
      ]);
    }
  });

  it('more replicas keep the posture; one replica has no budget (it would block every drain)', () => {
    const more = render([...token, '--set', 'controller.replicas=3', '--set', 'egress.replicas=4']);
    expect(replicaProblems(more)).toEqual([]);
    const one = render([...token, '--set', 'controller.replicas=1', '--set', 'egress.replicas=1']);
    expect([...one.values()].filter((x) => x.kind === 'PodDisruptionBudget')).toEqual([]);
  });

  it('topologySpread values: a hard rule, a larger skew, and zones besides nodes', () => {
    const o = render([
      ...token,
      '--set', 'controller.topologySpread.whenUnsatisfiable=DoNotSchedule',
      '--set', 'egress.topologySpread.maxSkew=2',
      '--set', `egress.topologySpread.topologyKeys={${HOSTNAME},topology.kubernetes.io/zone}`,
    ]);
    expect(spread(o, 'rlmesh-cluster-controller')).toMatchObject([{ topologyKey: HOSTNAME, whenUnsatisfiable: 'DoNotSchedule', maxSkew: 1 }]);
    expect(spread(o, 'rlmesh-egress-proxy')).toMatchObject([
      { topologyKey: HOSTNAME, whenUnsatisfiable: 'ScheduleAnyway', maxSkew: 2 },
      { topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway', maxSkew: 2 },
    ]);
    expect(replicaProblems(o)).toEqual([]);
  });

  it('ephemeral storage follows the values', () => {
    const o = render([...token, '--set', 'agent.resources.requests.ephemeral-storage=128Mi', '--set', 'agent.resources.limits.ephemeral-storage=1Gi']);
    const c = (o.get('Deployment/rlmesh-system/rlmesh-cluster-agent')!.spec as { template: Pod }).template.spec.containers[0]!;
    expect(c.resources).toMatchObject({ requests: { 'ephemeral-storage': '128Mi' }, limits: { 'ephemeral-storage': '1Gi' } });
    const d = defaultValues().controller.resources;
    const ctl = (o.get('Deployment/rlmesh-system/rlmesh-cluster-controller')!.spec as { template: Pod }).template.spec.containers[0]!;
    expect(ctl.resources).toEqual(d);
  });
});

/** imagePullPolicy and image of every container, by workload/container. */
function pulls(objects: Map<string, K8sObject>): Record<string, { image: string; policy: string | undefined }> {
  const out: Record<string, { image: string; policy: string | undefined }> = {};
  for (const x of workloads(objects)) for (const c of containersOf(x.pod.spec)) out[`${x.o.metadata.name}/${c.name}`] = { image: c.image, policy: c.imagePullPolicy };
  return out;
}
const IMAGE_PATHS = imageBlocks(defaultValues()).map((b) => b.path);
const DIGEST = `sha256:${'cd'.repeat(32)}`;

describe('imagePullPolicy: IfNotPresent when pinned by digest, Always when pulled by tag, an explicit value as it is', () => {
  it('the unreleased chart pulls by tag: every container Always', () => {
    const all = Object.values(pulls(render(token)));
    expect(all.length).toBeGreaterThanOrEqual(6);
    for (const p of all) expect(p).toEqual({ image: expect.not.stringContaining('@'), policy: 'Always' });
  });

  it.each(IMAGE_PATHS)('--set %s.digest=sha256:…: that image IfNotPresent, the others still Always', (path) => {
    const all = pulls(render([...token, '--set', `${path}.digest=${DIGEST}`]));
    const pinned = Object.entries(all).filter(([, p]) => p.image.endsWith(`@${DIGEST}`));
    expect(pinned.length, path).toBeGreaterThanOrEqual(1);
    for (const [where, p] of Object.entries(all)) expect(p.policy, where).toBe(p.image.includes('@') ? 'IfNotPresent' : 'Always');
  });

  it.each(IMAGE_PATHS)('an explicit %s.pullPolicy wins, pinned or not', (path) => {
    const tagged = pulls(render([...token, '--set', `${path}.pullPolicy=IfNotPresent`]));
    expect(Object.values(tagged).filter((p) => p.policy === 'IfNotPresent').length, path).toBeGreaterThanOrEqual(1);
    const pinned = pulls(render([...token, '--set', `${path}.digest=${DIGEST}`, '--set', `${path}.pullPolicy=Always`]));
    const mine = Object.values(pinned).filter((p) => p.image.endsWith(`@${DIGEST}`));
    expect(mine.length).toBeGreaterThanOrEqual(1);
    for (const p of mine) expect(p.policy).toBe('Always');
    const never = pulls(render([...token, '--set', `${path}.pullPolicy=Never`]));
    expect(Object.values(never).filter((p) => p.policy === 'Never').length).toBe(mine.length);
  });

  it('a released chart pins every image by the released digest: IfNotPresent; an override by tag pulls that tag Always', () => {
    const copy = join(tempDir('rlmesh-released-'), 'rlmesh-runtime');
    cpSync(CHART, copy, { recursive: true });
    const runtime = `sha256:${'1a'.repeat(32)}`;
    const kubectl = `sha256:${'2b'.repeat(32)}`;
    stampDigests(copy, { 'rlmesh-runtime': { tag: CHART_APP_VERSION, digest: runtime }, kubectl: { tag: KUBECTL_IMAGE.tag, digest: kubectl } });
    const released = Object.values(pulls(render(token, 'rlmesh-system', copy)));
    expect(released.length).toBeGreaterThanOrEqual(6);
    for (const p of released) {
      expect(p.image).toMatch(new RegExp(`@(${runtime}|${kubectl})$`));
      expect(p.policy).toBe('IfNotPresent');
    }
    const override = pulls(render([...token, '--set', 'agent.image.tag=0.2.0-hotfix', '--set', 'agent.image.repository=mirror.example.com/rlmesh/rlmesh-runtime'], 'rlmesh-system', copy));
    expect(override['rlmesh-cluster-agent/agent']).toEqual({ image: 'mirror.example.com/rlmesh/rlmesh-runtime:0.2.0-hotfix', policy: 'Always' });
    expect(override['rlmesh-cluster-controller/controller']!.policy).toBe('IfNotPresent');
  });
});
