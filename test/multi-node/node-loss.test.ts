// A node that dies mid-run and a node drained for maintenance, on three real
// nodes, each counted for lost and duplicated updates as the fault suite counts
// them (lostAndDuplicated). What runs where is pinned only by cordoning nodes,
// as an operator would; the test leaves the three nodes as it found them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killRealNode, startRealNode, stopRealNode } from '../cluster/real-node.ts';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { clusterInfo, kubectl } from '../support/cluster.ts';
import { MULTI_NODE_GRACE_SECONDS, MULTI_NODE_NAMES } from '../support/multi-node.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import {
  NS, RUNS, Runtime, cleanSlate, controlPlane, evaluation, evaluationImage, lostAndDuplicated, releasedChart, runInstallCommand, smallEvaluation, submit,
  waitConnected, waitFinished, type Chart, type EvaluationView, type Workload,
} from '../e2e/harness.ts';

let chart: Chart;
let cp: ControlPlane;
let clusterId = '';
let image = '';
const rt = new Runtime();
const figures: string[] = [];

type Rle = { metadata: { name: string }; status?: { phase?: string; reason?: string; message?: string; nodeName?: string; startTime?: string } };
const rle = (id: string): Rle => JSON.parse(kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', id, '-o', 'json']).stdout) as Rle;
const nodeOf = (w: Workload): string[] => rt.pods(w).map((p) => p.spec.nodeName ?? '');
const cordon = (nodes: string[]): void => void (nodes.length && kubectl(['cordon', ...nodes]));
const uncordon = (nodes: string[]): void => void (nodes.length && kubectl(['uncordon', ...nodes], { allowFail: true }));
const others = (node: string): string[] => MULTI_NODE_NAMES.filter((n) => n !== node);
const seconds = (since: number): number => Math.round((Date.now() - since) / 1000);

/** A real node that carries none of kube-system's pods (CoreDNS): losing it must not take the cluster's DNS with it. */
function victimNode(exclude: string[] = []): string {
  const busy = kubectl(['-n', 'kube-system', 'get', 'pods', '-o', 'jsonpath={.items[*].spec.nodeName}']).stdout.split(/\s+/);
  const node = ['real-2', 'real-1'].find((n) => !busy.includes(n) && !exclude.includes(n));
  if (!node) throw new Error(`no real node free of kube-system pods among real-1 and real-2 (kube-system runs on ${busy.join(' ')})`);
  return node;
}

/** With every other node cordoned, moves one replica of `w` onto `node` (deleting one elsewhere), unless one is there. */
async function oneReplicaOn(w: Workload, node: string, all = false): Promise<void> {
  const pods = rt.pods(w);
  // one on the node already: the others stay where they are (deleting one would bring it to the node too, the only one not cordoned)
  const elsewhere = all || !pods.some((p) => p.spec.nodeName === node) ? pods.filter((p) => p.spec.nodeName !== node) : [];
  for (const p of all ? elsewhere : elsewhere.slice(0, 1)) kubectl(['-n', NS, 'delete', 'pod', p.metadata.name, '--wait=false']);
  await until(`${w} on ${node}`, () => {
    const pods = rt.pods(w);
    const on = pods.filter((p) => p.spec.nodeName === node && p.status.containerStatuses?.[0]?.ready);
    return (all ? pods.length > 0 && on.length === pods.length : on.length > 0) ? true : undefined;
  }, { timeoutMs: 180_000 });
  await rt.ready(w);
}

/** Submits `n` evaluations of `duration` and waits until they run, each on one of `nodes`. */
async function running(n: number, duration: string, nodes: string[]): Promise<string[]> {
  const ids = await Promise.all(Array.from({ length: n }, () => submit(cp, clusterId, { ...smallEvaluation(image, { TEST_DURATION: duration }), deadlineSeconds: '3600' })));
  await until(`${n} evaluations to run on ${nodes.join(' ')}`, () => {
    const ok = ids.every((id) => {
      const s = kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', id, '-o', 'jsonpath={.status.phase} {.status.nodeName}'], { allowFail: true }).stdout.split(' ');
      return s[0] === 'Running' && nodes.includes(s[1] ?? '');
    });
    return ok ? true : undefined;
  }, { timeoutMs: 180_000, intervalMs: 1000 });
  return ids;
}

/** Every update the cluster produced held once: the counts of lostAndDuplicated over `ids`, with the accounts of those that lost or doubled one. */
function account(views: EvaluationView[], fault: string): void {
  let lost = 0;
  let duplicated = 0;
  const accounts: string[] = [];
  for (const e of views) {
    const inCluster = rle(e.id);
    const r = lostAndDuplicated(e, inCluster.status?.phase ?? '', inCluster.status?.startTime !== undefined);
    lost += r.lost;
    duplicated += r.duplicated;
    if (r.lost || r.duplicated) accounts.push(`${e.id} (in the cluster ${inCluster.status?.phase}): ${JSON.stringify(e.updates)}`);
  }
  figures.push(`${fault}: ${views.length} evaluations, updates lost ${lost}, duplicated ${duplicated}`);
  expect({ lost, duplicated }, accounts.join('\n')).toEqual({ lost: 0, duplicated: 0 });
}

const lastReason = (e: EvaluationView): string | undefined => (e.updates.at(-1) as { reason?: string } | undefined)?.reason;

beforeAll(async () => {
  cleanSlate();
  uncordon([...MULTI_NODE_NAMES]);
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'node-loss' });
  clusterId = created.body.clusterId;
  runInstallCommand(cp, created.body.installCommand);
  await waitConnected(cp, clusterId);
}, 600_000);

afterAll(async () => {
  console.log(`\nnode loss and drain figures:\n  ${figures.join('\n  ')}`);
  uncordon([...MULTI_NODE_NAMES]);
  await cp?.stop();
  cleanSlate();
});

describe('node loss and maintenance on three real nodes', () => {
  it('a node dies mid-run with evaluations, a controller, a proxy and the agent: the rest goes on, its evaluations fail as NodeLost, the agent comes back elsewhere with its spool', async () => {
    const victim = victimNode();
    cordon(others(victim));
    let killed = false;
    try {
      for (const w of ['controller', 'egress', 'agent'] as const) await oneReplicaOn(w, victim);
      await waitConnected(cp, clusterId);
      const onVictim = await running(4, '30m', [victim]);
      uncordon(others(victim));
      cordon([victim]);
      const elsewhere = await running(4, '60s', others(victim));
      const holder = kubectl(['-n', NS, 'get', 'lease', 'rlmesh-cluster-controller', '-o', 'jsonpath={.spec.holderIdentity}']).stdout;
      const leaderOnVictim = rt.pods('controller').some((p) => p.spec.nodeName === victim && holder.includes(p.metadata.name));

      const t0 = Date.now();
      await killRealNode(victim);
      killed = true;
      const renewedBy = await until('a live controller to hold the Lease', () => {
        const lease = JSON.parse(kubectl(['-n', NS, 'get', 'lease', 'rlmesh-cluster-controller', '-o', 'json']).stdout) as { spec: { holderIdentity: string; renewTime: string } };
        const live = rt.pods('controller').find((p) => p.spec.nodeName !== victim && lease.spec.holderIdentity.includes(p.metadata.name));
        return live && Date.parse(lease.spec.renewTime) > t0 ? live.metadata.name : undefined;
      }, { timeoutMs: 120_000 });
      figures.push(`node loss: the Lease held by ${renewedBy} after ${seconds(t0)} s (the leader ${leaderOnVictim ? 'was' : 'was not'} on ${victim})`);

      // evaluations elsewhere go on and succeed, also while the agent is away
      const done = await Promise.all(elsewhere.map((id) => waitFinished(cp, id, 420)));
      expect(done.map((e) => e.phase)).toEqual(elsewhere.map(() => 'Succeeded'));

      await until(`node ${victim} Ready Unknown`, () => (kubectl(['get', 'node', victim, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']).stdout === 'Unknown' ? true : undefined), { timeoutMs: 300_000, intervalMs: 1000 });
      const unknownAt = Date.parse(kubectl(['get', 'node', victim, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].lastTransitionTime}']).stdout);
      figures.push(`node loss: ${victim} Ready Unknown ${Math.round((unknownAt - t0) / 1000)} s after the kill (--node-monitor-grace-period ${MULTI_NODE_GRACE_SECONDS} s)`);
      const lost = await Promise.all(onVictim.map((id) => waitFinished(cp, id, 420)));
      figures.push(`node loss: its ${lost.length} evaluations Failed at the control plane after ${seconds(t0)} s`);
      for (const e of lost) {
        expect(e.phase, JSON.stringify(e.updates.at(-1))).toBe('Failed');
        expect(rle(e.id).status).toMatchObject({ phase: 'Failed', reason: 'NodeLost', nodeName: victim });
        expect(lastReason(e)).toBe('NodeLost');
        expect(e.updates.at(-1)?.message).toMatch(new RegExp(`node ${victim} stopped reporting.*did not fail`));
      }

      // the agent, evicted 30 s after the node's NoExecute taint, runs elsewhere on its spool's volume
      await until('the agent to run on another node', () => {
        const pods = rt.pods('agent').filter((p) => p.spec.nodeName !== victim && p.status.containerStatuses?.[0]?.ready);
        return pods.length === 1 ? true : undefined;
      }, { timeoutMs: 300_000, intervalMs: 1000 });
      await waitConnected(cp, clusterId, 120);
      figures.push(`node loss: the agent ready on ${nodeOf('agent').filter((n) => n !== victim).join(' ')} after ${seconds(t0)} s`);
      account([...done, ...(await Promise.all(onVictim.map((id) => evaluation(cp, id))))], 'node loss');

      // the proxy's endpoints are its replicas elsewhere, and a new evaluation passes the network gate through them
      const endpoints = kubectl(['-n', NS, 'get', 'endpointslices', '-l', 'kubernetes.io/service-name=rlmesh-egress-proxy', '-o', 'jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.nodeName} {end}']).stdout.trim().split(/\s+/).filter(Boolean);
      expect(endpoints.length).toBeGreaterThan(0);
      expect(endpoints).not.toContain(victim);
      const after = await waitFinished(cp, await submit(cp, clusterId, smallEvaluation(image)), 180);
      expect(after.phase).toBe('Succeeded');
      figures.push(`node loss: proxy endpoints on ${endpoints.join(' ')}; an evaluation submitted after the loss Succeeded`);
    } finally {
      uncordon(MULTI_NODE_NAMES.filter((n) => n !== victim));
      if (killed) {
        await stopRealNode(victim, { keepHostNetwork: true });
        await startRealNode({ name: victim });
      }
      uncordon([victim]);
    }
  }, 1_200_000);

  it('kubectl drain: the PodDisruptionBudgets keep a controller and a proxy up, and evicted evaluations are reported as Evicted', async () => {
    const node = victimNode();
    cordon(others(node));
    try {
      // both replicas of each on the node: the PodDisruptionBudget must hold the second until the first is back elsewhere
      for (const w of ['controller', 'egress'] as const) await oneReplicaOn(w, node, true);
      const onNode = await running(3, '30m', [node]);
      uncordon(others(node));

      // ready pods not on their way out, sampled while the drain runs as a process of its own
      const readyNow = (w: 'controller' | 'egress'): number =>
        (rt.pods(w) as unknown as { status: { conditions?: { type: string; status: string }[] } }[])
          .filter((p) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;
      const readyCounts = { controller: Infinity, egress: Infinity };
      let samples = 0;
      const t0 = Date.now();
      // the flags a user needs: --delete-emptydir-data for the chart's pods (their /tmp); none for evaluation pods, whose controller is their RLMeshEvaluation
      const info = clusterInfo();
      const child = spawn(join(info.bin, 'kubectl'), ['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=300s'], { env: { ...process.env, KUBECONFIG: info.kubeconfig } });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      let exited: number | null | undefined;
      child.on('exit', (code) => (exited = code));
      while (exited === undefined) {
        for (const w of ['controller', 'egress'] as const) readyCounts[w] = Math.min(readyCounts[w], readyNow(w));
        samples++;
        await new Promise((r) => setTimeout(r, 200));
      }
      const drain = { status: exited, stderr };
      expect(drain.status, drain.stderr).toBe(0);
      figures.push(`drain of ${node}: ${seconds(t0)} s; fewest ready replicas not terminating in ${samples} samples during it: controller ${readyCounts.controller}, egress proxy ${readyCounts.egress}`);
      expect(samples).toBeGreaterThan(3);
      expect(readyCounts.controller).toBeGreaterThanOrEqual(1);
      expect(readyCounts.egress).toBeGreaterThanOrEqual(1);

      const views = await Promise.all(onNode.map((id) => waitFinished(cp, id, 180)));
      for (const e of views) {
        expect(e.phase).toBe('Failed');
        expect(rle(e.id).status).toMatchObject({ phase: 'Failed', reason: 'Evicted', nodeName: node });
        expect(lastReason(e)).toBe('Evicted');
        expect(e.updates.at(-1)?.message).toMatch(/Eviction API, as kubectl drain.*did not fail/);
      }
      account(views, 'drain');
    } finally {
      uncordon([...MULTI_NODE_NAMES]);
    }
  }, 900_000);
});
