// Helpers for the rlmesh-observability chart tests: render it with helm, parse
// every object, its ci/*-values.yaml scenarios and the rendered prometheus.yml.
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { helm, kubectl, type RunResult } from '../support/cluster.ts';
import { KUBE_VERSION, OFFLINE_API_SERVER, renderedObjects, valuesFile, type K8sObject } from '../chart/chart.ts';

export const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
export const CHART = join(root, 'charts/rlmesh-observability');
export const CLUSTER = 'c_4k2m9x7q1w8e3r5t6y0u';

export const scenarios = (): string[] =>
  readdirSync(join(CHART, 'ci'))
    .filter((f) => f.endsWith('-values.yaml'))
    .sort();

export { KUBE_VERSION, OFFLINE_API_SERVER, valuesFile, type K8sObject };

/** `helm template` of the chart, with OFFLINE_API_SERVER (as the runtime chart's tests) unless opts.offlineApiServer is false. */
export function template(args: string[], opts: { allowFail?: boolean; namespace?: string; offlineApiServer?: boolean } = {}): RunResult {
  return helm(
    ['template', 'rlmesh-observability', CHART, '-n', opts.namespace ?? 'rlmesh-system', '--kube-version', KUBE_VERSION, ...(opts.offlineApiServer === false ? [] : OFFLINE_API_SERVER), ...args],
    { allowFail: opts.allowFail },
  );
}

export function render(args: string[], namespace = 'rlmesh-system'): Map<string, K8sObject> {
  return renderedObjects(template(args, { namespace }).stdout);
}

/**
 * The chart rendered for a cluster joined with a relay (remote write to the
 * control plane, scraping every second), into a namespace created afresh with
 * the chart's ServiceAccount, Role and RoleBinding applied, as Prometheus runs
 * under them.
 */
export function renderIntoFreshNamespace(o: { clusterId: string; controlPlaneUrl: string; ca: string; namespace: string }): Map<string, K8sObject> {
  const values = {
    prometheus: {
      clusterLabel: o.clusterId,
      runtimeNamespace: o.namespace,
      scrapeInterval: '1s',
      caBundle: o.ca,
      remoteWrite: [{ url: `${o.controlPlaneUrl}/v1/cells/${o.clusterId}/metrics`, queue_config: { batch_send_deadline: '1s', min_backoff: '100ms', max_backoff: '1s' } }],
    },
  };
  const objects = render(['-f', valuesFile(values)], o.namespace);
  kubectl(['delete', 'namespace', o.namespace, '--ignore-not-found', '--wait=true']);
  kubectl(['create', 'namespace', o.namespace]);
  const rbac = [...objects.values()].filter((x) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(x.kind));
  if (rbac.map((x) => x.kind).sort().join() !== 'Role,RoleBinding,ServiceAccount') {
    throw new Error(`the chart rendered ${rbac.map((x) => x.kind).join(', ') || 'none'} of its ServiceAccount, Role and RoleBinding`);
  }
  kubectl(['apply', '-f', '-'], { input: rbac.map((x) => JSON.stringify(x)).join('\n') });
  return objects;
}

export function get(objects: Map<string, K8sObject>, kind: string, name: string, namespace = 'rlmesh-system'): K8sObject {
  const o = objects.get(`${kind}/${namespace}/${name}`);
  if (!o) throw new Error(`not rendered: ${kind}/${namespace}/${name}; have ${[...objects.keys()].join(', ')}`);
  return o;
}

export type PrometheusConfig = {
  global: { scrape_interval: string; external_labels: Record<string, string> };
  scrape_configs: Record<string, unknown>[] & { job_name: string }[];
  remote_write?: {
    name: string;
    url: string;
    authorization: { type: string; credentials_file: string };
    tls_config?: { ca_file: string };
    queue_config?: Record<string, unknown>;
  }[];
};

/** The prometheus.yml the chart renders into ConfigMap rlmesh-prometheus-config. */
export function prometheusConfig(objects: Map<string, K8sObject>, namespace = 'rlmesh-system'): PrometheusConfig {
  const cm = get(objects, 'ConfigMap', 'rlmesh-prometheus-config', namespace) as K8sObject & { data: Record<string, string> };
  return parse(cm.data['prometheus.yml']!) as PrometheusConfig;
}

export type PodSpec = {
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  securityContext?: Record<string, unknown>;
  imagePullSecrets?: { name: string }[];
  nodeSelector?: Record<string, string>;
  containers: {
    name: string;
    image: string;
    args?: string[];
    env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
    securityContext?: Record<string, unknown>;
    resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
    volumeMounts?: { name: string; mountPath: string; subPath?: string; readOnly?: boolean }[];
  }[];
  volumes?: { name: string; secret?: { secretName: string; items?: { key: string; path: string }[] }; configMap?: { name: string }; emptyDir?: Record<string, unknown> }[];
};

export function podTemplate(o: K8sObject): { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec } {
  return (o.spec as { template: { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec } }).template;
}
