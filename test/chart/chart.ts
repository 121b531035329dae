// Helpers for the chart tests: render the chart with helm, parse every object,
// and the ci/*-values.yaml scenarios.
import { readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse } from 'yaml';
import { helm, type RunResult } from '../support/cluster.ts';
import { KWOK_TOLERATION } from '../support/kwok-outcome.ts';
import { tempDir } from '../support/temp.ts';

export const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
export const CHART = join(root, 'charts/rlmesh-runtime');
export const TOKEN = 'rlm_jt_test0123456789abcdefghijk';
/**
 * Values that put the CRD hook Job on a kwok node, which completes it: its kubectl image needs the pull
 * credential a join writes, and the chart suites' releases never join (their tokens are made up), so on
 * the real node it would wait for its image. test/e2e/spec.test.ts runs the hook for real.
 */
export const HOOK_ON_KWOK = ['--set-json', `crdUpgradeHook.tolerations=${JSON.stringify([KWOK_TOLERATION])}`, '--set', 'crdUpgradeHook.nodeSelector.type=kwok'];
export const KUBE_VERSION = '1.35.4';
/**
 * The Kubernetes API's addresses for a render that cannot read a cluster (helm template, helm lint,
 * ct lint: ct.yaml passes the same), as a GitOps user gives them: an install reads them from the
 * cluster, and without either the chart refuses (network.apiServerAddresses). Documentation and
 * Service-range addresses, so nothing rendered here names a real host.
 */
export const OFFLINE_API_SERVER = ['--set', 'network.apiServerAddresses={10.96.0.1/32,192.0.2.10/32}'];

export const scenarios = (): string[] =>
  readdirSync(join(CHART, 'ci'))
    .filter((f) => f.endsWith('-values.yaml'))
    .sort();

export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: unknown;
};

/** Writes a values object to a temp file for -f. */
export function valuesFile(values: unknown): string {
  const dir = tempDir('rlmesh-chart-');
  const path = join(dir, 'values.yaml');
  writeFileSync(path, JSON.stringify(values));
  return path;
}

/**
 * `helm template` of the chart (or of opts.chart, e.g. a stamped copy) as release rlmesh, with
 * OFFLINE_API_SERVER before `args` (which may override it) unless opts.offlineApiServer is false.
 */
export function template(args: string[], opts: { allowFail?: boolean; namespace?: string; chart?: string; offlineApiServer?: boolean } = {}): RunResult {
  return helm(
    ['template', 'rlmesh', opts.chart ?? CHART, '-n', opts.namespace ?? 'rlmesh-system', '--kube-version', KUBE_VERSION, ...(opts.offlineApiServer === false ? [] : OFFLINE_API_SERVER), ...args],
    { allowFail: opts.allowFail },
  );
}

/** Every object the chart renders (hooks included), by `Kind/namespace/name`. */
export function render(args: string[], namespace = 'rlmesh-system', chart = CHART): Map<string, K8sObject> {
  return renderedObjects(template(args, { namespace, chart }).stdout);
}

/** The objects of `helm template` output, by `Kind/namespace/name`; an object rendered twice is an error. */
export function renderedObjects(out: string): Map<string, K8sObject> {
  const objects = new Map<string, K8sObject>();
  for (const doc of parseAllDocuments(out)) {
    const o = doc.toJS() as K8sObject | null;
    if (!o) continue;
    const key = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    if (objects.has(key)) throw new Error(`rendered twice: ${key}`);
    objects.set(key, o);
  }
  return objects;
}

export function get(objects: Map<string, K8sObject>, kind: string, namespace: string, name: string): K8sObject {
  const o = objects.get(`${kind}/${namespace}/${name}`);
  if (!o) throw new Error(`not rendered: ${kind}/${namespace}/${name}; have ${[...objects.keys()].join(', ')}`);
  return o;
}

export const parseYaml = (s: string): unknown => parse(s);

// the pod spec of anything that has one
export type PodSpec = {
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  securityContext?: Record<string, unknown>;
  containers: Container[];
  initContainers?: Container[];
  volumes?: { name: string; configMap?: { name: string }; persistentVolumeClaim?: { claimName: string }; emptyDir?: { sizeLimit?: string } }[];
  imagePullSecrets?: { name: string }[];
  restartPolicy?: string;
  topologySpreadConstraints?: { maxSkew: number; topologyKey: string; whenUnsatisfiable: string; labelSelector?: LabelSelector }[];
  nodeSelector?: Record<string, string>;
  tolerations?: { key?: string; operator?: string; value?: string; effect?: string }[];
  affinity?: {
    nodeAffinity?: {
      requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms: NodeSelectorTerm[] };
      preferredDuringSchedulingIgnoredDuringExecution?: { weight: number; preference: NodeSelectorTerm }[];
    };
    podAntiAffinity?: {
      requiredDuringSchedulingIgnoredDuringExecution?: PodAffinityTerm[];
      preferredDuringSchedulingIgnoredDuringExecution?: { weight: number; podAffinityTerm: PodAffinityTerm }[];
    };
  };
};
export type NodeSelectorTerm = { matchExpressions?: { key: string; operator: string; values?: string[] }[]; matchFields?: { key: string; operator: string; values?: string[] }[] };
export type LabelSelector = { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] };
type PodAffinityTerm = { topologyKey: string; labelSelector?: LabelSelector };
export type Container = {
  name: string;
  image: string;
  imagePullPolicy?: string;
  args?: string[];
  command?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string }[];
  livenessProbe?: { httpGet?: { path: string } };
  readinessProbe?: { httpGet?: { path: string } };
  ports?: { name: string; containerPort: number }[];
};
export function podTemplate(o: K8sObject): { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec } {
  const spec = o.spec as { template: { metadata: { annotations?: Record<string, string> }; spec: PodSpec } };
  return spec.template;
}
