// Faults a production cluster meets, each with the count of evaluation updates
// the control plane lost and holds twice (both must be 0): per evaluation, the
// agent numbers its updates 1..n, so a gap is a loss and a repeat a duplicate.
// The chart's pods and the evaluations run as real containers on the real
// node; a kill is SIGKILL to a container's process through containerd.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterDir, kubectl } from '../support/cluster.ts';
import { realNodes } from '../cluster/real-node.ts';
import { api, ROOT, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import {
  installNewCluster,
  NS, Runtime, cleanSlate, controlPlane, evaluation, evaluationImage, lostAndDuplicated, releasedChart, smallEvaluation, submit,
  waitConnected, waitFinished, FINISHED, type Chart,
} from './harness.ts';

let chart: Chart;
let cp: ControlPlane;
let clusterId = '';
let image = '';
const rt = new Runtime();
const figures: string[] = [];

async function burst(n: number): Promise<string[]> {
  return Promise.all(Array.from({ length: n }, () => submit(cp, clusterId, smallEvaluation(image))));
}

/**
 * Every evaluation finished, none of its updates lost or held twice. One that
 * ran (the controller's Started event, or a status.startTime) must have its
 * Running held too, even if the agent or its watch was down while it ran.
 */
async function accountFor(ids: string[], fault: string, seconds = 240): Promise<void> {
  let lost = 0;
  let duplicated = 0;
  // the updates the control plane holds for each evaluation that lost or doubled one: what the failure shows
  const accounts: string[] = [];
  for (const id of ids) {
    const e = await waitFinished(cp, id, seconds);
    const inCluster = JSON.parse(kubectl(['-n', 'rlmesh-runs', 'get', 'rlmeshevaluation', id, '-o', 'json']).stdout) as { status: { phase: string; message?: string; startTime?: string } };
    expect(e.phase, `${id} after ${fault}: ${inCluster.status.message}`).toBe('Succeeded');
    const events = JSON.parse(kubectl(['-n', 'rlmesh-runs', 'get', 'events', '--field-selector', `involvedObject.kind=RLMeshEvaluation,involvedObject.name=${id}`, '-o', 'json']).stdout).items as { reason: string }[];
    const ran = events.some((ev) => ev.reason === 'Started') || inCluster.status.startTime !== undefined;
    const r = lostAndDuplicated(e, inCluster.status.phase, ran);
    lost += r.lost;
    duplicated += r.duplicated;
    if (r.lost || r.duplicated) accounts.push(`${id} (in the cluster ${inCluster.status.phase}): ${JSON.stringify(e.updates)}`);
  }
  figures.push(`${fault}: ${ids.length} evaluations, updates lost ${lost}, duplicated ${duplicated}`);
  expect({ lost, duplicated }, accounts.join('\n')).toEqual({ lost: 0, duplicated: 0 });
}

beforeAll(async () => {
  cleanSlate();
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  clusterId = await installNewCluster(cp, 'faults');
}, 300_000);

afterAll(async () => {
  console.log(`\nfault figures:\n  ${figures.join('\n  ')}`);
  await cp?.stop();
  cleanSlate();
});

describe('faults lose and duplicate nothing', () => {
  it('control-plane restart mid-run', async () => {
    const ids = await burst(20);
    await new Promise((r) => setTimeout(r, 500));
    await cp.stop();
    await new Promise((r) => setTimeout(r, 3000));
    cp = await controlPlane(chart, cp.dataDir);
    await waitConnected(cp, clusterId);
    await accountFor(ids, 'control-plane restart');
  });

  it('agent kill -9 mid-run (the spool on its PVC survives)', async () => {
    const ids = await burst(20);
    // mid-run: some updates already delivered, most still to come
    await until('the first updates to arrive', async () => {
      const held = await Promise.all(ids.map(async (id) => (await evaluation(cp, id)).updates.length));
      return held.filter((n) => n > 0).length >= 3 ? true : undefined;
    }, { timeoutMs: 60_000, intervalMs: 50 });
    const before = rt.pod('agent');
    rt.kill(before);
    await until('the kubelet to restart the agent', () => (rt.pod('agent').status.containerStatuses?.[0]?.restartCount ?? 0) > (before.status.containerStatuses?.[0]?.restartCount ?? 0) || undefined, { timeoutMs: 60_000 });
    await rt.ready('agent');
    await waitConnected(cp, clusterId);
    await accountFor(ids, 'agent kill -9');
  });

  it('controller kill -9 mid-run: the lease is held again (by the other replica, or by the restarted container) and nothing is lost', async () => {
    const ids = await burst(20);
    await new Promise((r) => setTimeout(r, 500));
    const holder = kubectl(['-n', NS, 'get', 'lease', 'rlmesh-cluster-controller', '-o', 'jsonpath={.spec.holderIdentity}']).stdout;
    const leader = rt.pods('controller').find((p) => holder.includes(p.metadata.name));
    expect(leader, `lease holder ${holder} is one of the controller's pods`).toBeDefined();
    const killedAt = Date.now();
    rt.kill(leader!);
    const renewedBy = await until('a live controller to renew the lease', () => {
      const lease = JSON.parse(kubectl(['-n', NS, 'get', 'lease', 'rlmesh-cluster-controller', '-o', 'json']).stdout) as { spec: { holderIdentity: string; renewTime: string } };
      return Date.parse(lease.spec.renewTime) > killedAt + 1000 ? lease.spec.holderIdentity : undefined;
    }, { timeoutMs: 90_000 });
    figures.push(`controller kill -9: lease renewed by ${renewedBy.includes(leader!.metadata.name) ? 'the restarted container of the killed leader' : 'the other replica'}`);
    await accountFor(ids, 'controller kill -9 (leader fail-over)');
  });

  it('kubelet and containerd restart on the node: running containers and the session survive', async () => {
    const ids = await burst(10);
    const node = realNodes().find((n) => n.name === rt.pod('agent').spec.nodeName)!;
    execFileSync(join(ROOT, 'test/cluster/restart'), [`${node.name}.containerd`, '--kill'], { env: { ...process.env, RLMESH_CLUSTER_DIR: clusterDir() }, stdio: 'inherit' });
    execFileSync(join(ROOT, 'test/cluster/restart'), [`${node.name}.kubelet`, '--kill'], { env: { ...process.env, RLMESH_CLUSTER_DIR: clusterDir() }, stdio: 'inherit' });
    await accountFor(ids, 'kubelet and containerd restart');
  });

  it('apiserver restart: informers and watches recover', async () => {
    const ids = await burst(10);
    execFileSync(join(ROOT, 'test/cluster/restart'), ['kube-apiserver', '--kill'], { env: { ...process.env, RLMESH_CLUSTER_DIR: clusterDir() }, stdio: 'inherit' });
    const after = await burst(10);
    await accountFor([...ids, ...after], 'apiserver restart');
  });

  it('the network between agent and control plane cut for 2 minutes, then restored; evaluations keep running', async () => {
    const ids = await burst(10);
    await until('the assignments to reach the cluster', () => {
      const n = kubectl(['-n', 'rlmesh-runs', 'get', 'rlmeshevaluations', '-o', 'name']).stdout.split('\n').filter((l) => ids.some((id) => l.endsWith(id))).length;
      return n === ids.length ? true : undefined;
    }, { timeoutMs: 60_000 });
    cp.proc.kill('SIGSTOP'); // the control plane goes silent: packets reach nothing that answers
    try {
      // evaluations run to completion in the cluster while the platform is away
      await until('the evaluations to finish in the cluster', () => {
        const phases = JSON.parse(kubectl(['-n', 'rlmesh-runs', 'get', 'rlmeshevaluations', '-o', 'json']).stdout).items
          .filter((e: { metadata: { name: string } }) => ids.some((id) => e.metadata.name.endsWith(id)))
          .map((e: { status?: { phase?: string } }) => e.status?.phase);
        return phases.length === ids.length && phases.every((p: string) => FINISHED.includes(p)) ? true : undefined;
      }, { timeoutMs: 120_000 });
      await new Promise((r) => setTimeout(r, 120_000));
    } finally {
      cp.proc.kill('SIGCONT');
    }
    await waitConnected(cp, clusterId, 120);
    await accountFor(ids, 'network cut for 2 minutes');
  }, 420_000);

  it('a revoked credential: refused with a clear message, the agent stays up and keeps what it owes', async () => {
    const rotated = await api<{ value: string }>(cp, 'POST', `/v1/clusters/${clusterId}/archive`);
    expect(rotated.status).toBe(200);
    const line = await until('the agent to explain', () => rt.log('agent').split('\n').find((l) => /archived|revoked/.test(l)), { timeoutMs: 60_000 });
    expect(line).not.toMatch(/"stack"/);
    const before = rt.pod('agent');
    await new Promise((r) => setTimeout(r, 3000));
    const after = rt.pod('agent');
    expect(after.metadata.uid).toBe(before.metadata.uid);
    expect(after.status.containerStatuses?.[0]?.restartCount).toBe(before.status.containerStatuses?.[0]?.restartCount);
    figures.push(`revoked credential: agent alive, says: ${JSON.parse(line).msg}`);
  });
});

