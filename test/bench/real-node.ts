// Real-node benchmark (not a timed test): the chart installed from the local
// release, its pods as real containers on the local cluster's real node.
// Prints:
//   - helm install -> every pod Ready and the agent Connected, with no runtime
//     image in containerd's store (pulled by digest from the local registry);
//   - agent pod start -> Connected at the control plane, image cached;
//   - 20 evaluations of the test image submitted at once: submission -> its
//     container running, and -> the result held by the control plane, p50/p99;
//   - each chart pod's memory (its cgroup's usage and peak) against its limit.
//
//   node test/bench/real-node.ts    (needs test/cluster/up and node test/support/release.ts)
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { podCgroupDir, realNodes } from '../cluster/real-node.ts';
import { cleanSlate, clusterRow, controlPlane, evaluationImage, NS, releasedChart, runInstallCommand, Runtime, RUNS, smallEvaluation, submit, waitConnected, waitFinished, type Workload } from '../e2e/harness.ts';
import { clusterDir, kubectl, run } from '../support/cluster.ts';
import { api } from '../support/runtime.ts';
import { until } from '../support/until.ts';

const pct = (xs: number[], p: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const rt = new Runtime();

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

  // 20 evaluations at once on one real node
  const submitted = new Map<string, number>();
  const ids = await Promise.all(
    Array.from({ length: 20 }, async () => {
      const t = Date.now();
      const e = await submit(cp, id, smallEvaluation(image));
      submitted.set(e, t);
      return e;
    }),
  );
  const running = new Map<string, number>();
  await until('every container to run', () => {
    const pods = JSON.parse(kubectl(['-n', RUNS, 'get', 'pods', '-l', 'rlmesh.dev/evaluation', '-o', 'json']).stdout).items as { metadata: { name: string }; status: { containerStatuses?: { state: { running?: { startedAt: string }; terminated?: { startedAt: string } } }[] } }[];
    for (const p of pods) {
      const e = ids.find((x) => p.metadata.name.includes(x));
      const st = p.status.containerStatuses?.[0]?.state;
      const started = st?.running?.startedAt ?? st?.terminated?.startedAt;
      if (e && started && !running.has(e)) running.set(e, Date.parse(started));
    }
    return ids.every((e) => running.has(e)) ? true : undefined;
  }, { timeoutMs: 300_000, intervalMs: 200 });
  const done = new Map<string, number>();
  await Promise.all(ids.map(async (e) => {
    await waitFinished(cp, e, 300);
    done.set(e, Date.now());
  }));
  // startedAt has whole seconds: the running figure is accurate to 1 s
  const toRunning = ids.map((e) => running.get(e)! - submitted.get(e)!);
  const toResult = ids.map((e) => done.get(e)! - submitted.get(e)!);

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

  console.log('\nreal node: the chart as it ships, on one real node (2 CPUs shared with the control plane and the tests)');
  console.log(`  agent pod start -> Connected, image cached      ${cached.map(s).join(', ')}`);
  console.log(`  helm install -> all pods Ready, agent Connected, runtime image not in containerd  ${s(firstInstall)}`);
  console.log(`  20 evaluations at once: submitted -> container running  p50 ${s(pct(toRunning, 50))}  p99 ${s(pct(toRunning, 99))}`);
  console.log(`  20 evaluations at once: submitted -> result at the control plane  p50 ${s(pct(toResult, 50))}  p99 ${s(pct(toResult, 99))}  (each runs 2 s)`);
  for (const m of memory) console.log(`  memory ${m}`);
} finally {
  await cp.stop();
  cleanSlate();
}
