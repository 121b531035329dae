// The operator's policy for evaluation pods in the controller (kwok nodes, the reconciler
// as a process under its own ServiceAccount): the pod carries the cluster's nodeSelector
// ANDed with the evaluation's, its required node terms with linux/amd64, its tolerations,
// PriorityClass, RuntimeClass, labels and annotations, and lands on the one node they
// allow; an evaluation whose placement conflicts fails as PlacementConflict with no pod.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { applyKwokNode, deleteNodes } from '../support/kwok-node.ts';
import { apply, createEvaluation, evaluation, getPod, setupEnv, startController, waitForPhase, type ControllerProcess, type Env } from './harness.ts';

let env: Env;
let reconciler: ControllerProcess;
const POOL = 'example.com/eval-pool';
const ZONE = 'example.com/eval-zone';
let node: string;
let decoy: string;
let runtimeClass: string;
let priorityClass: string;

beforeAll(async () => {
  const id = `p${Math.random().toString(16).slice(2, 8)}`;
  node = `kwok-${id}-evals`;
  decoy = `kwok-${id}-other-zone`;
  runtimeClass = `rlmesh-it-${id}`;
  priorityClass = `rlmesh-it-${id}`;
  applyKwokNode(node, { labels: { [POOL]: id, [ZONE]: 'a' } });
  applyKwokNode(decoy, { labels: { [POOL]: id, [ZONE]: 'c' } });
  // the RuntimeClass and PriorityClass must exist, or the API server refuses the pod
  apply([
    { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: runtimeClass }, handler: 'runc' },
    { apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name: priorityClass }, value: 1000, preemptionPolicy: 'Never' },
  ]);
  env = await setupEnv({
    placement: {
      nodeSelector: { [POOL]: id },
      tolerations: [{ key: 'example.com/dedicated', operator: 'Exists', effect: 'NoSchedule' }],
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: ZONE, operator: 'In', values: ['a', 'b'] }] }] } } },
      priorityClassName: priorityClass,
      runtimeClassName: runtimeClass,
      podLabels: { 'example.com/cost-center': 'rl' },
      podAnnotations: { 'example.com/owner': 'platform-team' },
    },
  });
  reconciler = await startController(env, 'reconciler', ['--gc-after-seconds=30']);
});

afterAll(async () => {
  await reconciler?.stop();
  await env?.cleanup();
  deleteNodes(node, decoy);
  kubectl(['delete', 'runtimeclass', runtimeClass, '--ignore-not-found'], { allowFail: true });
  kubectl(['delete', 'priorityclass', priorityClass, '--ignore-not-found'], { allowFail: true });
});

describe('evaluation pods under the operator\'s policy', () => {
  it('carry every value, merged with the evaluation\'s placement, and land on the only node both allow', async () => {
    await createEvaluation(env, evaluation('placed', { resources: { cpu: '100m', memory: '64Mi' }, deadlineSeconds: 120, placement: { nodeSelector: { 'kubernetes.io/os': 'linux' } } }, { duration: '1s', exitCode: 0 }));
    const done = await waitForPhase(env, 'placed', ['Succeeded', 'Failed']);
    expect(done.status?.phase, done.status?.message).toBe('Succeeded');
    const pod = (await getPod(env, 'rle-placed'))!;
    expect(pod.spec!.nodeName).toBe(node);
    expect(pod.spec!.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux', [POOL]: expect.any(String) });
    expect(pod.spec!.runtimeClassName).toBe(runtimeClass);
    expect(pod.spec!.priorityClassName).toBe(priorityClass);
    expect(pod.spec!.priority).toBe(1000);
    expect(pod.spec!.tolerations).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'example.com/dedicated', operator: 'Exists' })]));
    const terms = pod.spec!.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;
    expect(terms).toHaveLength(1);
    expect(terms[0]!.matchExpressions!.map((r) => r.key)).toEqual([ZONE, 'kubernetes.io/os', 'kubernetes.io/arch']);
    expect(pod.metadata!.labels).toMatchObject({ 'example.com/cost-center': 'rl', 'rlmesh.dev/evaluation': 'placed' });
    expect(pod.metadata!.annotations).toMatchObject({ 'example.com/owner': 'platform-team', 'rlmesh.dev/evaluation-id': 'ev_placed' });
  });

  it('an evaluation whose nodeSelector conflicts fails as PlacementConflict, naming the key, both values and the chart value, with no pod', async () => {
    await createEvaluation(env, evaluation('conflict', { deadlineSeconds: 120, placement: { nodeSelector: { [POOL]: 'somewhere-else' } } }));
    const failed = await waitForPhase(env, 'conflict', ['Failed', 'Succeeded', 'Running']);
    expect(failed.status?.phase).toBe('Failed');
    expect(failed.status?.reason).toBe('PlacementConflict');
    expect(failed.status?.message).toContain(`${POOL}=somewhere-else`);
    expect(failed.status?.message).toContain(`evaluations.nodeSelector.${POOL}`);
    expect(await getPod(env, 'rle-conflict')).toBeUndefined();
  });

  it('so does one that rules out every required node term of the policy', async () => {
    await createEvaluation(env, evaluation('wrong-zone', { deadlineSeconds: 120, placement: { nodeSelector: { [ZONE]: 'c' } } }));
    const failed = await waitForPhase(env, 'wrong-zone', ['Failed', 'Succeeded', 'Running']);
    expect(failed.status?.reason).toBe('PlacementConflict');
    expect(failed.status?.message).toContain(`${ZONE}=c fails ${ZONE} In [a, b]`);
    expect(await getPod(env, 'rle-wrong-zone')).toBeUndefined();
  });
});
