// Scale benchmark (not a test): 2,000 kwok nodes (200 with 8 GPUs), 200
// evaluations in flight, the agent, controller and egress proxy from the chart
// running against them. Prints agent and controller RSS and CPU, node-report
// latency (a node change -> the control plane's report), and the time from
// submission to pod Running. Uses a cluster of its own and stops it at the end.
//
//   node test/bench/scale.ts [--nodes 2000] [--gpu-nodes 200] [--evaluations 200]
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: a } = parseArgs({ options: { nodes: { type: 'string', default: '2000' }, 'gpu-nodes': { type: 'string', default: '200' }, evaluations: { type: 'string', default: '200' } } });
const total = Number(a.nodes);
const gpu = Number(a['gpu-nodes']);
const evaluations = Number(a.evaluations);
process.env.RLMESH_CLUSTER_DIR = join(homedir(), '.cache/rlmesh-cluster-scale');
process.env.RLMESH_KWOK_NODES = String(total - gpu);
process.env.RLMESH_KWOK_GPU_NODES = String(gpu);
process.env.RLMESH_KWOK_POD_MS = '600000'; // evaluations stay in flight for the measurement
// kwok nodes only, untainted: the chart's Deployments run as local processes (test/support/run-deployment.ts)
process.env.RLMESH_REAL_NODES = '0';

const { ROOT, api, until } = await import('../support/runtime.ts');
const { kubectl } = await import('../support/cluster.ts');
const h = await import('../e2e/harness.ts');
const { LocalDeployments } = await import('../support/run-deployment.ts');
const { startControlPlane } = await import('../support/runtime.ts');

const sample = (pid: number) => {
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return { rssMiB: rss, cpuSeconds: (Number(f[11]) + Number(f[12])) / 100 };
};
const pct = (xs: number[], p: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);

const t0 = Date.now();
execFileSync(join(ROOT, 'test/cluster/down'), { stdio: 'ignore' });
execFileSync(join(ROOT, 'test/cluster/up'), { stdio: ['ignore', 'ignore', 'inherit'] });
console.log(`cluster with ${total} kwok nodes (${gpu} with nvidia.com/gpu: 8) ready in ${fmt(Date.now() - t0)}`);

h.cleanSlate();
const chart = h.releasedChart();
// no real node, so no bridge: the control plane on loopback, as the agent's local process reaches it
const cp = await startControlPlane({ listen: '127.0.0.1:443', args: ['--advertise-host', 'localhost', '--chart-ref', chart.ref, '--chart-version', chart.version] });
const loopbackFlags = ['--plain-http', '--set', 'controlPlane.apiHost=localhost', '--set-file', `controlPlane.caBundle=${cp.caFile}`, '--wait', '--timeout', '6m'];
const rt = new LocalDeployments();
try {
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'scale' });
  const id = created.body.clusterId;
  execFileSync('bash', ['-c', `${created.body.installCommand} ${loopbackFlags.map((f) => `'${f}'`).join(' ')}`], { stdio: 'inherit' });
  const started = Date.now();
  await rt.start(['agent', 'controller', 'filler', 'egress']);
  await h.waitConnected(cp, id, 180);
  console.log(`agent start -> Connected with ${total} nodes: ${fmt(Date.now() - started)}`);
  const agentPid = rt.get('agent').proc.pid!;
  const controllerPid = rt.get('controller').proc.pid!;
  const before = { agent: sample(agentPid), controller: sample(controllerPid) };
  const peak = { agent: before.agent.rssMiB, controller: before.controller.rssMiB };
  const sampler = setInterval(() => {
    peak.agent = Math.max(peak.agent, sample(agentPid).rssMiB);
    peak.controller = Math.max(peak.controller, sample(controllerPid).rssMiB);
  }, 250);

  // 200 evaluations in flight: submission -> pod Running
  const submittedAt = new Map<string, number>();
  const ids = await Promise.all(Array.from({ length: evaluations }, async () => {
    const t = Date.now();
    const e = await h.submit(cp, id, { image: 'registry.rlmesh.dev/rlmesh-test/evaluation:kwok', cpu: '100m', memory: '128Mi', deadlineSeconds: '600' });
    submittedAt.set(e, t);
    return e;
  }));
  const runningAt = new Map<string, number>();
  await until('every evaluation Running', () => {
    const items = JSON.parse(kubectl(['-n', h.RUNS, 'get', 'rlmeshevaluations', '-o', 'json']).stdout).items as { metadata: { name: string }; status?: { phase?: string } }[];
    const now = Date.now();
    for (const it of items) if (it.status?.phase === 'Running' && !runningAt.has(it.metadata.name)) runningAt.set(it.metadata.name, now);
    return ids.every((e) => runningAt.has(e)) ? true : undefined;
  }, 600, 200);
  const toRunning = ids.map((e) => runningAt.get(e)! - submittedAt.get(e)!);

  // node report latency: a node change (cordon) until the control plane's report shows it
  const latencies: number[] = [];
  for (let i = 0; i < 20; i++) {
    const node = `kwok-cpu-${i}`;
    const t = Date.now();
    kubectl(['cordon', node]);
    await until('the report to show the cordon', async () => {
      const c = await api<{ nodeReport: { report: { nodes?: { name: string; schedulable?: boolean }[] } } | null }>(cp, 'GET', `/v1/clusters/${id}`);
      const n = c.body.nodeReport?.report.nodes?.find((x) => x.name === node);
      return n && !n.schedulable ? true : undefined;
    }, 60, 20);
    latencies.push(Date.now() - t);
    kubectl(['uncordon', node]);
  }
  clearInterval(sampler);
  const after = { agent: sample(agentPid), controller: sample(controllerPid) };
  const window = (Date.now() - started) / 1000;

  console.log(`\nscale: ${total} nodes, ${evaluations} evaluations in flight`);
  console.log(`  submission -> pod Running   p50 ${fmt(pct(toRunning, 50))}  p99 ${fmt(pct(toRunning, 99))}  max ${fmt(Math.max(...toRunning))}`);
  console.log(`  node change -> report       p50 ${fmt(pct(latencies, 50))}  p99 ${fmt(pct(latencies, 99))}`);
  for (const c of ['agent', 'controller'] as const) {
    console.log(`  ${c.padEnd(10)} RSS ${after[c].rssMiB.toFixed(0)} MiB (peak ${peak[c].toFixed(0)} MiB), CPU ${(after[c].cpuSeconds - before[c].cpuSeconds).toFixed(1)} s over ${window.toFixed(0)} s`);
  }
} finally {
  await rt.stop();
  await cp.stop();
  execFileSync(join(ROOT, 'test/cluster/down'), { stdio: 'ignore' });
}
