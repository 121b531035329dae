// Agent benchmark (not a timed test): prints figures and their ratio to the goals.
//   node test/bench/agent.ts
// Env: RLMESH_BENCH_NODES (default 500) extra kwok nodes, RLMESH_BENCH_PODS (default 5000)
// pods spread over them, RLMESH_BENCH_CHANGES (default 40) changes timed end to end,
// RLMESH_BENCH_RUNS (default 5) control-plane restarts timed.
// Starts and restarts are test/bench/start.ts's.
// The agent runs as the image runs it (its bundle, built into dist/app first, with a compile
// cache) with production timing (backoff 0.25 s → 30 s, heartbeat 10 s, silence 45 s).
// The agent gets the memory settings the chart gives its container (NODE_OPTIONS, MALLOC_*).
// RLMESH_BENCH_NODE_OPTIONS replaces the chart's NODE_OPTIONS, '|'-separated to compare several
// on one populated cluster ('' = none); RLMESH_BENCH_ONLY=scale skips the control-plane restarts.
// RLMESH_CLUSTER_DIR picks the cluster (a separate one keeps 50,000 pods off the test cluster).
// Bench nodes are tainted NoSchedule and labelled rlmesh.dev/bench=agent; all are removed at the end.
import { readFileSync } from 'node:fs';
import { buildApp } from './app-build.ts';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { listPages } from '../../lib/list-pages.ts';
import { adminKubeConfig, kubectl } from '../support/cluster.ts';
import { api, ROOT, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { chartAgentEnv, controlPlane, installAgentRbac, newCluster, resetAgentState, runtimeConfig, startAgent, useNamespaces, type AgentProcess } from '../agent/harness.ts';
import { pool } from '../support/pool.ts';

const NODES = Number(process.env.RLMESH_BENCH_NODES ?? 500);
const PODS = Number(process.env.RLMESH_BENCH_PODS ?? 5000);
const CHANGES = Number(process.env.RLMESH_BENCH_CHANGES ?? 40);
const RUNS = Number(process.env.RLMESH_BENCH_RUNS ?? 5);
const CHART_ENV = chartAgentEnv();
// Node options the scale part runs the agent with, '|'-separated to compare several on one
// populated cluster, e.g. "|--max-semi-space-size=1" (nothing, then that flag)
const NODE_OPTIONS_VARIANTS = (process.env.RLMESH_BENCH_NODE_OPTIONS ?? CHART_ENV.NODE_OPTIONS ?? '').split('|').map((v) => v.trim());
const NODE_OPTIONS = NODE_OPTIONS_VARIANTS[0]!;
const ONLY_SCALE = process.env.RLMESH_BENCH_ONLY === 'scale';
// keep the bench nodes and pods for the next run (creating 50,000 pods takes minutes); a run finds and reuses them
const KEEP = process.env.RLMESH_BENCH_KEEP === '1';
const BENCH_NS = 'rlmesh-agent-bench-pods';
// the chart's env for the agent; its timing flags are left at their production defaults (timing: [])
const PRODUCTION = { ...CHART_ENV, NODE_OPTIONS };

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const logTime = (a: AgentProcess, msg: string, nth = 1) => {
  const l = a.lines().filter((x) => x.msg === msg)[nth - 1];
  return l ? Date.parse(l.time as string) : undefined;
};
const rows: [string, string, string][] = [];
const row = (what: string, figure: string, vsGoal: string) => {
  rows.push([what, figure, vsGoal]);
  console.log(`${what.padEnd(58)} ${figure.padEnd(28)} ${vsGoal}`);
};

function benchNode(i: number): k8s.V1Node {
  const name = `bench-agent-${String(i).padStart(5, '0')}`;
  const gpu = i % 4 === 0;
  const capacity: Record<string, string> = { cpu: '32', memory: '128Gi', pods: '110', ...(gpu ? { 'nvidia.com/gpu': '8' } : {}) };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/arch': 'amd64', 'kubernetes.io/os': 'linux', type: 'kwok', 'rlmesh.dev/bench': 'agent', ...(gpu ? { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559' } : {}) },
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
    },
    spec: { taints: [{ key: 'rlmesh.dev/bench', value: 'agent', effect: 'NoSchedule' }] },
    status: { allocatable: capacity, capacity },
  };
}

async function main() {
  // the agent as the image runs it: its bundle, with the code cache the image bakes in, written the same way
  const app = await buildApp(join(ROOT, 'dist/app'), 'bundles', ['agent']);
  const AGENT_MAIN = app.main('agent');
  Object.assign(PRODUCTION, app.env());
  useNamespaces('rlmesh-agent-bench', 'rlmesh-agent-bench-runs');
  installAgentRbac({ joinToken: true });
  resetAgentState();
  let cp: ControlPlane = await controlPlane();
  const agents: AgentProcess[] = [];
  const kc = adminKubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  try {
    console.log(`agent benchmark: ${NODES} extra kwok nodes, ${PODS} pods, ${CHANGES} timed changes, ${RUNS} runs; the agent bundle from dist/app with ${Object.entries({ ...CHART_ENV, NODE_OPTIONS }).map(([k, v]) => `${k}=${v}`).join(" ")}\n`);
    const { clusterId, joinToken } = await newCluster(cp, 'bench');
    const config = runtimeConfig(cp);

    // the first start joins; the agents below find its credentials (test/bench/start.ts times the starts)
    const joined = await startAgent({ main: AGENT_MAIN, configFile: config, token: joinToken, env: PRODUCTION, timing: [] });
    agents.push(joined);
    await joined.waitFor('connected', /session connected/, { timeoutMs: 60_000 });
    await joined.stop();
    const spool = joined.spoolDir;

    // 1. control-plane restart → reconnected
    const agent = await startAgent({ main: AGENT_MAIN, configFile: config, token: joinToken, env: PRODUCTION, timing: [], spoolDir: spool });
    agents.push(agent);
    await agent.waitFor('connected', /session connected/);
    const reconnects: number[] = [];
    const outages: number[] = [];
    for (let r = 0; r < (ONLY_SCALE ? 0 : RUNS); r++) {
      const port = new URL(cp.url).port;
      const before = agent.lines().filter((l) => l.msg === 'session connected').length;
      const killed = Date.now();
      await cp.stop('SIGKILL');
      cp = await controlPlane(cp.dataDir, `127.0.0.1:${port}`);
      const up = Date.now();
      await until('reconnected', () => (agent.lines().filter((l) => l.msg === 'session connected').length > before ? true : undefined), { timeoutMs: 60_000, intervalMs: 20 });
      const at = logTime(agent, 'session connected', before + 1)!;
      reconnects.push(Math.max(0, at - up));
      outages.push(at - killed);
      await new Promise((res) => setTimeout(res, 500));
    }
    if (!ONLY_SCALE) row(`control-plane restart → reconnected (median of ${RUNS}, from its ready line)`, `${pct(reconnects, 50)} ms (max ${Math.max(...reconnects)} ms)`, `${(pct(reconnects, 50) / 2000).toFixed(2)}× the 2 s goal`);
    if (!ONLY_SCALE) row('  whole outage incl. control-plane start (median)', `${pct(outages, 50)} ms`, '');
    const rssSmall = rssMiB(agent.proc.pid!);
    row(`agent RSS, small cluster (3 nodes)${NODE_OPTIONS ? ` (NODE_OPTIONS=${NODE_OPTIONS})` : ''}`, `${rssSmall.toFixed(0)} MiB`, '');
    await agent.stop();

    // 2. scale: many nodes and pods, then change → report end to end
    await until('the previous run\'s pod namespace is gone', () => {
      const r = kubectl(['get', 'namespace', BENCH_NS, '-o', 'jsonpath={.status.phase}'], { allowFail: true });
      return r.status !== 0 || r.stdout === 'Active' ? true : undefined;
    }, { timeoutMs: 600_000, intervalMs: 2000 });
    kubectl(['create', 'namespace', BENCH_NS], { allowFail: true });
    // counted page by page: the apiserver gives no remainingItemCount for a list with a selector
    const haveNodes = (await listPages((p) => core.listNode({ ...p, labelSelector: 'rlmesh.dev/bench=agent' }), () => true)).items.length;
    const havePods = (await listPages((p) => core.listNamespacedPod({ ...p, namespace: BENCH_NS }), () => true)).items.length;
    let t = Date.now();
    await pool(Array.from({ length: NODES }, (_, i) => i).slice(haveNodes >= NODES ? NODES : 0), 16, (i) => core.createNode({ body: benchNode(i) }).catch((e: { code?: number }) => (e.code === 409 ? undefined : Promise.reject(e))));
    console.log(`  created ${NODES} nodes in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    t = Date.now();
    await pool(Array.from({ length: PODS }, (_, i) => i).slice(havePods >= PODS ? PODS : 0), 32, (i) =>
      core
        .createNamespacedPod({
          namespace: BENCH_NS,
          body: {
            metadata: { name: `bench-pod-${i}` },
            spec: {
              nodeName: `bench-agent-${String(i % NODES).padStart(5, '0')}`,
              restartPolicy: 'Always',
              tolerations: [{ operator: 'Exists' }],
              containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu: '100m', memory: '256Mi' } } }],
            },
          },
        })
        .catch((e: { code?: number }) => (e.code === 409 ? undefined : Promise.reject(e))),
    );
    console.log(`  created ${PODS} pods in ${((Date.now() - t) / 1000).toFixed(1)} s`);

    type Node = { name: string; cpuMillisFree?: string };
    const reportOf = async () => (await api<{ nodeReport: { report: { nodes: Node[] }; receivedAt: string } | null }>(cp, 'GET', `/v1/clusters/${clusterId}`)).body.nodeReport;
    let change = 0;
    const run = Date.now().toString(36); // kept pods of earlier runs keep their names
    for (const variant of NODE_OPTIONS_VARIANTS) {
      const label = variant ? ` (NODE_OPTIONS=${variant})` : ' (no NODE_OPTIONS)';
      const big = await startAgent({ main: AGENT_MAIN, configFile: config, token: joinToken, env: { ...PRODUCTION, NODE_OPTIONS: variant }, timing: [], spoolDir: spool });
      agents.push(big);
      const t1 = Date.now();
      await big.waitFor('informers synced', /node and pod informers synced/, { timeoutMs: 600_000 });
      const synced = big.lines().find((l) => l.msg === 'node and pod informers synced')!;
      row(`initial list of ${String(synced.nodes)} nodes + ${String(synced.pods)} pods${label}`, `${Date.parse(synced.time as string) - t1} ms`, '');
      await until('a report with the bench nodes', async () => ((await reportOf())?.report.nodes.length ?? 0) >= NODES || undefined, { timeoutMs: 300_000, intervalMs: 200 });
      const latencies: number[] = [];
      for (let c = 0; c < CHANGES; c++, change++) {
        const node = `bench-agent-${String(Math.floor(Math.random() * NODES)).padStart(5, '0')}`;
        const cur = (await reportOf())!.report.nodes.find((n) => n.name === node)!;
        const free = Number(cur.cpuMillisFree);
        const t0 = Date.now();
        await core.createNamespacedPod({
          namespace: BENCH_NS,
          body: { metadata: { name: `bench-change-${run}-${change}` }, spec: { nodeName: node, restartPolicy: 'Always', tolerations: [{ operator: 'Exists' }], containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu: '1' } } }] } },
        });
        const seen: { receivedAt: string } = await until('change reported', async () => {
          const r = await reportOf();
          const n = r?.report.nodes.find((x) => x.name === node);
          return r && n && Number(n.cpuMillisFree) === free - 1000 ? r : undefined;
          // the figure is the control plane's receivedAt, not when this poll saw it: polling slower only spares the CPU
        }, { timeoutMs: 30_000, intervalMs: 100 });
        latencies.push(Date.parse(seen.receivedAt) - t0);
      }
      row(`change → report at the control plane, p50 (${CHANGES} changes)${label}`, `${pct(latencies, 50)} ms`, '');
      row(`change → report at the control plane, p99${label}`, `${pct(latencies, 99)} ms`, `${(pct(latencies, 99) / 1000).toFixed(2)}× the 1 s goal`);
      await new Promise((r) => setTimeout(r, 2000));
      const rssBig = rssMiB(big.proc.pid!);
      const heapUsed = Number(/^rlmesh_agent_nodejs_heap_size_used_bytes (\S+)$/m.exec(await big.metrics())?.[1] ?? 0) / 1048576;
      row(`  of which V8 heap in use${label}`, `${heapUsed.toFixed(0)} MiB`, '');
      const podsBig = Number(synced.pods);
      row(`agent RSS with ${String(synced.nodes)} nodes + ${podsBig} pods${label}`, `${rssBig.toFixed(0)} MiB`, `${(rssBig / 256).toFixed(2)}× the 256 MiB goal`);
      await big.stop();
    }
  } finally {
    await Promise.all(agents.map((a) => a.stop('SIGKILL')));
    await cp.stop();
    if (!KEEP) {
      // pods first, forced: once their kwok nodes are gone nothing would confirm a graceful deletion
      kubectl(['-n', BENCH_NS, 'delete', 'pods', '--all', '--force', '--grace-period=0', '--wait=false'], { allowFail: true });
      kubectl(['delete', 'namespace', BENCH_NS, '--wait=false'], { allowFail: true });
      kubectl(['delete', 'nodes', '-l', 'rlmesh.dev/bench=agent', '--wait=false'], { allowFail: true });
    }
  }
  console.log('\n| measure | figure | against the goal |\n| --- | --- | --- |');
  for (const [a, b, c] of rows) console.log(`| ${a.trim()} | ${b} | ${c} |`);
}

await main();
