import { describe, expect, it } from 'vitest';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { lostNode, podDisruption } from './pod-disruption.ts';

const pod = (phase: string, conditions: { type: string; status: string; reason?: string; message?: string }[] = []): V1Pod => ({
  metadata: { name: 'rle-a' },
  spec: { nodeName: 'n1', containers: [] },
  status: { phase, conditions },
});
const node = (status: string): V1Node => ({
  status: { conditions: [{ type: 'Ready', status, lastTransitionTime: new Date('2026-01-01T00:00:00Z'), message: 'Kubelet stopped posting node status.' }] },
});
const target = (reason: string, message = '') => ({ type: 'DisruptionTarget', status: 'True', reason, message });

describe('podDisruption', () => {
  it('a running pod on a node whose Ready is Unknown is NodeLost, naming the node, since when and the kubelet silence', () => {
    const d = podDisruption(pod('Running'), node('Unknown'))!;
    expect(d.reason).toBe('NodeLost');
    expect(d.message).toMatch(/node n1 stopped reporting .*Unknown since 2026-01-01T00:00:00.000Z: Kubelet stopped posting node status\), so pod rle-a .*did not fail; submit the evaluation again/);
  });

  it('a node that is only NotReady (a kubelet or runtime restart) or Ready takes nothing', () => {
    expect(podDisruption(pod('Running'), node('False'))).toBeUndefined();
    expect(podDisruption(pod('Running'), node('True'))).toBeUndefined();
    expect(podDisruption(pod('Running'), undefined)).toBeUndefined();
    expect(lostNode(node('False'))).toBeUndefined();
  });

  it('a drain evicts: Evicted, also once the kubelet stopped the container and the pod failed', () => {
    for (const phase of ['Running', 'Failed', 'Pending']) {
      const d = podDisruption(pod(phase, [target('EvictionByEvictionAPI', 'Eviction API: evicting')]), node('True'))!;
      expect(d.reason).toBe('Evicted');
      expect(d.message).toMatch(/evicted from node n1 through the Eviction API, as kubectl drain.*\(Eviction API: evicting\); the evaluated code did not fail/);
    }
  });

  it('a pod that succeeded keeps its result, whatever came after', () => {
    expect(podDisruption(pod('Succeeded', [target('EvictionByEvictionAPI')]), node('Unknown'))).toBeUndefined();
  });

  it('a pod that failed on its own before its node was lost keeps its failure', () => {
    expect(podDisruption(pod('Failed'), node('Unknown'))).toBeUndefined();
  });

  it('each disruption of Kubernetes gets its own reason', () => {
    expect(podDisruption(pod('Running', [target('PreemptionByScheduler')]), node('True'))!.reason).toBe('Preempted');
    expect(podDisruption(pod('Running', [target('DeletionByTaintManager')]), node('Unknown'))!.reason).toBe('NodeLost');
    expect(podDisruption(pod('Running', [target('DeletionByTaintManager')]), node('True'))!.reason).toBe('Evicted');
    expect(podDisruption(pod('Running', [target('DeletionByPodGC')]), undefined)!.reason).toBe('NodeLost');
    expect(podDisruption(pod('Running', [target('TerminationByKubelet', 'memory pressure')]), node('True'))!.message).toMatch(/kubelet of node n1 stopped pod rle-a.*\(memory pressure\)/);
    expect(podDisruption(pod('Running', [{ type: 'DisruptionTarget', status: 'False', reason: 'EvictionByEvictionAPI' }]), node('True'))).toBeUndefined();
  });
});
