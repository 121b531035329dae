// The chart's Prometheus version (v3.5.0, built from its Go module by
// build-prometheus.sh: Debian's package lacks Kubernetes service discovery) with
// the chart's prometheus.yml. Discovery is the chart's own kubernetes_sd_configs
// against the real apiserver, authenticated as the chart's ServiceAccount (a
// kubeconfig_file stands in for the in-cluster token), so the chart's Role is
// what lets it list and watch the runtime pods. Kwok pods run no containers: the
// chart's relabelling runs unchanged and one appended rule maps each discovered
// metrics port to 127.0.0.1, where the components' real registries are served.
// It remote-writes to the reference control plane (controlplane/) on 127.0.0.1.
import { spawnSync } from 'node:child_process';
import { renameSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics as agentMetrics } from '../../agent/metrics.ts';
import { createMetrics as controllerMetrics } from '../../controller/metrics.ts';
import { createMetrics as egressMetrics } from '../../egress/metrics.ts';
import { PROMETHEUS_IMAGE } from '../../lib/observability-values-schema.ts';
import { kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { prometheusConfig, renderIntoFreshNamespace, root, type K8sObject } from './chart.ts';
import { activeTargets, freePort, ownMetric, logTail, serveRegistry, startPrometheus, type RunningPrometheus } from './prometheus-run.ts';
import { until as untilFor, type Probe } from '../support/until.ts';
import { joinWithRelay, relayView, rotateRelay, rotationUsed, startTestControlPlane, type RelayCluster, type TestControlPlane } from './control-plane.ts';
import { tempDir } from '../support/temp.ts';

const NS = 'rlmesh-obs-sd';
let cp: TestControlPlane;
let cluster: RelayCluster;
let prometheus: RunningPrometheus;
let credentialFile: string;
let binary: string;
const servers: Server[] = [];
const ports: Record<string, number> = {};
const until = <T>(what: string, probe: Probe<T>) => untilFor(what, probe, { timeoutMs: 40_000, context: () => logTail(prometheus?.log() ?? '') });

const pod = (name: string, labels: Record<string, string>, ports: { name: string; containerPort: number }[]): K8sObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: NS, labels },
  spec: { containers: [{ name: 'main', image: 'registry.rlmesh.dev/rlmesh/rlmesh-runtime:test', ports }] },
});
const runtimePod = (name: string, component: string, port: number) =>
  pod(name, { 'app.kubernetes.io/part-of': 'rlmesh-runtime', 'app.kubernetes.io/component': component, 'rlmesh.dev/metrics': 'true' }, [
    { name: 'metrics', containerPort: port },
    { name: 'health', containerPort: 8081 },
  ]);

function writeCredential(value: string): void {
  writeFileSync(`${credentialFile}.tmp`, value, { mode: 0o600 });
  renameSync(`${credentialFile}.tmp`, credentialFile);
}

beforeAll(async () => {
  const build = spawnSync('bash', [join(root, 'test/observability/build-prometheus.sh')], { encoding: 'utf8', timeout: 1_700_000 });
  if (build.status !== 0) throw new Error(`building Prometheus ${PROMETHEUS_IMAGE.tag} from its Go module failed (test/observability/build-prometheus.sh):\n${build.stderr.slice(-4000)}`);
  binary = build.stdout.trim().split('\n').at(-1)!;
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  expect(version.stdout + version.stderr).toContain(`version ${PROMETHEUS_IMAGE.tag.replace(/^v/, '')}`);

  cp = await startTestControlPlane();
  cluster = await joinWithRelay(cp);
  const agent = agentMetrics({ spoolBytes: () => 0, spoolRecords: () => 0, spoolMaxBytes: 1, credentialAgeSeconds: () => 1 });
  agent.setState('connected');
  const controller = controllerMetrics();
  controller.leader.set({ role: 'evaluations' }, 1);
  const egress = egressMetrics();
  egress.activeTunnels.set(2);
  for (const [name, registry] of [['agent', agent.registry], ['controller', controller.registry], ['egress', egress.registry]] as const) {
    const s = await serveRegistry(registry);
    servers.push(s.server);
    ports[name] = s.port;
  }

  const objects = renderIntoFreshNamespace({ clusterId: cluster.clusterId, controlPlaneUrl: cp.url, ca: cp.ca, namespace: NS });
  const pods = [
    runtimePod('rlmesh-cluster-agent-sd', 'rlmesh-cluster-agent', ports.agent!),
    runtimePod('rlmesh-cluster-controller-sd', 'rlmesh-cluster-controller', ports.controller!),
    // not the runtime's (no part-of label): never discovered
    pod('someone-else', { 'rlmesh.dev/metrics': 'true' }, [{ name: 'metrics', containerPort: ports.egress! }]),
  ];
  kubectl(['apply', '-f', '-'], { input: pods.map((o) => JSON.stringify(o)).join('\n') });

  const dir = tempDir('rlmesh-prometheus-sd-');
  credentialFile = join(dir, 'relay-secret');
  writeCredential(cluster.relay);
  const port = await freePort();
  const cfg = prometheusConfig(objects, NS) as unknown as {
    scrape_configs: { job_name: string; kubernetes_sd_configs?: Record<string, unknown>[]; relabel_configs?: unknown[]; static_configs?: { targets: string[] }[] }[];
    remote_write: { authorization: { credentials_file: string }; tls_config: { ca_file: string } }[];
  };
  const job = cfg.scrape_configs.find((j) => j.job_name === 'rlmesh-runtime')!;
  expect(job.kubernetes_sd_configs).toHaveLength(1);
  job.kubernetes_sd_configs![0]!.kubeconfig_file = await serviceAccountKubeconfig(NS, 'rlmesh-prometheus');
  job.relabel_configs!.push({ source_labels: ['__meta_kubernetes_pod_container_port_number'], target_label: '__address__', replacement: '127.0.0.1:$1' });
  cfg.scrape_configs.find((j) => j.job_name === 'prometheus')!.static_configs![0]!.targets = [`127.0.0.1:${port}`];
  cfg.remote_write[0]!.authorization.credentials_file = credentialFile;
  cfg.remote_write[0]!.tls_config.ca_file = cp.caFile;
  prometheus = await startPrometheus({ binary, config: cfg, dir, port });
}, 1_800_000);

afterAll(async () => {
  await prometheus?.stop();
  for (const s of servers) s.close();
  await cp?.close();
  kubectl(['delete', 'namespace', NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
});

describe(`Prometheus ${PROMETHEUS_IMAGE.tag} with the chart's Kubernetes service discovery`, () => {
  it('discovers the runtime pods as the chart’s ServiceAccount, keeps only their metrics ports and labels them', async () => {
    const targets = await until('two healthy rlmesh-runtime targets', async () => {
      const t = await activeTargets(prometheus.url, 'rlmesh-runtime');
      return t.length === 2 && t.every((x) => x.health === 'up') ? t : undefined;
    });
    expect(targets.map((t) => `${t.labels.pod} ${t.labels.component}`).sort()).toEqual([
      'rlmesh-cluster-agent-sd rlmesh-cluster-agent',
      'rlmesh-cluster-controller-sd rlmesh-cluster-controller',
    ]);
    for (const t of targets) expect(t.labels.namespace).toBe(NS);
    expect(prometheus.log()).not.toMatch(/forbidden/i);
  });

  it('follows the pods through its watch: a new runtime pod is scraped, a deleted one goes', async () => {
    kubectl(['apply', '-f', '-'], { input: JSON.stringify(runtimePod('rlmesh-egress-proxy-sd', 'rlmesh-egress-proxy', ports.egress!)) });
    await until('the egress proxy pod discovered and up', async () =>
      (await activeTargets(prometheus.url, 'rlmesh-runtime')).find((t) => t.labels.pod === 'rlmesh-egress-proxy-sd' && t.health === 'up'),
    );
    kubectl(['-n', NS, 'delete', 'pod', 'rlmesh-cluster-controller-sd', '--wait=false']);
    await until('the deleted controller pod gone from the targets', async () => {
      const t = await activeTargets(prometheus.url, 'rlmesh-runtime');
      return t.some((x) => x.labels.pod === 'rlmesh-cluster-controller-sd') ? undefined : t;
    });
  });

  it('remote-writes (remote write 1.0) to the control plane with cluster=<cluster id> and the credential from the file', async () => {
    const first = (match: Record<string, string>) => async () => (await relayView(cp, cluster.clusterId, match)).matching[0];
    const s = await until('rlmesh_egress_active_tunnels at the control plane', first({ __name__: 'rlmesh_egress_active_tunnels' }));
    expect(s.labels).toMatchObject({ cluster: cluster.clusterId, job: 'rlmesh-runtime', component: 'rlmesh-egress-proxy', pod: 'rlmesh-egress-proxy-sd' });
    expect(s.lastValue).toBe(2);
    await until('agent session state at the control plane', first({ __name__: 'rlmesh_agent_session_state', state: 'connected' }));
  });

  it('rotation in the file is followed; a wrong credential is refused and counted in its remote-write failure metrics', async () => {
    const rotated = await rotateRelay(cp, cluster.clusterId);
    writeCredential(rotated);
    await until('the rotated credential presented to the control plane', () => rotationUsed(cp, cluster.clusterId) || undefined);
    const failed = /^prometheus_remote_storage_samples_failed_total\{[^}]*remote_name="rlmesh-relay-0"/;
    const before = await ownMetric(prometheus.url, failed);
    writeCredential(`rlm_rs_${'1'.repeat(40)}`);
    await until('samples_failed_total to rise', async () => ((await ownMetric(prometheus.url, failed)) > before ? true : undefined));
    await until('the refusal in the Prometheus log', () => (prometheus.log().includes('credential_invalid') ? true : undefined));
    expect(prometheus.proc.exitCode).toBeNull();
  });
});
