// Scale benchmark (not a test): Kubernetes' own scalability envelope, 5,000
// kwok nodes (200 with 8 GPUs) and 150,000 pods (running pods spread over the
// CPU nodes, there before the chart is installed), 200 evaluations in flight
// on top, the chart's agent, controller, cache filler and egress proxy running
// as real pods on the cluster's real node. Prints the time from helm install
// to the agent's first report of every node (its informers' first list), the
// agent's and the controller leader's memory (cgroup usage and peak, sampled
// from Connected on) and CPU (cpuacct) as soon as each step is through,
// node-report latency (a node change -> the report's arrival at the control
// plane, beside the agent's own share from its histogram), and the time from
// submission to pod Running. Uses a cluster of its own (stop the
// test cluster first: both would need the real node's network names) and
// stops it at the end.
//
//   node test/bench/scale.ts [--nodes 5000] [--gpu-nodes 200] [--pods 150000] [--evaluations 200]
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: a } = parseArgs({ options: { nodes: { type: 'string', default: '5000' }, 'gpu-nodes': { type: 'string', default: '200' }, pods: { type: 'string', default: '150000' }, evaluations: { type: 'string', default: '200' } } });
const total = Number(a.nodes);
const gpu = Number(a['gpu-nodes']);
const backgroundPods = Number(a.pods);
const evaluations = Number(a.evaluations);
process.env.RLMESH_KWOK_POD_CIDR = '10.244.0.0/14'; // room for 150,000 pod addresses
process.env.RLMESH_CLUSTER_DIR = join(homedir(), '.cache/rlmesh-cluster-scale');
process.env.RLMESH_KWOK_NODES = String(total - gpu);
process.env.RLMESH_KWOK_GPU_NODES = String(gpu);
// evaluations stay in flight for the measurement: without the stages that finish pods, which would also
// cost kwok a selector evaluation per stage on each of 150,000 pods' events
process.env.RLMESH_KWOK_FINISH = '0';
// kwok nodes start tainted, so that the chart's pods and the controller's NetworkPolicy probe (which
// select no node) land on the real node; the taint goes once the chart runs, and evaluations that
// select kwok nodes land there (the platform's evaluation spec carries no tolerations)
process.env.RLMESH_KWOK_TAINT = '1';
// kwok's default of 4 patches at once trails 150,000 pods by most of an hour on this machine (about 17 pod
// patches/s once the apiserver is loaded) and lets some of 5,000 node leases expire
process.env.RLMESH_KWOK_PARALLELISM = '32';
// a kubelet renews its Lease every 10 s: from 5,000 nodes, 500 writes/s, about five times what this
// machine's apiserver writes in all, so the pods' creates and kwok's own status patches queued behind the
// renewals, late renewals let the node lifecycle controller mark nodes and their pods not ready, and kwok
// then wrote every pod's readiness back. Renewed every 5 minutes instead (17 writes/s), with a grace
// period as long as the Lease, as kubelet's 40 s default is
process.env.RLMESH_KWOK_LEASE_SECONDS = '1200';
process.env.RLMESH_NODE_MONITOR_GRACE = '1200s';

const { ROOT, api, writeTemp } = await import('../support/runtime.ts');
const { until } = await import('../support/until.ts');
const { pool } = await import('../support/pool.ts');
const { adminKubeConfig, kubectl } = await import('../support/cluster.ts');
const k8s = await import('@kubernetes/client-node');
const { MERGE_PATCH } = await import('../../lib/kube-errors.ts');
const h = await import('../e2e/harness.ts');
const { podCgroupDir, realNodes } = await import('../cluster/real-node.ts');

/** The real node a pod runs on. */
const realNodeOf = (p: { metadata: { name: string }; spec: { nodeName?: string } }) => {
  const node = realNodes().find((n) => n.name === p.spec.nodeName);
  if (!node) throw new Error(`pod ${p.metadata.name} is not on a real node`);
  return node;
};
/** A pod's memory (cgroup usage, which counts page cache too, and its RSS from memory.stat) and CPU seconds so far, from its cgroups on the real node. */
const sample = (p: { metadata: { name: string; uid: string }; spec: { nodeName?: string } }) => {
  const node = realNodeOf(p);
  const read = (hierarchy: string, file: string) => Number(readFileSync(join(podCgroupDir(node, p.metadata.uid, hierarchy), file), 'utf8'));
  const stat = readFileSync(join(podCgroupDir(node, p.metadata.uid, 'memory'), 'memory.stat'), 'utf8');
  const rss = Number(/^total_rss (\d+)$/m.exec(stat)?.[1] ?? NaN) + Number(/^total_rss_huge (\d+)$/m.exec(stat)?.[1] ?? 0);
  return { usageMiB: read('memory', 'memory.usage_in_bytes') / 2 ** 20, rssMiB: rss / 2 ** 20, cpuSeconds: read('cpuacct', 'cpuacct.usage') / 1e9 };
};
/** The agent's rlmesh_agent_node_report_latency_seconds histogram, read from its metrics port inside the real node's network namespace. */
const agentReportLatency = (p: { metadata: { name: string }; spec: { nodeName?: string }; status: { podIP?: string } }) => {
  const node = realNodeOf(p);
  if (!p.status.podIP) throw new Error(`pod ${p.metadata.name} has no address yet`);
  const script = `fetch('http://${p.status.podIP}:9090/metrics').then((r) => r.text()).then((t) => process.stdout.write(t))`;
  const text = execFileSync('ip', ['netns', 'exec', node.netns, process.execPath, '-e', script], { encoding: 'utf8' });
  const metric = 'rlmesh_agent_node_report_latency_seconds';
  const value = (suffix: string) => Number(new RegExp(`^${metric}${suffix} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const buckets = new Map([...text.matchAll(new RegExp(`^${metric}_bucket\\{le="([^"]+)"\\} (\\S+)$`, 'gm'))].map((m) => [m[1]!, Number(m[2])]));
  return { count: value('_count'), sum: value('_sum'), buckets };
};
const pct = (xs: number[], p: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);

if (realNodes(join(homedir(), '.cache/rlmesh-cluster')).length > 0) {
  throw new Error('the test cluster runs a real node, whose network names this benchmark needs too: stop it with test/cluster/down and run the benchmark again');
}
const t0 = Date.now();
execFileSync(join(ROOT, 'test/cluster/down'), { stdio: 'ignore' });
execFileSync(join(ROOT, 'test/cluster/up'), { stdio: ['ignore', 'ignore', 'inherit'] });
console.log(`cluster with ${total} kwok nodes (${gpu} with nvidia.com/gpu: 8) ready in ${fmt(Date.now() - t0)}`);
// the cluster is new, and so is its registry: the release goes into it, before the pods load the machine
const { releaseToLocalRegistry } = await import('../support/release.ts');
releaseToLocalRegistry();

// the cluster's other workloads: running pods the agent lists, watches and counts against free capacity
const BACKGROUND_NS = 'scale-background';
kubectl(['create', 'namespace', BACKGROUND_NS]);
const core = adminKubeConfig().makeApiClient(k8s.CoreV1Api);
const cpuNodes = total - gpu;
const t1 = Date.now();
await pool(Array.from({ length: backgroundPods }, (_, i) => i), 32, (i) =>
  core.createNamespacedPod({
    namespace: BACKGROUND_NS,
    body: {
      metadata: { name: `background-${i}`, labels: { app: `background-${i % 100}` } },
      spec: {
        nodeName: `kwok-cpu-${i % cpuNodes}`,
        tolerations: [{ operator: 'Exists' }],
        containers: [{ name: 'c', image: 'registry.rlmesh.dev/background:1', resources: { requests: { cpu: '100m', memory: '256Mi' } } }],
      },
    },
  }),
);
console.log(`created ${backgroundPods} pods on ${cpuNodes} kwok CPU nodes in ${fmt(Date.now() - t1)}`);
// kwok starts them behind the creates; evaluations submitted before it is through would queue behind them
await until('kwok to run every background pod', async () => {
  // resourceVersion 0: from the apiserver's watch cache, which filters by phase without reading etcd
  const pending = (await core.listNamespacedPod({ namespace: BACKGROUND_NS, fieldSelector: 'status.phase=Pending', resourceVersion: '0' })).items.length;
  console.log(`  ${backgroundPods - pending} of ${backgroundPods} running after ${fmt(Date.now() - t1)}`);
  return pending === 0 ? true : undefined;
}, { timeoutMs: 3_600_000, intervalMs: 30_000 });
console.log(`all ${backgroundPods} running ${fmt(Date.now() - t1)} after the first create`);
h.cleanSlate();
const chart = h.releasedChart();
const cp = await h.controlPlane(chart);
const rt = new h.Runtime();
const onRealNode = { nodeSelector: { 'rlmesh.dev/real-node': 'true' } };
// GPU feature discovery is a DaemonSet tolerating NoSchedule taints: 5,000 pods on kwok nodes that have no PCI devices to read
const pinned = writeTemp('scale-values.json', JSON.stringify({ agent: onRealNode, controller: onRealNode, egress: onRealNode, artifactCache: { filler: onRealNode }, gpuFeatureDiscovery: onRealNode }));
try {
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'scale' });
  const id = created.body.clusterId;
  const started = Date.now();
  h.runInstallCommand(cp, `${created.body.installCommand} -f ${pinned}`);
  await h.waitConnected(cp, id, 180);
  console.log(`helm install -> Connected with ${total} nodes: ${fmt(Date.now() - started)}`);
  // sampled from Connected on, so that the peaks include the informers' first list of 150,000 pods
  const agentPod = rt.pod('agent');
  const holder = kubectl(['-n', h.NS, 'get', 'lease', 'rlmesh-cluster-controller', '-o', 'jsonpath={.spec.holderIdentity}']).stdout;
  const controllerPod = rt.pods('controller').find((p) => holder.includes(p.metadata.name))!;
  const before = { agent: sample(agentPod), controller: sample(controllerPod) };
  const peak = { agent: before.agent, controller: before.controller };
  const sampleBoth = () => {
    const now = { agent: sample(agentPod), controller: sample(controllerPod) };
    for (const c of ['agent', 'controller'] as const) {
      peak[c] = { ...now[c], usageMiB: Math.max(peak[c].usageMiB, now[c].usageMiB), rssMiB: Math.max(peak[c].rssMiB, now[c].rssMiB) };
    }
    return now;
  };
  const sampler = setInterval(sampleBoth, 250);
  const memory = (when: string) => {
    const now = sampleBoth();
    for (const c of ['agent', 'controller'] as const) {
      console.log(`  ${when}: ${c.padEnd(10)} RSS ${now[c].rssMiB.toFixed(0)} MiB (peak ${peak[c].rssMiB.toFixed(0)}), cgroup usage ${now[c].usageMiB.toFixed(0)} MiB (peak ${peak[c].usageMiB.toFixed(0)}), CPU ${(now[c].cpuSeconds - before[c].cpuSeconds).toFixed(1)} s over ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
  };
  type Report = { nodeReport: { receivedAt: string; report: { nodes?: { name: string; schedulable?: boolean }[] } } | null };
  let reported = 0;
  /** The control plane's latest report from this cluster: its nodes, and when the control plane received it. */
  const latestReport = async () => {
    const r = (await api<Report>(cp, 'GET', `/v1/clusters/${id}`)).body.nodeReport;
    const nodes = r?.report.nodes ?? [];
    reported = nodes.length;
    return { nodes, receivedAt: r ? Date.parse(r.receivedAt) : NaN };
  };
  // what a timeout shows: how far the report got, and the agent's last words
  const context = () => `the report lists ${reported} nodes; the agent's log ends:\n${kubectl(['-n', h.NS, 'logs', agentPod.metadata.name, '--tail', '20'], { allowFail: true }).stdout}`;
  // the agent's first report follows its node and pod informers' first list: at this size, minutes after it connects
  await until('the first node report with every node', async () => {
    return (await latestReport()).nodes.length >= total ? true : undefined;
  }, { timeoutMs: 1_800_000, intervalMs: 1000, context });
  console.log(`helm install -> the first node report with all ${total} nodes (informers synced): ${fmt(Date.now() - started)}`);
  memory('synced');
  const untaint = Date.now();
  // 32 at a time: kubectl taint patches 5,000 nodes one by one (683 s on the loaded apiserver)
  const kwokNodes = (await core.listNode({ labelSelector: 'type=kwok', resourceVersion: '0' })).items;
  await pool(kwokNodes, 32, (n) =>
    core.patchNode({ name: n.metadata!.name!, body: { spec: { taints: (n.spec?.taints ?? []).filter((t) => t.key !== 'kwok.x-k8s.io/node') } } }, MERGE_PATCH),
  );
  console.log(`kwok taint removed from ${total} nodes in ${fmt(Date.now() - untaint)}`);

  // 200 evaluations in flight: submission -> pod Running
  const image = await h.evaluationImage();
  const submittedAt = new Map<string, number>();
  const ids = await Promise.all(Array.from({ length: evaluations }, async () => {
    const t = Date.now();
    const e = await h.submit(cp, id, { ...h.smallEvaluation(image, { TEST_DURATION: '600s' }), nodeSelector: { type: 'kwok' } });
    submittedAt.set(e, t);
    return e;
  }));
  const runningAt = new Map<string, number>();
  await until('every evaluation Running', () => {
    const items = JSON.parse(kubectl(['-n', h.RUNS, 'get', 'rlmeshevaluations', '-o', 'json']).stdout).items as { metadata: { name: string }; status?: { phase?: string } }[];
    const now = Date.now();
    for (const it of items) if (it.status?.phase === 'Running' && !runningAt.has(it.metadata.name)) runningAt.set(it.metadata.name, now);
    return ids.every((e) => runningAt.has(e)) ? true : undefined;
  }, { timeoutMs: 600_000, intervalMs: 200 });
  const toRunning = ids.map((e) => runningAt.get(e)! - submittedAt.get(e)!);
  const toRunningLine = `  submission -> pod Running   p50 ${fmt(pct(toRunning, 50))}  p99 ${fmt(pct(toRunning, 99))}  max ${fmt(Math.max(...toRunning))}`;
  console.log(toRunningLine);
  memory('evaluations running');

  // node report latency: a node change (a cordon, written with the client: a kubectl process would add
  // its own start) until the control plane has the report that shows it (its receivedAt; the control plane
  // is a process of its own on the same clock), and until this benchmark's poll sees it, which adds the
  // poll's fetch and parse of the whole report
  const cordon = (name: string, unschedulable: boolean) => core.patchNode({ name, body: { spec: { unschedulable } } }, MERGE_PATCH);
  const agentBefore = agentReportLatency(agentPod);
  const arrived: number[] = [];
  const seen: number[] = [];
  for (let i = 0; i < 20; i++) {
    const node = `kwok-cpu-${i}`;
    const t = Date.now();
    await cordon(node, true);
    const receivedAt = await until('the report to show the cordon', async () => {
      const r = await latestReport();
      const n = r.nodes.find((x) => x.name === node);
      return n && !n.schedulable ? r.receivedAt : undefined;
    }, { timeoutMs: 60_000, intervalMs: 20, context });
    seen.push(Date.now() - t);
    arrived.push(receivedAt - t);
    await cordon(node, false);
  }
  const agentSide = agentReportLatency(agentPod);
  clearInterval(sampler);

  console.log(`\nscale: ${total} nodes, ${backgroundPods} other pods, ${evaluations} evaluations in flight`);
  console.log(toRunningLine);
  console.log(`  node change -> report at the control plane  p50 ${fmt(pct(arrived, 50))}  p99 ${fmt(pct(arrived, 99))} (${arrived.length} cordons, each written with the client)`);
  console.log(`  node change -> seen by the benchmark's poll p50 ${fmt(pct(seen, 50))}  p99 ${fmt(pct(seen, 99))}`);
  const reports = agentSide.count - agentBefore.count;
  const within = (le: string) => (agentSide.buckets.get(le)! - agentBefore.buckets.get(le)!) / reports;
  console.log(`  agent, first change seen -> report sent: ${reports} reports, mean ${fmt((1000 * (agentSide.sum - agentBefore.sum)) / reports)}; within 250 ms ${(100 * within('0.25')).toFixed(0)} %, 500 ms ${(100 * within('0.5')).toFixed(0)} %, 1 s ${(100 * within('1')).toFixed(0)} % (rlmesh_agent_node_report_latency_seconds)`);
  memory('end');
  const p99 = pct(arrived, 99);
  console.log(`  goals: node report p99 <= 1 s: ${p99 <= 1000 ? 'met' : 'not met'}; agent RSS <= 256 MiB: ${peak.agent.rssMiB <= 256 ? 'met' : 'not met'} (peak ${peak.agent.rssMiB.toFixed(0)} MiB)`);
} finally {
  await cp.stop();
  execFileSync(join(ROOT, 'test/cluster/down'), { stdio: 'ignore' });
}
