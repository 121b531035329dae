// Real-node benchmark (not a timed test): the chart installed from the local
// release, its pods as real containers on the local cluster's real node.
// Prints:
//   - helm install -> every pod Ready and the agent Connected, with no runtime
//     image in containerd's store (pulled by digest from the local registry);
//   - agent pod start -> Connected at the control plane, image cached;
//   - 1, 20 and 100 evaluations of the test image submitted at once:
//     submission -> its container running, and -> the result held by the
//     control plane, p50/p99, and the rate against the peer: the same pods
//     (the controller's own pod spec) created by a bare `kubectl create` loop;
//   - each chart pod's memory (its cgroup's usage and peak) against its limit.
// With --nodes 3 it runs on three real nodes (real-1 and real-2 added for the
// run, as the multi-node suites do) and also prints how the evaluations and the
// controller's and the proxy's replicas spread over them.
//
//   node test/bench/real-node.ts [--sizes 1,20,100] [--nodes 1|3]   (needs test/cluster/up and node test/support/release.ts)
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { podCgroupDir, realNodes } from '../cluster/real-node.ts';
import { ensureThreeRealNodes, stopExtraRealNodes } from '../support/multi-node.ts';
import { cleanSlate, clusterRow, controlPlane, evaluation, evaluationImage, FINISHED, NS, releasedChart, runInstallCommand, Runtime, RUNS, smallEvaluation, submit, waitConnected, type Workload } from '../e2e/harness.ts';
import { adminKubeConfig, clusterDir, kubectl, run } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';

const pct = (xs: number[], p: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const rt = new Runtime();
const { values } = parseArgs({ options: { sizes: { type: 'string', default: '1,20,100' }, nodes: { type: 'string', default: '1' } } });
const SIZES = values.sizes.split(',').map(Number);
const NODES = Number(values.nodes);
if (NODES !== 1 && NODES !== 3) throw new Error(`--nodes ${values.nodes}: the benchmark runs on 1 real node (the local cluster's) or 3 (two added for the run)`);
// small enough that 100 fit on the one real node beside the chart's pods (2 CPUs, 110 pods)
const CPU = '10m';
const MEMORY = '32Mi';
const RUN_FOR = '2s';
const BARE_NS = 'rlmesh-bench-bare';

type Seen = { running: Map<string, number>; finished: Map<string, number>; nodes: Map<string, string>; first?: k8s.V1Pod; stop: () => void };

/** Watches a namespace's pods and notes when each one's container is first seen running (or already past it) and finished. */
async function watchPods(namespace: string, keyOf: (pod: k8s.V1Pod) => string | undefined): Promise<Seen> {
  const seen: Seen = { running: new Map(), finished: new Map(), nodes: new Map(), stop: () => {} };
  const req = await new k8s.Watch(adminKubeConfig()).watch(`/api/v1/namespaces/${namespace}/pods`, {}, (_type, pod: k8s.V1Pod) => {
    const key = keyOf(pod);
    if (!key) return;
    seen.first ??= pod;
    if (pod.spec?.nodeName) seen.nodes.set(key, pod.spec.nodeName);
    const state = pod.status?.containerStatuses?.[0]?.state;
    if ((state?.running || state?.terminated) && !seen.running.has(key)) seen.running.set(key, Date.now());
    if (pod.status?.phase === 'Succeeded' && !seen.finished.has(key)) seen.finished.set(key, Date.now());
  }, () => {});
  seen.stop = () => req.abort();
  return seen;
}

type AtOnce = { toRunning: number[]; toResult: number[]; rate: number; template: k8s.V1Pod; perNode: string };
const perNode = (nodes: Map<string, string>): string => {
  const counts = new Map<string, number>();
  for (const n of nodes.values()) counts.set(n, (counts.get(n) ?? 0) + 1);
  return [...counts].sort().map(([n, c]) => `${n} ${c}`).join(', ');
};

async function evaluationsAtOnce(cp: ControlPlane, clusterId: string, image: string, n: number): Promise<AtOnce> {
  const ids: string[] = [];
  const pods = await watchPods(RUNS, (p) => ids.find((e) => p.metadata?.name?.includes(e)));
  const submitted = new Map<string, number>();
  const start = Date.now();
  await Promise.all(Array.from({ length: n }, async () => {
    const t = Date.now();
    const e = await submit(cp, clusterId, { ...smallEvaluation(image, { TEST_DURATION: RUN_FOR }), cpu: CPU, memory: MEMORY });
    ids.push(e);
    submitted.set(e, t);
  }));
  await until(`${n} evaluation containers to run`, () => (pods.running.size >= n ? true : undefined), { timeoutMs: 600_000, intervalMs: 100 });
  const lastRunning = Math.max(...pods.running.values());
  // results: one poller over the unfinished ones, so 100 evaluations do not mean 100 pollers
  const done = new Map<string, number>();
  await until(`${n} results at the control plane`, async () => {
    for (const e of ids.filter((x) => !done.has(x))) {
      const v = await evaluation(cp, e);
      if (FINISHED.includes(v.phase)) {
        if (v.phase !== 'Succeeded') throw new Error(`evaluation ${e} ended ${v.phase}: ${JSON.stringify(v.updates.at(-1))}`);
        done.set(e, Date.now());
      }
    }
    return done.size === n ? true : undefined;
  }, { timeoutMs: 600_000, intervalMs: 100 });
  pods.stop();
  return {
    toRunning: ids.map((e) => pods.running.get(e)! - submitted.get(e)!),
    toResult: ids.map((e) => done.get(e)! - submitted.get(e)!),
    rate: n / ((lastRunning - start) / 1000),
    template: pods.first!,
    perNode: perNode(pods.nodes),
  };
}

/**
 * The controller's own pod, as the bare peer creates it: same spec, a name of its own, no owner, not yet placed,
 * and without the init container that waits for the runs namespace's NetworkPolicies (which the peer's namespace
 * has none of, so it would never pass): the platform's pods pay for that wait, the peer's do not.
 */
function barePod(template: k8s.V1Pod, name: string): k8s.V1Pod {
  const { nodeName: _, initContainers: __, ...spec } = template.spec!;
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: BARE_NS }, spec };
}

async function kubectlLoop(template: k8s.V1Pod, n: number): Promise<AtOnce> {
  kubectl(['delete', 'namespace', BARE_NS, '--ignore-not-found', '--wait=true', '--timeout=180s']);
  kubectl(['create', 'namespace', BARE_NS]);
  kubectl(['label', 'namespace', BARE_NS, 'pod-security.kubernetes.io/enforce=restricted']);
  for (const name of (template.spec!.imagePullSecrets ?? []).map((r) => r.name!)) {
    const secret = JSON.parse(kubectl(['-n', RUNS, 'get', 'secret', name, '-o', 'json']).stdout) as k8s.V1Secret;
    const copy = { apiVersion: 'v1', kind: 'Secret', type: secret.type, metadata: { name, namespace: BARE_NS }, data: secret.data };
    kubectl(['apply', '-f', '-'], { input: JSON.stringify(copy) });
  }
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-bare-'));
  const names = Array.from({ length: n }, (_, i) => `bare-${String(i).padStart(3, '0')}`);
  for (const name of names) writeFileSync(join(dir, `${name}.json`), JSON.stringify(barePod(template, name)));
  const pods = await watchPods(BARE_NS, (p) => p.metadata?.name);
  const created = new Map<string, number>();
  const start = Date.now();
  let lastRunning = 0;
  try {
    // the peer: an operator's shell loop, one `kubectl create` per pod; each pod's clock starts as its kubectl starts
    for (const name of names) {
      created.set(name, Date.now());
      const r = run('kubectl', ['create', '-f', join(dir, `${name}.json`)]);
      if (r.status !== 0) throw new Error(`kubectl create ${name}: ${r.stderr}`);
    }
    await until(`${n} bare containers to run`, () => (pods.running.size >= n ? true : undefined), { timeoutMs: 600_000, intervalMs: 100 });
    lastRunning = Math.max(...pods.running.values());
    await until(`${n} bare pods to succeed`, () => (pods.finished.size >= n ? true : undefined), { timeoutMs: 600_000, intervalMs: 100 });
  } finally {
    pods.stop();
    rmSync(dir, { recursive: true, force: true });
    kubectl(['delete', 'namespace', BARE_NS, '--wait=false']);
  }
  return {
    toRunning: names.map((x) => pods.running.get(x)! - created.get(x)!),
    toResult: names.map((x) => pods.finished.get(x)! - created.get(x)!),
    rate: n / ((lastRunning - start) / 1000),
    template,
    perNode: perNode(pods.nodes),
  };
}

if (NODES === 3) await ensureThreeRealNodes();
cleanSlate();
const chart = releasedChart();
const cp = await controlPlane(chart);
try {
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'bench-real-node' });
  const id = created.body.clusterId;
  const runtimeRepo = `registry.rlmesh.dev/${(JSON.parse(readFileSync(join(clusterDir(), 'release/release.json'), 'utf8')) as { images: Record<string, { repository: string }> }).images['rlmesh-runtime']!.repository}`;
  for (const n of realNodes()) {
    const refs = run('/usr/bin/ctr', ['--address', n.containerdSocket, '-n', 'k8s.io', 'images', 'ls', '-q']).stdout.split('\n').filter((r) => r.startsWith(runtimeRepo));
    if (refs.length) run('/usr/bin/ctr', ['--address', n.containerdSocket, '-n', 'k8s.io', 'images', 'rm', '--sync', ...refs]);
  }
  const installStart = Date.now();
  runInstallCommand(cp, created.body.installCommand);
  await waitConnected(cp, id, 120);
  const firstInstall = Date.now() - installStart;
  const image = await evaluationImage();

  // agent pod start -> Connected: the session drops when the pod goes, and the new pod's session shows as a newer lastSeenAt
  const agentStart = async (): Promise<number> => {
    await rt.scale('agent', 0);
    await until('the control plane to see the agent gone', async () => ((await clusterRow(cp, id)).status !== 'Connected' ? true : undefined), { timeoutMs: 120_000 });
    const t = Date.now();
    kubectl(['-n', NS, 'scale', 'deployment/rlmesh-cluster-agent', '--replicas=1']);
    await waitConnected(cp, id, 180);
    return Date.now() - t;
  };
  const cached = [await agentStart(), await agentStart(), await agentStart()];

  // N evaluations at once on one real node, then the same N pods created by a bare `kubectl create` loop
  const figures: string[] = [];
  for (const n of SIZES) {
    const ours = await evaluationsAtOnce(cp, id, image, n);
    const bare = await kubectlLoop(ours.template, n);
    const ratio = ours.rate / bare.rate;
    figures.push(
      `  ${String(n).padStart(3)} at once, platform: submitted -> container running p50 ${s(pct(ours.toRunning, 50))} p99 ${s(pct(ours.toRunning, 99))}; ` +
        `-> result at the control plane p50 ${s(pct(ours.toResult, 50))} p99 ${s(pct(ours.toResult, 99))}; ${ours.rate.toFixed(2)} running/s`,
      `  ${String(n).padStart(3)} at once, bare kubectl create loop: created -> container running p50 ${s(pct(bare.toRunning, 50))} p99 ${s(pct(bare.toRunning, 99))}; ` +
        `-> pod Succeeded p50 ${s(pct(bare.toResult, 50))} p99 ${s(pct(bare.toResult, 99))}; ${bare.rate.toFixed(2)} running/s`,
      `      rate platform / bare loop ${ratio.toFixed(2)}x (goal >= 0.8x: ${ratio >= 0.8 ? 'met' : 'not met'})`,
      ...(NODES > 1 ? [`      on the nodes, platform: ${ours.perNode}; bare loop: ${bare.perNode}`] : []),
    );
  }

  // memory of each chart pod from its cgroup (v1 memory hierarchy under the node's cgroup)
  const memory: string[] = [];
  for (const w of ['agent', 'controller', 'filler', 'egress'] as Workload[]) {
    for (const p of rt.pods(w)) {
      const node = realNodes().find((n) => n.name === p.spec.nodeName)!;
      const dir = podCgroupDir(node, p.metadata.uid, 'memory');
      const mib = (f: string) => Number(readFileSync(join(dir, f), 'utf8')) / 2 ** 20;
      const limit = kubectl(['-n', w === 'filler' ? RUNS : NS, 'get', 'pod', p.metadata.name, '-o', 'jsonpath={.spec.containers[0].resources.limits.memory}']).stdout;
      memory.push(`${w.padEnd(10)} ${p.metadata.name}: ${mib('memory.usage_in_bytes').toFixed(0)} MiB now, ${mib('memory.max_usage_in_bytes').toFixed(0)} MiB peak, limit ${limit}`);
    }
  }

  const spread = (['controller', 'egress'] as Workload[]).map((w) => `${w} on ${rt.pods(w).map((p) => p.spec.nodeName).sort().join(', ')}`).join('; ');
  console.log(NODES === 1
    ? '\nreal node: the chart as it ships, on one real node (2 CPUs shared with the control plane and the tests)'
    : `\nreal nodes: the chart as it ships, on three real nodes (sharing this machine's 2 CPUs with the control plane); replicas: ${spread}`);
  console.log(`  agent pod start -> Connected, image cached      ${cached.map(s).join(', ')}`);
  console.log(`  helm install -> all pods Ready, agent Connected, runtime image not in containerd  ${s(firstInstall)}`);
  console.log(`  evaluations of the test image (each runs ${RUN_FOR}, requests ${CPU} CPU and ${MEMORY}); rate = N / (first submission -> last container running)`);
  for (const f of figures) console.log(f);
  for (const m of memory) console.log(`  memory ${m}`);
} finally {
  await cp.stop();
  cleanSlate();
  if (NODES === 3) await stopExtraRealNodes();
}
