import { describe, expect, it } from 'vitest';
import { clusterPlacementSchema, NO_PLACEMENT, nodeRefusal, placementConflict, placementLabelKeys, requiredNodeTerms, tolerates } from './evaluation-placement.ts';

const policy = (p: Record<string, unknown>) => clusterPlacementSchema.parse(p);
const terms = (...t: { key: string; operator: string; values?: string[] }[][]) => ({
  nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: t.map((matchExpressions) => ({ matchExpressions })) } },
});

describe('placementConflict', () => {
  it('none when the platform only narrows the cluster: another key, the same value, or nothing', () => {
    const p = policy({ nodeSelector: { pool: 'evals' } });
    expect(placementConflict(p, {})).toBeUndefined();
    expect(placementConflict(p, undefined)).toBeUndefined();
    expect(placementConflict(p, { pool: 'evals', 'gpu.product': 'h100' })).toBeUndefined();
    expect(placementConflict(NO_PLACEMENT, { anything: 'x' })).toBeUndefined();
  });

  it('a key both set to different values, named with both values and the chart value that decides', () => {
    const c = placementConflict(policy({ nodeSelector: { pool: 'evals' } }), { pool: 'train' });
    expect(c?.reason).toBe('PlacementConflict');
    expect(c?.message).toContain('pool=train');
    expect(c?.message).toContain('pool=evals');
    expect(c?.message).toContain('evaluations.nodeSelector.pool');
  });

  it('a selector that rules out every required term of evaluations.affinity, but not one that leaves a term', () => {
    const p = policy({ affinity: terms([{ key: 'zone', operator: 'In', values: ['a'] }], [{ key: 'zone', operator: 'In', values: ['b'] }]) });
    expect(placementConflict(p, { zone: 'b' })).toBeUndefined();
    const c = placementConflict(p, { zone: 'c' });
    expect(c?.message).toContain('zone=c fails zone In [a]; zone=c fails zone In [b]');
    expect(c?.message).toContain('evaluations.affinity');
    expect(placementConflict(policy({ affinity: terms([{ key: 'spot', operator: 'DoesNotExist' }]) }), { spot: 'true' })).toBeDefined();
  });

  it('a selector for another platform than linux/amd64', () => {
    const c = placementConflict(NO_PLACEMENT, { 'kubernetes.io/arch': 'arm64' });
    expect(c?.message).toContain('kubernetes.io/arch=arm64 fails kubernetes.io/arch In [amd64]');
    expect(c?.message).toContain('linux/amd64');
  });
});

describe('requiredNodeTerms', () => {
  it('distributes the AND: each cluster term gets the platform requirement and the pinned node', () => {
    const p = policy({ affinity: terms([{ key: 'zone', operator: 'In', values: ['a'] }], [{ key: 'pool', operator: 'Exists' }]) });
    const t = requiredNodeTerms(p, 'node-1');
    expect(t).toHaveLength(2);
    for (const term of t) {
      expect(term.matchExpressions!.map((r) => r.key)).toEqual(expect.arrayContaining(['kubernetes.io/os', 'kubernetes.io/arch']));
      expect(term.matchFields).toEqual([{ key: 'metadata.name', operator: 'In', values: ['node-1'] }]);
    }
    expect(t[0]!.matchExpressions![0]).toEqual({ key: 'zone', operator: 'In', values: ['a'] });
    expect(t[1]!.matchExpressions![0]).toEqual({ key: 'pool', operator: 'Exists' });
  });

  it('without cluster terms: the platform term alone', () => {
    expect(requiredNodeTerms(NO_PLACEMENT)).toEqual([
      { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }, { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] }] },
    ]);
  });
});

describe('nodes and taints', () => {
  const linux = { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' };
  it('tolerations match taints as the scheduler reads them', () => {
    const taint = { key: 'dedicated', value: 'evals', effect: 'NoSchedule' };
    expect(tolerates({ key: 'dedicated', operator: 'Equal', value: 'evals' }, taint)).toBe(true);
    expect(tolerates({ key: 'dedicated', value: 'evals', effect: 'NoSchedule' }, taint)).toBe(true);
    expect(tolerates({ key: 'dedicated', operator: 'Equal', value: 'other' }, taint)).toBe(false);
    expect(tolerates({ key: 'dedicated', operator: 'Exists', effect: 'NoExecute' }, taint)).toBe(false);
    expect(tolerates({ key: 'dedicated', operator: 'Exists' }, taint)).toBe(true);
    expect(tolerates({ operator: 'Exists' }, taint)).toBe(true);
    expect(tolerates({ key: 'other', operator: 'Exists' }, taint)).toBe(false);
  });

  it('nodeRefusal names what keeps evaluations off a node', () => {
    const p = policy({ nodeSelector: { pool: 'evals' }, tolerations: [{ key: 'dedicated', operator: 'Exists' }] });
    expect(nodeRefusal(p, { name: 'n', labels: { ...linux, pool: 'evals' }, taints: [{ key: 'dedicated', effect: 'NoSchedule' }] })).toBeUndefined();
    expect(nodeRefusal(p, { name: 'n', labels: { ...linux, pool: 'x' }, taints: [] })).toContain('evaluations.nodeSelector');
    expect(nodeRefusal(p, { name: 'n', labels: { ...linux, pool: 'evals' }, taints: [{ key: 'gpu', effect: 'NoExecute' }] })).toContain('gpu:NoExecute');
    expect(nodeRefusal(p, { name: 'n', labels: { pool: 'evals' }, taints: [] })).toContain('linux/amd64');
  });

  it('placementLabelKeys lists every label the policy reads', () => {
    const p = policy({ nodeSelector: { pool: 'evals' }, affinity: terms([{ key: 'zone', operator: 'In', values: ['a'] }]) });
    expect(placementLabelKeys(p).sort()).toEqual(['kubernetes.io/arch', 'kubernetes.io/os', 'pool', 'zone']);
  });
});
