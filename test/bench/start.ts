// Start benchmark (not a timed test): how fast the agent is Connected, and
// how much memory each long-running component holds at idle, for the image's
// JavaScript as it was (tsc's output beside node_modules/, "before") and as it
// ships now (one esbuild bundle per entrypoint, "after"), side by side in one
// run: "after" with the code cache the image writes beside each bundle,
// "before" with Node's compile cache filled by the same --help runs.
//
//   node test/bench/start.ts [--runs 5] [--parts process,pod]
//
// process: the agent as a process on the local cluster: first start (the
//   join) and restart → "session connected", alternating before and after;
//   then the agent, the controller (reconciler), the egress proxy and the
//   control plane idle, their RSS.
// pod: the released chart on the real node (test/support/release.ts first):
//   the agent pod's first start with the join during `helm install` (and the
//   CPU the release's other pods took as they started beside it), `--runs`
//   joins with a new install command (`helm upgrade --install`, which replaces
//   only the agent's pod) and `--runs` pod deletions → Connected, from the
//   agent's own processUptimeMs (process start → session connected) and from
//   the deletion (the kubelet's part included).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildApp, type AppBuild } from './app-build.ts';
import { ROOT, startControlPlane, stopper } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { freePort } from '../support/free-port.ts';
import { kubectl } from '../support/cluster.ts';
import { chartAgentEnv, controlPlane, installAgentRbac, newCluster, resetAgentState, runtimeConfig, startAgent, useNamespaces, type AgentProcess } from '../agent/harness.ts';

const { values: a } = parseArgs({ options: { runs: { type: 'string', default: '5' }, parts: { type: 'string', default: 'process,pod' } } });
const RUNS = Number(a.runs);
const PARTS = new Set(a.parts.split(','));
const NODE = join(ROOT, 'node_modules/.bin/node');

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor((xs.length - 1) / 2)]!;
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rows: [string, string, string][] = [];
const row = (what: string, figure: string, goal = '') => {
  rows.push([what, figure, goal]);
  console.log(`${what.padEnd(64)} ${figure.padEnd(34)} ${goal}`);
};
const verdict = (ms: number, goalMs: number) => `${(ms / goalMs).toFixed(2)}× the ${goalMs / 1000} s goal: ${ms <= goalMs ? 'met' : 'not met'}`;

type Build = AppBuild & { name: 'before' | 'after' };

/** The two trees side by side: before (tsc) and after (bundles). */
async function builds(): Promise<Build[]> {
  const components = ['agent', 'controller', 'egress', 'controlplane'];
  const before = await buildApp(join(ROOT, 'dist/start-bench/before'), 'tsc', components);
  const after = await buildApp(join(ROOT, 'dist/start-bench/after'), 'bundles', components);
  return [{ ...before, name: 'before' }, { ...after, name: 'after' }];
}

async function processPart(trees: Build[]): Promise<void> {
  useNamespaces('rlmesh-start-bench', 'rlmesh-start-bench-runs');
  installAgentRbac({ joinToken: true });
  const cp = await controlPlane();
  // the memory settings the chart gives the agent's container
  const agentEnv = chartAgentEnv();
  try {
    const config = runtimeConfig(cp);
    // per tree: ms from spawn to "session connected", and the CPU ms the agent logged there
    type Start = { ms: number; cpu: number };
    const joins: Record<string, Start[]> = { before: [], after: [] };
    const restarts: Record<string, Start[]> = { before: [], after: [] };
    const connectedAfter = (p: AgentProcess): Start => {
      const l = p.lines().find((x) => x.msg === 'session connected')!;
      return { ms: Date.parse(l.time as string) - p.startedAt, cpu: l.processCpuMs as number };
    };
    const idle: Record<string, Record<string, number>> = { before: {}, after: {} };
    for (let r = 0; r < RUNS; r++) {
      for (const t of r % 2 === 0 ? trees : [...trees].reverse()) {
        resetAgentState();
        const { joinToken } = await newCluster(cp, `start-${t.name}-${r}`);
        const main = t.main('agent');
        const first = await startAgent({ main, configFile: config, token: joinToken, env: { ...agentEnv, ...t.env() }, timing: [] });
        await first.waitFor('connected', /session connected/, { timeoutMs: 60_000 });
        joins[t.name]!.push(connectedAfter(first));
        await first.stop();
        const again = await startAgent({ main, configFile: config, env: { ...agentEnv, ...t.env() }, timing: [], spoolDir: first.spoolDir });
        await again.waitFor('connected', /session connected/, { timeoutMs: 60_000 });
        restarts[t.name]!.push(connectedAfter(again));
        if (r === RUNS - 1) {
          await sleep(3000);
          idle[t.name]!.agent = rssMiB(again.proc.pid!);
        }
        await again.stop();
      }
    }
    const ms = (xs: Start[]) => xs.map((x) => x.ms);
    const figure = (xs: Start[]) => `${median(ms(xs))} ms (max ${Math.max(...ms(xs))}), CPU ${median(xs.map((x) => x.cpu))} ms`;
    for (const t of trees) {
      row(`agent first start (join) → Connected, ${t.name} (median of ${RUNS})`, figure(joins[t.name]!), t.name === 'after' ? verdict(median(ms(joins[t.name]!)), 700) : '');
      row(`agent restart → Connected, ${t.name} (median of ${RUNS})`, figure(restarts[t.name]!), t.name === 'after' ? verdict(median(ms(restarts[t.name]!)), 500) : '');
    }
    row('  bundled / compiled, restart', `${(median(ms(restarts.after!)) / median(ms(restarts.before!))).toFixed(2)}×`);

    // the others idle: started, ready, left alone for 3 s
    const { setupEnv, startController } = await import('../controller/harness.ts');
    const env = await setupEnv();
    try {
      for (const t of trees) {
        const ctl = await startController(env, 'reconciler', [], t.env(), t.main('controller'));
        await until('the reconciler started', () => (readFileSync(ctl.logFile, 'utf8').includes('evaluation reconciler started') ? true : undefined), { timeoutMs: 60_000 });
        await sleep(3000);
        idle[t.name]!.controller = rssMiB(ctl.child.pid!);
        await ctl.stop();

        const ports = [await freePort(), await freePort(), await freePort()];
        const egress = spawn(NODE, [t.main('egress'), '--port', String(ports[0]), '--health-port', String(ports[1]), '--metrics-port', String(ports[2]), '--allow', 'example.test'], {
          env: { PATH: process.env.PATH ?? '', RLMESH_LISTEN_HOST: '127.0.0.1', ...t.env() },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        await readyLine(egress, 'egress proxy ready');
        await sleep(3000);
        idle[t.name]!.egress = rssMiB(egress.pid!);
        await stopper(egress)();

        const plane = await startControlPlane({ main: t.main('controlplane'), env: t.env() });
        await sleep(3000);
        idle[t.name]!.controlplane = rssMiB(plane.proc.pid!);
        await plane.stop();
      }
    } finally {
      await env.cleanup();
    }
    for (const c of ['agent', 'controller', 'egress', 'controlplane']) {
      row(`${c} RSS at idle, before → after`, `${idle.before![c]!.toFixed(0)} → ${idle.after![c]!.toFixed(0)} MiB`, `${(idle.after![c]! / idle.before![c]!).toFixed(2)}×`);
    }
  } finally {
    await cp.stop();
  }
}

function readyLine(proc: ChildProcess, msg: string): Promise<void> {
  return new Promise((ok, fail) => {
    let seen = '';
    proc.stdout!.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes(`"msg":"${msg}"`)) ok();
    });
    proc.once('exit', (code) => fail(new Error(`exited with ${code} before "${msg}": ${seen.slice(-2000)}`)));
  });
}

async function podPart(): Promise<void> {
  const h = await import('../e2e/harness.ts');
  const { api } = await import('../support/api.ts');
  h.cleanSlate();
  const chart = h.releasedChart();
  const cp = await h.controlPlane(chart);
  const rt = new h.Runtime();
  const { podCgroupDir, realNodes } = await import('../cluster/real-node.ts');
  const connected = (log: string) => {
    const line = log.split('\n').find((l) => l.includes('"msg":"session connected"'));
    return line ? (JSON.parse(line) as { processUptimeMs: number; processCpuMs: number }) : undefined;
  };
  /** How often and how long the CFS quota (the CPU limit) held the pod back since it started, from its cgroup. */
  const throttled = (pod: { metadata: { uid: string }; spec: { nodeName?: string } }) => {
    const node = realNodes().find((n) => n.name === pod.spec.nodeName)!;
    const stat = readFileSync(join(podCgroupDir(node, pod.metadata.uid, 'cpu'), 'cpu.stat'), 'utf8');
    const field = (k: string) => Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(stat)?.[1] ?? NaN);
    return { periods: field('nr_throttled'), ms: field('throttled_time') / 1e6 };
  };
  /** CPU each pod of the release has used since it started, from its cgroup (cpuacct.usage). */
  const releasePodsCpu = () => {
    const pods = (JSON.parse(kubectl(['-n', h.NS, 'get', 'pods', '-o', 'json']).stdout) as { items: { metadata: { name: string; uid: string }; spec: { nodeName?: string }; status: { phase?: string } }[] }).items;
    // kwok's pods (GPU discovery's DaemonSet reaches its nodes) run nothing
    const onRealNode = pods.flatMap((p) => realNodes().filter((n) => n.name === p.spec.nodeName && p.status.phase === 'Running').map((node) => ({ p, node })));
    return onRealNode.map(({ p, node }) => ({ name: p.metadata.name, cpuMs: Math.round(Number(readFileSync(join(podCgroupDir(node, p.metadata.uid, 'cpuacct'), 'cpuacct.usage'), 'utf8')) / 1e6) }));
  };
  const describe = (c: { processUptimeMs: number; processCpuMs: number }, t: { periods: number; ms: number }) =>
    `${c.processUptimeMs} ms, CPU ${c.processCpuMs} ms, throttled ${t.periods}× for ${t.ms.toFixed(0)} ms`;
  try {
    const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'start-bench' });
    h.runInstallCommand(cp, created.body.installCommand);
    await h.waitConnected(cp, created.body.clusterId, 180);
    const joined = await until('the agent pod connected', () => connected(rt.log('agent')), { timeoutMs: 60_000 });
    row('agent pod first start (join) during helm install: process start → Connected', `${describe(joined, throttled(rt.pod('agent')))} (one install)`, verdict(joined.processUptimeMs, 700));
    // what the install's pods asked of the node's CPUs as they all started at once (read just after, while they idle)
    const started = releasePodsCpu();
    const othersMs = started.filter((p) => !p.name.includes('agent')).reduce((a, p) => a + p.cpuMs, 0);
    row('  CPU of the release\'s other pods, started beside it', `${othersMs} ms in ${started.length - 1} pods (${started.map((p) => `${p.name.replace(/-[a-z0-9]+-[a-z0-9]+$/, '')} ${p.cpuMs}`).join(', ')})`);

    // the join again without the install around it: a new install command for the cluster (helm upgrade --install
    // --reset-then-reuse-values, run as printed: the release keeps its values), which replaces only the agent's pod,
    // and that pod trades the new token
    const rejoins: { ms: number; cpu: number }[] = [];
    for (let r = 0; r < RUNS; r++) {
      const old = rt.pod('agent');
      const again = await api<{ installCommand: string }>(cp, 'POST', `/v1/clusters/${created.body.clusterId}/install-command`);
      h.runNewInstallCommand(again.body.installCommand);
      const c = await until('the new agent pod joined and connected', () => {
        const fresh = rt.pods('agent').find((p) => p.metadata.name !== old.metadata.name && p.status.phase === 'Running');
        const log = fresh ? kubectl(['-n', h.NS, 'logs', fresh.metadata.name], { allowFail: true }).stdout : '';
        return log.includes('"msg":"joined: credentials written') ? connected(log) : undefined;
      }, { timeoutMs: 180_000, intervalMs: 100 });
      rejoins.push({ ms: c.processUptimeMs, cpu: c.processCpuMs });
      console.log(`  join ${r + 1} (new install command): ${c.processUptimeMs} ms, CPU ${c.processCpuMs} ms`);
    }
    const rejoinMs = median(rejoins.map((x) => x.ms));
    row(`agent pod start with a join, new install command (median of ${RUNS})`, `${rejoinMs} ms (max ${Math.max(...rejoins.map((x) => x.ms))}), CPU ${median(rejoins.map((x) => x.cpu))} ms`, verdict(rejoinMs, 700));
    const inProcess: number[] = [];
    const wall: number[] = [];
    const cpu: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      const old = rt.pod('agent');
      const t0 = Date.now();
      kubectl(['-n', h.NS, 'delete', 'pod', old.metadata.name, '--wait=false']);
      const [pod, c] = await until('the new agent pod connected', () => {
        const fresh = rt.pods('agent').find((p) => p.metadata.name !== old.metadata.name && p.status.phase === 'Running');
        const line = fresh && connected(kubectl(['-n', h.NS, 'logs', fresh.metadata.name], { allowFail: true }).stdout);
        return line ? ([fresh, line] as const) : undefined;
      }, { timeoutMs: 120_000, intervalMs: 100 });
      wall.push(Date.now() - t0);
      inProcess.push(c.processUptimeMs);
      cpu.push(c.processCpuMs);
      console.log(`  restart ${r + 1}: ${describe(c, throttled(pod))}`);
      await sleep(2000);
    }
    row(`agent pod restart: process start → Connected (median of ${RUNS})`, `${median(inProcess)} ms (max ${Math.max(...inProcess)}), CPU ${median(cpu)} ms`, verdict(median(inProcess), 500));
    row('  pod deleted → new pod Connected, the kubelet included (median)', `${median(wall)} ms`);
  } finally {
    h.cleanSlate();
    await cp.stop();
  }
}

const trees = await builds();
if (PARTS.has('process')) await processPart(trees);
if (PARTS.has('pod')) await podPart();
console.log('\n| measure | figure | against the goal |\n| --- | --- | --- |');
for (const [w, f, g] of rows) console.log(`| ${w.trim()} | ${f} | ${g} |`);
