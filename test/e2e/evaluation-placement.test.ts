// The operator's policy for evaluation pods on the real node: installed with
// evaluations.runtimeClassName (a RuntimeClass whose handler is containerd's runc, the
// runtime test/cluster/real-node.ts configures), a PriorityClass, a nodeSelector on the
// real node's hostname and labels, an evaluation runs as a real container with them all;
// an assignment whose node selector conflicts is refused by the agent as PlacementConflict
// and the platform holds that as the evaluation's final status, with no object created.
// Installed with commonLabels, which every object the agent and the controller create carries.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realNodes } from '../cluster/real-node.ts';
import { kubectl } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { NS, PLUMBING, RUNS, cleanSlate, controlPlane, evaluationImage, localValues, quoted, releasedChart, runPrinted, smallEvaluation, submit, upgradeReusing, waitConnected, waitFinished, type Chart } from './harness.ts';

const RUNTIME_CLASS = 'rlmesh-e2e-runc';
const PRIORITY_CLASS = 'rlmesh-e2e-evaluations';
const COMMON = { key: 'example.com/tenant', value: 'ml-platform' };
/** `kind` objects of `ns` that carry the commonLabels, by name. */
const labelled = (ns: string, kind: string): string[] =>
  kubectl(['-n', ns, 'get', kind, '-l', `${COMMON.key}=${COMMON.value}`, '-o', 'jsonpath={.items[*].metadata.name}']).stdout.split(' ').filter(Boolean);

let chart: Chart;
let cp: ControlPlane;
let image = '';
let clusterId = '';
let node = '';

beforeAll(async () => {
  cleanSlate();
  node = realNodes()[0]!.name;
  kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [
        { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: RUNTIME_CLASS }, handler: 'runc' },
        { apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name: PRIORITY_CLASS }, value: 100, preemptionPolicy: 'Never' },
      ],
    }),
  });
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'placement' });
  clusterId = created.body.clusterId;
  runPrinted(`${created.body.installCommand} ${quoted([...localValues(cp), '--set', `commonLabels.${COMMON.key.replace(/\./g, '\\.')}=${COMMON.value}`, ...PLUMBING])}`);
  await waitConnected(cp, clusterId);
  upgradeReusing(chart, [
    '--set', `evaluations.nodeSelector.kubernetes\\.io/hostname=${node}`,
    '--set', `evaluations.runtimeClassName=${RUNTIME_CLASS}`,
    '--set', `evaluations.priorityClassName=${PRIORITY_CLASS}`,
    '--set', 'evaluations.podLabels.example\\.com/cost-center=rl-e2e',
    '--set', 'evaluations.podAnnotations.example\\.com/owner=platform-team',
    '--wait', '--timeout', '5m',
  ]);
  await waitConnected(cp, clusterId);
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  cleanSlate();
  kubectl(['delete', 'runtimeclass', RUNTIME_CLASS, '--ignore-not-found'], { allowFail: true });
  kubectl(['delete', 'priorityclass', PRIORITY_CLASS, '--ignore-not-found'], { allowFail: true });
});

describe('evaluation placement on the real node', () => {
  it('the RuntimeClass, PriorityClass, nodeSelector, labels and annotations reach the pod, which runs under runc', async () => {
    const id = await submit(cp, clusterId, smallEvaluation(image, { TEST_DURATION: '20s' }));
    // while it runs: the controller garbage-collects finished evaluations and their pods
    const pod = await until('the evaluation pod running', () => {
      const pods = JSON.parse(kubectl(['-n', RUNS, 'get', 'pods', '-o', 'json']).stdout) as { items: { metadata: { annotations?: Record<string, string>; labels?: Record<string, string> }; spec: Record<string, unknown>; status: { phase?: string } }[] };
      const p = pods.items.find((i) => i.metadata.annotations?.['rlmesh.dev/evaluation-id'] === id);
      return p?.status.phase === 'Running' ? p : undefined;
    }, { timeoutMs: 180_000, intervalMs: 1000 });
    expect(pod.spec.runtimeClassName).toBe(RUNTIME_CLASS);
    expect(pod.spec.priorityClassName).toBe(PRIORITY_CLASS);
    expect(pod.spec.priority).toBe(100);
    expect(pod.spec.nodeName).toBe(node);
    expect(pod.spec.nodeSelector).toMatchObject({ 'kubernetes.io/hostname': node });
    expect(pod.metadata.labels).toMatchObject({ 'example.com/cost-center': 'rl-e2e', [COMMON.key]: COMMON.value });
    expect(labelled(RUNS, 'rlmeshevaluations').length).toBeGreaterThan(0);
    expect(pod.metadata.annotations).toMatchObject({ 'example.com/owner': 'platform-team' });
    const done = await waitFinished(cp, id, 180);
    expect(done.phase, JSON.stringify(done.updates)).toBe('Succeeded');
  });

  it('commonLabels reach what the agent and the controller create: their Secrets, ConfigMaps and Leases', () => {
    expect(labelled(NS, 'secrets')).toEqual(expect.arrayContaining(['rlmesh-cluster-control', 'rlmesh-registry-pull']));
    expect(labelled(RUNS, 'secrets')).toContain('rlmesh-registry-pull');
    expect(labelled(NS, 'configmaps')).toEqual(expect.arrayContaining(['rlmesh-agent-status', 'rlmesh-preflight', 'rlmesh-network-policy-probe']));
    expect(labelled(NS, 'leases').length).toBeGreaterThan(0);
  });

  it('an assignment for another node is refused as PlacementConflict, and the platform holds that as its final status', async () => {
    const id = await submit(cp, clusterId, { ...smallEvaluation(image), nodeSelector: { 'kubernetes.io/hostname': 'some-other-node' } });
    const done = await waitFinished(cp, id, 60);
    expect(done.phase).toBe('Failed');
    const text = JSON.stringify(done);
    expect(text).toContain('PlacementConflict');
    expect(text).toContain('kubernetes.io/hostname=some-other-node');
    expect(text).toContain(`kubernetes.io/hostname=${node}`);
    expect(text).toContain('evaluations.nodeSelector.kubernetes.io/hostname');
    expect(kubectl(['-n', RUNS, 'get', 'rlmeshevaluations', '-o', 'name']).stdout).not.toContain(id);
  });
});
