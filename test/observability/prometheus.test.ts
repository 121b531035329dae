// A real Prometheus (Debian's /usr/bin/prometheus, started here) runs the
// prometheus.yml the chart renders. Only what cannot exist outside a pod is
// rewritten: Debian builds Prometheus without Kubernetes service discovery and
// no pod runs here, so the discovery becomes static 127.0.0.1 targets carrying
// the same __meta_kubernetes_* labels Kubernetes SD gives a runtime pod (the
// chart's relabelling runs on them unchanged), where the components' real
// prom-client registries are served; the file paths of the relay credential and
// CA point into a temp dir. The discovery's rights are checked separately: the
// chart's ServiceAccount lists the runtime pods with the chart's selector
// against the real apiserver, and nothing else. Prometheus remote-writes to the
// reference control plane's relay (controlplane/, on 127.0.0.1)
// with the credential from the file; rotation in the file is followed without a
// restart, and a wrong credential is refused and counted by Prometheus itself.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics as agentMetrics } from '../../agent/metrics.ts';
import { createMetrics as controllerMetrics } from '../../controller/metrics.ts';
import { createMetrics as egressMetrics } from '../../egress/metrics.ts';
import { kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { CHART, prometheusConfig, renderIntoFreshNamespace, type K8sObject } from './chart.ts';
import { activeTargets, freePort, ownMetric, logTail, serveRegistry, startPrometheus, type RunningPrometheus } from './prometheus-run.ts';
import { until as untilFor, type Probe } from '../support/until.ts';
import { joinWithRelay, relayView, rotateRelay, rotationUsed, startTestControlPlane, type RelayCluster, type TestControlPlane } from './control-plane.ts';
import { tempDir } from '../support/temp.ts';

const PROMETHEUS = '/usr/bin/prometheus';
const PROMTOOL = '/usr/bin/promtool';
const NS = 'rlmesh-obs-e2e';

let cp: TestControlPlane;
let cluster: RelayCluster;
let prometheus: RunningPrometheus;
let credentialFile: string;
let saKubeconfig: string;
let selector: string;
const metricServers: Server[] = [];
const until = <T>(what: string, probe: Probe<T>) => untilFor(what, probe, { timeoutMs: 30_000, context: () => logTail(prometheus?.log() ?? '') });
async function serve(registry: Parameters<typeof serveRegistry>[0]): Promise<number> {
  const { port, server } = await serveRegistry(registry);
  metricServers.push(server);
  return port;
}

/** Replaces the file the way the kubelet updates a Secret volume: a new file swapped in atomically. */
function writeCredential(value: string): void {
  const tmp = `${credentialFile}.tmp`;
  writeFileSync(tmp, value, { mode: 0o600 });
  renameSync(tmp, credentialFile);
}

const FAILED = /^prometheus_remote_storage_(samples_failed_total|failed_samples_total)\{[^}]*remote_name="rlmesh-relay-0"/;

function pod(name: string, labels: Record<string, string>, ports: { name: string; containerPort: number }[]): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, labels },
    spec: { containers: [{ name: 'main', image: 'registry.rlmesh.dev/rlmesh/rlmesh-runtime:test', ports }] },
  };
}
const runtimeLabels = (component: string) => ({
  'app.kubernetes.io/part-of': 'rlmesh-runtime',
  'app.kubernetes.io/component': component,
  'rlmesh.dev/metrics': 'true',
});

beforeAll(async () => {
  if (!existsSync(PROMETHEUS))
    throw new Error(`${PROMETHEUS} is missing: install Debian's prometheus package (test/install-deps.sh does: apt-get install prometheus)`);
  cp = await startTestControlPlane();
  cluster = await joinWithRelay(cp);

  // the components' own registries, with values the assertions look for
  const agent = agentMetrics({ spoolBytes: () => 2048, spoolRecords: () => 3, spoolMaxBytes: 1 << 20, credentialAgeSeconds: () => 42 });
  agent.setState('connected');
  const controller = controllerMetrics();
  controller.phaseTransitions.inc({ phase: 'Succeeded', reason: 'Completed' }, 3);
  controller.cacheCapacityBytes.set(100e9);
  controller.leader.set({ role: 'evaluations' }, 1);
  const egress = egressMetrics();
  egress.decisions.inc({ outcome: 'refused', rule: 'private-address' });
  const ports = { agent: await serve(agent.registry), controller: await serve(controller.registry), egress: await serve(egress.registry) };

  // the chart, rendered for this cluster, installed namespace and relay
  const objects = renderIntoFreshNamespace({ clusterId: cluster.clusterId, controlPlaneUrl: cp.url, ca: cp.ca, namespace: NS });
  const pods = [
    pod('rlmesh-cluster-agent-e2e', runtimeLabels('rlmesh-cluster-agent'), [{ name: 'metrics', containerPort: 9090 }, { name: 'health', containerPort: 8081 }]),
    pod('rlmesh-cluster-controller-e2e', runtimeLabels('rlmesh-cluster-controller'), [{ name: 'metrics', containerPort: 9090 }]),
    pod('rlmesh-egress-proxy-e2e', runtimeLabels('rlmesh-egress-proxy'), [{ name: 'metrics', containerPort: 9090 }]),
    // not the runtime's: never discovered
    pod('someone-else', { app: 'someone-else', 'rlmesh.dev/metrics': 'true' }, [{ name: 'metrics', containerPort: 9090 }]),
  ];
  kubectl(['apply', '-f', '-'], { input: pods.map((o) => JSON.stringify(o)).join('\n') });
  saKubeconfig = await serviceAccountKubeconfig(NS, 'rlmesh-prometheus');

  // prometheus.yml as the chart renders it, with the out-of-cluster rewrites
  const dir = tempDir('rlmesh-prometheus-');
  credentialFile = join(dir, 'relay-secret');
  writeCredential(cluster.relay);
  const promPort = await freePort();
  const cfg = prometheusConfig(objects, NS) as unknown as {
    scrape_configs: { job_name: string; kubernetes_sd_configs?: Record<string, unknown>[]; relabel_configs?: unknown[]; static_configs?: { targets: string[]; labels?: Record<string, string> }[] }[];
    remote_write: { authorization: { credentials_file: string }; tls_config: { ca_file: string } }[];
  };
  const runtimeJob = cfg.scrape_configs.find((j) => j.job_name === 'rlmesh-runtime')!;
  selector = (runtimeJob.kubernetes_sd_configs![0] as { selectors: { label: string }[] }).selectors[0]!.label;
  // what Kubernetes SD (role: pod) yields for each container port of a runtime pod
  const target = (port: number, component: string, portName = 'metrics') => ({
    targets: [`127.0.0.1:${port}`],
    labels: {
      __meta_kubernetes_namespace: NS,
      __meta_kubernetes_pod_name: `${component}-e2e`,
      __meta_kubernetes_pod_phase: 'Running',
      __meta_kubernetes_pod_container_port_name: portName,
      __meta_kubernetes_pod_label_app_kubernetes_io_component: component,
    },
  });
  delete runtimeJob.kubernetes_sd_configs;
  runtimeJob.static_configs = [
    target(ports.agent, 'rlmesh-cluster-agent'),
    target(ports.controller, 'rlmesh-cluster-controller'),
    target(ports.egress, 'rlmesh-egress-proxy'),
    // the agent's health port: the chart's relabelling must drop it
    target(ports.agent, 'rlmesh-cluster-agent', 'health'),
  ];
  cfg.scrape_configs.find((j) => j.job_name === 'prometheus')!.static_configs![0]!.targets = [`127.0.0.1:${promPort}`];
  expect(cfg.remote_write[0]!.authorization.credentials_file).toBe('/etc/rlmesh/relay/relay-secret');
  cfg.remote_write[0]!.authorization.credentials_file = credentialFile;
  cfg.remote_write[0]!.tls_config.ca_file = cp.caFile;
  prometheus = await startPrometheus({ binary: PROMETHEUS, promtool: PROMTOOL, config: cfg, dir, port: promPort });
});

afterAll(async () => {
  await prometheus?.stop();
  for (const s of metricServers) s.close();
  await cp?.close();
  kubectl(['delete', 'namespace', NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
});

describe('Prometheus with the chart configuration', () => {
  it('the chart’s ServiceAccount lists and watches the runtime pods with the chart’s selector, and nothing else', async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(saKubeconfig);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const listed = await core.listNamespacedPod({ namespace: NS, labelSelector: selector });
    expect(listed.items.map((p) => p.metadata?.name).sort()).toEqual(['rlmesh-cluster-agent-e2e', 'rlmesh-cluster-controller-e2e', 'rlmesh-egress-proxy-e2e']);
    const as = `--as=system:serviceaccount:${NS}:rlmesh-prometheus`;
    const can = (args: string[]) => kubectl(['auth', 'can-i', as, ...args], { allowFail: true }).stdout.trim();
    expect(can(['list', 'pods', '-n', NS])).toBe('yes');
    expect(can(['watch', 'pods', '-n', NS])).toBe('yes');
    for (const denied of [['get', 'secrets', '-n', NS], ['list', 'secrets', '-n', NS], ['list', 'pods', '-n', 'default'], ['list', 'pods', '-A'], ['create', 'pods', '-n', NS], ['list', 'nodes'], ['create', 'pods/exec', '-n', NS]])
      expect(can(denied), denied.join(' ')).toBe('no');
  });

  it('scrapes the runtime components’ metrics ports with the chart’s relabelling (component, namespace, pod) and drops other ports', async () => {
    const targets = await until('three healthy rlmesh-runtime targets', async () => {
      const t = await activeTargets(prometheus.url, 'rlmesh-runtime');
      return t.length === 3 && t.every((x) => x.health === 'up') ? t : undefined;
    });
    expect(targets.map((t) => t.labels.component).sort()).toEqual(['rlmesh-cluster-agent', 'rlmesh-cluster-controller', 'rlmesh-egress-proxy']);
    for (const t of targets) expect(t.labels).toMatchObject({ namespace: NS, job: 'rlmesh-runtime', pod: `${t.labels.component}-e2e` });
    const dropped = (await (await fetch(`${prometheus.url}/api/v1/targets?state=dropped`)).json()) as { data: { droppedTargets: { discoveredLabels: Record<string, string> }[] } };
    expect(dropped.data.droppedTargets.map((d) => d.discoveredLabels.__meta_kubernetes_pod_container_port_name)).toContain('health');
  });

  it('remote-writes every series labelled cluster=<cluster id> through the relay credential file', async () => {
    const first = (match: Record<string, string>) => async () => (await relayView(cp, cluster.clusterId, match)).matching[0];
    const connected = await until('rlmesh_agent_session_state{state="connected"} at the control plane', first({ __name__: 'rlmesh_agent_session_state', state: 'connected' }));
    expect(connected.labels).toMatchObject({ cluster: cluster.clusterId, job: 'rlmesh-runtime', component: 'rlmesh-cluster-agent', namespace: NS });
    expect(connected.lastValue).toBe(1);
    const succeeded = await until('controller phase transitions at the control plane', first({ __name__: 'rlmesh_controller_phase_transitions_total', phase: 'Succeeded' }));
    expect(succeeded.lastValue).toBe(3);
    await until('egress decisions at the control plane', first({ __name__: 'rlmesh_egress_decisions_total', outcome: 'refused' }));
    // Prometheus's own metrics travel too (the platform sees remote-write health)
    await until('prometheus self-scrape at the control plane', first({ __name__: 'up', job: 'prometheus' }));
    const all = await relayView(cp, cluster.clusterId);
    expect(all.series).toBeGreaterThan(100);
    expect(all.matching.every((s) => s.labels.cluster === cluster.clusterId)).toBe(true);
  });

  it('follows a rotated credential written into the file, without a restart', async () => {
    const pid = prometheus.proc.pid;
    const rotated = await rotateRelay(cp, cluster.clusterId);
    // until the file changes Prometheus keeps sending the old value (valid for the 24 h overlap)
    await new Promise((r) => setTimeout(r, 2500));
    expect(rotationUsed(cp, cluster.clusterId)).toBe(false);
    writeCredential(rotated);
    await until('the rotated credential presented to the control plane', () => rotationUsed(cp, cluster.clusterId) || undefined);
    const samples = (await relayView(cp, cluster.clusterId)).samples;
    await until('more samples after the rotation', async () => ((await relayView(cp, cluster.clusterId)).samples > samples ? true : undefined));
    expect(prometheus.proc.exitCode).toBeNull();
    expect(prometheus.proc.pid).toBe(pid);
    cluster = { ...cluster, relay: rotated };
  });

  it('a wrong credential is refused (401) and shows in Prometheus’s own remote-write failure metrics; the right one recovers', async () => {
    const failedBefore = await ownMetric(prometheus.url, FAILED);
    writeCredential(`rlm_rs_${'0'.repeat(40)}`);
    const failed = await until('prometheus_remote_storage_samples_failed_total to rise', async () => {
      const v = await ownMetric(prometheus.url, FAILED);
      return v > failedBefore ? v : undefined;
    });
    expect(failed).toBeGreaterThan(failedBefore);
    // Prometheus logs the control plane's answer: status and the {code, message} body
    await until('the refusal in the Prometheus log', () => /401/.test(prometheus.log()) && prometheus.log().includes('credential_invalid') ? true : undefined);

    writeCredential(cluster.relay);
    const requests = (await relayView(cp, cluster.clusterId)).requests;
    await until('accepted again after the right credential is back', async () => ((await relayView(cp, cluster.clusterId)).requests > requests ? true : undefined));
    expect(prometheus.proc.exitCode).toBeNull();
  });

  it('every query of the Grafana dashboard runs on this Prometheus; connection, phases and egress have data', async () => {
    const dashboard = JSON.parse(readFileSync(join(CHART, 'files/dashboards/rlmesh-runtime.json'), 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const results = new Map<string, number>();
    for (const panel of dashboard.panels)
      for (const t of panel.targets ?? []) {
        const query = t.expr.replaceAll('$__range', '5m');
        const res = (await (await fetch(`${prometheus.url}/api/v1/query?${new URLSearchParams({ query })}`)).json()) as { status: string; error?: string; data?: { result: unknown[] } };
        expect(res.status, `${panel.title}: ${query}: ${res.error}`).toBe('success');
        results.set(panel.title, (results.get(panel.title) ?? 0) + (res.data?.result.length ?? 0));
      }
    for (const title of ['Agent session', 'Session state', 'Evaluations by phase (transitions in range)', 'Decisions by outcome', 'Controller leader'])
      expect(results.get(title), title).toBeGreaterThan(0);
  });
});
