// kill -9 of the agent in the middle of a burst of 1,000 evaluation updates:
// every update is spooled (fsync'd) before it is sent and resent until acked,
// and the control plane dedupes by id — so it holds each exactly once.
import * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_VERSION, EVALUATION, GROUP, VERSION } from '../../lib/crds/types.ts';
import { adminKubeConfig, kubectl } from '../support/cluster.ts';
import { api } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { cluster, newCluster, runtimeConfig, RUNS } from './harness.ts';
import { agentSuite } from './suite.ts';

const TOTAL = 1000;

describe('agent spool', () => {
  const suite = agentSuite({ joinToken: true }, {
    before: async () => {
      await until('no evaluations left', () => (kubectl(['-n', RUNS, 'get', 'rlmeshevaluations', '-o', 'name']).stdout.trim() === '' ? true : undefined), { timeoutMs: 120_000, intervalMs: 1000 });
    },
    after: async () => {
      kubectl(['-n', RUNS, 'delete', 'rlmeshevaluations', '--all', '--wait=false'], { allowFail: true });
    },
  });

  it('kill -9 during a burst of 1,000 updates: the control plane holds each exactly once', async () => {
    const { clusterId, joinToken } = await newCluster(suite.cp, 'burst');
    const config = runtimeConfig(suite.cp);
    const agent = await suite.start({ configFile: config, token: joinToken });
    await agent.waitFor('connected', /session connected/);

    // each new RLMeshEvaluation is one update (Pending, Accepted) the agent owes the control plane
    const custom = adminKubeConfig().makeApiClient(k8s.CustomObjectsApi);
    let created = 0;
    const createAll = (async () => {
      const ids = Array.from({ length: TOTAL }, (_, i) => `burst-${String(i).padStart(4, '0')}`);
      const workers = Array.from({ length: 16 }, async (_, w) => {
        for (let i = w; i < ids.length; i += 16) {
          await custom.createNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: RUNS,
            plural: EVALUATION.plural,
            body: { apiVersion: API_VERSION, kind: EVALUATION.kind, metadata: { name: ids[i] }, spec: { evaluationId: ids[i], image: 'busybox', deadlineSeconds: 60 } },
          });
          created++;
        }
      });
      await Promise.all(workers);
    })();

    // once the control plane holds a share of the updates, freeze it so acks stop
    // (updates already on the wire stay in its socket buffer), let the spool fill
    // with unacked updates, then kill -9 the agent and let the control plane go on
    await until('a share of the burst delivered', async () => ((await cluster(suite.cp, clusterId)).updates.distinct >= 150 ? true : undefined), { timeoutMs: 120_000, intervalMs: 100 });
    suite.cp.proc.kill('SIGSTOP');
    let unacked = 0;
    try {
      await until('unacked updates in the spool', async () => {
        unacked = Number(/rlmesh_agent_spool_records (\d+)/.exec(await agent.metrics())?.[1] ?? 0);
        return unacked >= 50 ? true : undefined;
      }, { timeoutMs: 60_000, intervalMs: 100 });
      await agent.stop('SIGKILL');
    } finally {
      suite.cp.proc.kill('SIGCONT');
    }
    const atKill = await cluster(suite.cp, clusterId);
    expect(atKill.updates.distinct).toBeLessThan(TOTAL);
    await createAll;
    expect(created).toBe(TOTAL);

    const restarted = await suite.start({ configFile: config, token: joinToken, spoolDir: agent.spoolDir });
    await restarted.waitFor('reconnected', /session connected/);
    const loaded = restarted.lines().find((l) => l.msg === 'agent spool loaded')!;
    expect(loaded.pendingUpdates as number).toBeGreaterThan(0);
    const done = await until('all updates delivered', async () => {
      const c = await cluster(suite.cp, clusterId);
      return c.updates.distinct >= TOTAL ? c : undefined;
    }, { timeoutMs: 180_000, intervalMs: 500 });
    // settle, then check nothing arrives twice under a new id
    await new Promise((r) => setTimeout(r, 3000));
    const final = await cluster(suite.cp, clusterId);
    expect(final.updates.distinct).toBe(TOTAL);
    expect(done.updates.distinct).toBe(TOTAL);
    const evs = await api<{ evaluations: { id: string; phase: string }[] }>(suite.cp, 'GET', `/v1/clusters/${clusterId}/evaluations`);
    expect(evs.body.evaluations).toHaveLength(TOTAL);
    expect(new Set(evs.body.evaluations.map((e) => e.id)).size).toBe(TOTAL);
    for (const e of evs.body.evaluations) expect(e.phase).toBe('Pending');
    // the spool is drained once everything is acked
    await until('spool drained', async () => (/rlmesh_agent_spool_records 0\b/.test(await restarted.metrics()) ? true : undefined), { timeoutMs: 30_000 });
    await restarted.stop();
  }, 300_000);
});
