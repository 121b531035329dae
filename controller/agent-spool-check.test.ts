import { describe, expect, it } from 'vitest';
import type { V1Node, V1PersistentVolume, V1Pod } from '@kubernetes/client-node';
import { boundNodes, stuckSpoolLine } from './agent-spool-check.ts';

const local = (node: string): V1PersistentVolume => ({
  metadata: { name: 'pvc-1' },
  spec: { nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [node] }] }] } } },
});
const zonal: V1PersistentVolume = {
  metadata: { name: 'pvc-2' },
  spec: { nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['a'] }] }] } } },
};
const unscheduled: V1Pod = { metadata: { name: 'agent-x' }, spec: { containers: [] }, status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }] } };
const nodes: Record<string, V1Node> = {
  dead: { status: { conditions: [{ type: 'Ready', status: 'Unknown' }] } },
  up: { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
};

describe('the agent waiting for its spool on a lost node', () => {
  it('a local disk is bound to its node; a zonal or unbound volume can move', () => {
    expect(boundNodes(local('dead'))).toEqual(['dead']);
    expect(boundNodes(zonal)).toBeUndefined();
    expect(boundNodes({ spec: {} })).toBeUndefined();
  });

  it('says in one line what holds the agent, what it costs and what to do', () => {
    const line = stuckSpoolLine(unscheduled, local('dead'), (n) => nodes[n])!;
    expect(line).not.toContain('\n');
    expect(line).toMatch(/agent cannot start \(pod agent-x is unschedulable\): its spool, PVC rlmesh-agent-spool on volume pvc-1, is on storage bound to node dead, which is not Ready/);
    expect(line).toMatch(/Bring dead back, or delete the PVC and the agent pod .*Give the spool storage that can move between nodes/);
  });

  it('says nothing while the volume can move, its node is up, or the pod is scheduled', () => {
    expect(stuckSpoolLine(unscheduled, zonal, (n) => nodes[n])).toBeUndefined();
    expect(stuckSpoolLine(unscheduled, local('up'), (n) => nodes[n])).toBeUndefined();
    expect(stuckSpoolLine({ ...unscheduled, spec: { containers: [], nodeName: 'up' } }, local('dead'), (n) => nodes[n])).toBeUndefined();
  });
});
