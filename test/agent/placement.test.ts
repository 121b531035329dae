// The operator's policy for evaluation pods, as the agent applies it (kwok nodes, the
// agent as a process under the chart's RBAC): it offers the platform only the nodes the
// policy allows (evaluations.nodeSelector, required node terms, tolerated taints), and
// refuses an assignment whose node selector conflicts with it as PlacementConflict,
// before any RLMeshEvaluation exists, reporting the reason to the platform.
import { describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { api } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { applyKwokNode, deleteNodes } from '../support/kwok-node.ts';
import { newCluster, runtimeConfig, RUNS } from './harness.ts';
import { agentSuite } from './suite.ts';

type ReportedNode = { name: string; schedulable?: boolean; cpuMillisFree?: string };
const GROUP = 'rlmesh.dev/agent-it-placement';
const POOL = 'example.com/pool';
const ZONE = 'example.com/zone';
const OK = 'rlmesh-agent-it-place-ok';
const OTHER_POOL = 'rlmesh-agent-it-place-train';
const OTHER_ZONE = 'rlmesh-agent-it-place-zone-c';
const TAINTED = 'rlmesh-agent-it-place-tainted';

describe('agent: the operator\'s placement policy', () => {
  const suite = agentSuite({ joinToken: true }, { after: async () => deleteNodes(OK, OTHER_POOL, OTHER_ZONE, TAINTED) });

  it('offers only the nodes the policy allows, and refuses a conflicting assignment as PlacementConflict', async () => {
    applyKwokNode(OK, { labels: { [GROUP]: 'yes', [POOL]: 'evals', [ZONE]: 'a' } });
    applyKwokNode(OTHER_POOL, { labels: { [GROUP]: 'yes', [POOL]: 'train', [ZONE]: 'a' } });
    applyKwokNode(OTHER_ZONE, { labels: { [GROUP]: 'yes', [POOL]: 'evals', [ZONE]: 'c' } });
    applyKwokNode(TAINTED, { labels: { [GROUP]: 'yes', [POOL]: 'evals', [ZONE]: 'b' } });
    kubectl(['taint', 'node', TAINTED, 'nvidia.com/gpu=present:NoSchedule', '--overwrite']);

    const { clusterId, joinToken } = await newCluster(suite.cp, 'placement');
    const placement = {
      nodeSelector: { [POOL]: 'evals' },
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: ZONE, operator: 'In', values: ['a', 'b'] }] }] } } },
    };
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp, { nodeSelector: `${GROUP}=yes`, placement }), token: joinToken });
    await agent.waitFor('connected', /session connected/);
    const reported = async () => {
      const nodes = (await api<{ nodeReport: { report: { nodes: ReportedNode[] } } | null }>(suite.cp, 'GET', `/v1/clusters/${clusterId}`)).body.nodeReport?.report.nodes ?? [];
      return Object.fromEntries(nodes.map((n) => [n.name, n]));
    };
    const first = await until('a report of the four nodes', async () => {
      const r = await reported();
      return [OK, OTHER_POOL, OTHER_ZONE, TAINTED].every((n) => r[n]) ? r : undefined;
    }, { timeoutMs: 20_000 });
    // agent.reportNodeSelector still decides which nodes are reported at all
    expect(Object.keys(first).sort()).toEqual([OK, OTHER_POOL, OTHER_ZONE, TAINTED].sort());
    expect(first[OK]!.schedulable).toBe(true);
    expect(Number(first[OK]!.cpuMillisFree)).toBeGreaterThan(0);
    for (const n of [OTHER_POOL, OTHER_ZONE, TAINTED]) {
      expect(first[n]!.schedulable ?? false, n).toBe(false);
      expect(first[n]!.cpuMillisFree ?? '0', n).toBe('0');
    }
    // the taint lifted, the node is offered in the next report
    kubectl(['taint', 'node', TAINTED, 'nvidia.com/gpu=present:NoSchedule-']);
    await until('the untainted node offered', async () => ((await reported())[TAINTED]?.schedulable ? true : undefined), { timeoutMs: 10_000, intervalMs: 100 });

    // the platform asks for another pool: refused before anything is created, with the key, both values and the value that decides
    const conflicting = await api<{ id: string }>(suite.cp, 'POST', `/v1/clusters/${clusterId}/evaluations`, {
      image: 'registry.rlmesh.dev/evals/math:1',
      deadlineSeconds: 60,
      nodeSelector: { [POOL]: 'train' },
    });
    const refused = await until('the refusal reported', async () => {
      const e = (await api<{ phase: string; reason?: string; message?: string }>(suite.cp, 'GET', `/v1/evaluations/${conflicting.body.id}`)).body;
      return e.phase === 'Failed' ? e : undefined;
    }, { timeoutMs: 20_000 });
    const text = JSON.stringify(refused);
    expect(text).toContain('PlacementConflict');
    expect(text).toContain(`${POOL}=train`);
    expect(text).toContain(`${POOL}=evals`);
    expect(text).toContain(`evaluations.nodeSelector.${POOL}`);
    expect(kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', conflicting.body.id], { allowFail: true }).status).not.toBe(0);

    // a node selector that only narrows the policy is accepted
    const narrowing = await api<{ id: string }>(suite.cp, 'POST', `/v1/clusters/${clusterId}/evaluations`, {
      image: 'registry.rlmesh.dev/evals/math:1',
      deadlineSeconds: 60,
      nodeSelector: { [POOL]: 'evals', [ZONE]: 'a' },
    });
    await until('the narrowing evaluation created', () => (kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', narrowing.body.id], { allowFail: true }).status === 0 ? true : undefined), { timeoutMs: 20_000 });
    await agent.stop();
  });
});
