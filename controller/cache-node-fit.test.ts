import { describe, expect, it } from 'vitest';
import type { V1Node } from '@kubernetes/client-node';
import type { EvaluationSpec, RLMeshEvaluation } from '../lib/crds/types.ts';
import { clusterPlacementSchema, NO_PLACEMENT } from '../lib/evaluation-placement.ts';
import { cacheNodeCannotRunMessage, cacheNodeShortfalls } from './cache-node-fit.ts';

const node = (o: { allocatable?: Record<string, string>; labels?: Record<string, string>; taints?: { key: string; value?: string; effect: string }[] } = {}): V1Node => ({
  metadata: { name: 'real-0', labels: { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', ...o.labels } },
  spec: { taints: o.taints ?? [] },
  status: { allocatable: o.allocatable ?? { cpu: '4', memory: '16Gi', pods: '110' } },
});
const ev = (spec: Partial<EvaluationSpec>): RLMeshEvaluation => ({
  apiVersion: 'rlmesh.dev/v1alpha1',
  kind: 'RLMeshEvaluation',
  metadata: { name: 'e1', namespace: 'rlmesh-runs' },
  spec: { evaluationId: 'ev_1', image: 'img:1', deadlineSeconds: 60, cancelled: false, ...spec },
});

describe('cacheNodeShortfalls', () => {
  it('passes what the node has, however busy it is: allocatable, not free', () => {
    expect(cacheNodeShortfalls(node(), ev({ resources: { cpu: '4', memory: '16Gi' } }), NO_PLACEMENT)).toEqual([]);
    expect(cacheNodeShortfalls(node(), ev({}), NO_PLACEMENT)).toEqual([]);
  });

  it('names GPUs the node has none of, or too few', () => {
    expect(cacheNodeShortfalls(node(), ev({ resources: { gpu: { count: 1, vendor: 'nvidia' } } }), NO_PLACEMENT)).toEqual(['no nvidia.com/gpu (1 asked)']);
    const gpuNode = node({ allocatable: { cpu: '96', memory: '1Ti', 'nvidia.com/gpu': '8' } });
    expect(cacheNodeShortfalls(gpuNode, ev({ resources: { gpu: { count: 16, vendor: 'nvidia' } } }), NO_PLACEMENT)).toEqual(['nvidia.com/gpu 16 asked, 8 allocatable']);
    expect(cacheNodeShortfalls(gpuNode, ev({ resources: { gpu: { count: 2, vendor: 'amd' } } }), NO_PLACEMENT)).toEqual(['no amd.com/gpu (2 asked)']);
    expect(cacheNodeShortfalls(gpuNode, ev({ resources: { gpu: { count: 8, vendor: 'nvidia' } } }), NO_PLACEMENT)).toEqual([]);
  });

  it('names cpu and memory beyond the allocatable, in quantities as written', () => {
    expect(cacheNodeShortfalls(node(), ev({ resources: { cpu: '4500m', memory: '17Gi' } }), NO_PLACEMENT)).toEqual(['cpu 4500m asked, 4 allocatable', 'memory 17Gi asked, 16Gi allocatable']);
  });

  it("refuses a node the platform's selector or the cluster's policy rules out", () => {
    expect(cacheNodeShortfalls(node(), ev({ placement: { nodeSelector: { pool: 'gpu' } } }), NO_PLACEMENT)).toEqual(["label pool is not gpu (the platform's node selector)"]);
    const policy = clusterPlacementSchema.parse({ nodeSelector: { pool: 'eval' } });
    expect(cacheNodeShortfalls(node(), ev({}), policy)).toEqual(['label pool is not eval (evaluations.nodeSelector)']);
    expect(cacheNodeShortfalls(node({ labels: { pool: 'eval' } }), ev({}), policy)).toEqual([]);
  });

  it('refuses a lasting taint nothing tolerates; the operator\'s or the evaluation\'s toleration lets it pass', () => {
    const tainted = node({ taints: [{ key: 'dedicated', value: 'infra', effect: 'NoSchedule' }] });
    expect(cacheNodeShortfalls(tainted, ev({}), NO_PLACEMENT)).toEqual(['taint dedicated=infra:NoSchedule is not tolerated (evaluations.tolerations)']);
    const toleration = { key: 'dedicated', operator: 'Equal' as const, value: 'infra', effect: 'NoSchedule' as const };
    expect(cacheNodeShortfalls(tainted, ev({}), clusterPlacementSchema.parse({ tolerations: [toleration] }))).toEqual([]);
    expect(cacheNodeShortfalls(tainted, ev({ placement: { tolerations: [toleration] } }), NO_PLACEMENT)).toEqual([]);
    expect(cacheNodeShortfalls(node({ taints: [{ key: 'soft', effect: 'PreferNoSchedule' }] }), ev({}), NO_PLACEMENT)).toEqual([]);
  });

  it('lets passing taints pass: a cordon, not-ready, pressure, an autoscaler scale-down', () => {
    const passing = ['node.kubernetes.io/unschedulable', 'node.kubernetes.io/not-ready', 'node.kubernetes.io/disk-pressure', 'node.cloudprovider.kubernetes.io/uninitialized', 'ToBeDeletedByClusterAutoscaler'];
    expect(cacheNodeShortfalls(node({ taints: passing.map((key) => ({ key, effect: 'NoSchedule' })) }), ev({}), NO_PLACEMENT)).toEqual([]);
  });

  it('lists everything the node lacks at once', () => {
    expect(cacheNodeShortfalls(node(), ev({ resources: { cpu: '8', gpu: { count: 1, vendor: 'nvidia' } }, placement: { nodeSelector: { pool: 'gpu' } } }), NO_PLACEMENT)).toHaveLength(3);
  });
});

describe('cacheNodeCannotRunMessage', () => {
  it('says what happened, why, and the fix', () => {
    const m = cacheNodeCannotRunMessage('rlmesh-artifact-cache', 'real-0', ['no nvidia.com/gpu (1 asked)']);
    expect(m).toBe(
      'the artifact cache rlmesh-artifact-cache is ReadWriteOnce, so an evaluation that reads artifacts runs only on node real-0, which holds the volume, and real-0 can never run this one: no nvidia.com/gpu (1 asked). ' +
        'To run evaluations with artifacts on every node, set storage.className to a ReadWriteMany StorageClass and artifactCache.storage.sharedPvc.accessModes=[ReadWriteMany]',
    );
  });
});
