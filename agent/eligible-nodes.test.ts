import { describe, expect, it } from 'vitest';
import { nodeCapacity, trimNode } from './capacity.ts';
import { offered, runsEvaluations } from './eligible-nodes.ts';
import { clusterPlacementSchema } from '../lib/evaluation-placement.ts';

const none = { cpuMillis: 0, memoryBytes: 0, nvidia: 0, amd: 0 };
const used = { cpuMillis: 2000, memoryBytes: 2 ** 30, nvidia: 1, amd: 0 };
const node = (name: string, labels: Record<string, string>, architecture: string, spec: Record<string, unknown> = {}, extraLabels: string[] = []) =>
  trimNode({
    metadata: { name, labels: { 'kubernetes.io/hostname': name, ...labels } },
    spec,
    status: {
      allocatable: { cpu: '72', memory: '480Gi', 'nvidia.com/gpu': '4' },
      conditions: [{ type: 'Ready', status: 'True' }],
      nodeInfo: { architecture, operatingSystem: 'linux' },
    },
  }, extraLabels);
const facts = (n: ReturnType<typeof node>) => ({ name: n.metadata.name, labels: n.metadata.labels, taints: n.spec.taints ?? [] });

describe('nodes evaluations can run on', () => {
  it('are linux/amd64 by their kubernetes.io/os and kubernetes.io/arch labels, as the scheduler matches them', () => {
    expect(runsEvaluations({ 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' })).toBe(true);
    expect(runsEvaluations({ 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'arm64' })).toBe(false);
    expect(runsEvaluations({ 'kubernetes.io/os': 'windows', 'kubernetes.io/arch': 'amd64' })).toBe(false);
    // a label the node lacks fails the pod's requirement too, whatever status.nodeInfo says
    expect(runsEvaluations({ 'kubernetes.io/arch': 'amd64' })).toBe(false);
    expect(runsEvaluations({ 'kubernetes.io/os': 'linux' })).toBe(false);
  });

  it('the node report keeps the labels the rule reads', () => {
    const n = node('x86-1', { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' }, 'amd64');
    expect(n.metadata.labels).toEqual({ 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' });
  });

  it('an arm64 GPU node (Grace Hopper) is reported as it is, but unschedulable and with nothing free', () => {
    const gh200 = node('gh200-1', { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'arm64', 'nvidia.com/gpu.product': 'NVIDIA-GH200-480GB' }, 'arm64');
    const cap = offered(facts(gh200), nodeCapacity(gh200, used));
    expect(cap).toMatchObject({
      name: 'gh200-1',
      architecture: 'arm64',
      ready: true,
      schedulable: false,
      cpuMillisAllocatable: 72000n,
      memoryBytesAllocatable: BigInt(480 * 2 ** 30),
      gpusAllocatable: 4,
      cpuMillisFree: 0n,
      memoryBytesFree: 0n,
      gpusFree: 0,
    });
    expect(cap.gpus).toEqual([expect.objectContaining({ vendor: 'nvidia', model: 'NVIDIA-GH200-480GB', count: 4 })]);
  });

  it('a linux/amd64 node is offered as measured', () => {
    const x86 = node('x86-1', { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' }, 'amd64');
    expect(offered(facts(x86), nodeCapacity(x86, used))).toEqual(nodeCapacity(x86, used));
    expect(offered(facts(x86), nodeCapacity(x86, none))).toMatchObject({ schedulable: true, cpuMillisFree: 72000n, gpusFree: 4 });
  });

  const amd64 = { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' };
  const policy = clusterPlacementSchema.parse({
    nodeSelector: { pool: 'evals' },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'evals', effect: 'NoSchedule' }],
    affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }] } } },
  });
  const keys = ['pool', 'zone'];

  it('under the operator\'s policy: its nodeSelector, its required node terms and the taints it tolerates', () => {
    const ok = node('ok', { ...amd64, pool: 'evals', zone: 'a' }, 'amd64', { taints: [{ key: 'dedicated', value: 'evals', effect: 'NoSchedule' }] }, keys);
    expect(offered(facts(ok), nodeCapacity(ok, none), policy)).toMatchObject({ schedulable: true, cpuMillisFree: 72000n });
    const otherPool = node('other-pool', { ...amd64, pool: 'train', zone: 'a' }, 'amd64', {}, keys);
    const otherZone = node('other-zone', { ...amd64, pool: 'evals', zone: 'c' }, 'amd64', {}, keys);
    const tainted = node('gpu-tainted', { ...amd64, pool: 'evals', zone: 'b' }, 'amd64', { taints: [{ key: 'nvidia.com/gpu', effect: 'NoSchedule' }] }, keys);
    const evicting = node('evicting', { ...amd64, pool: 'evals', zone: 'b' }, 'amd64', { taints: [{ key: 'maintenance', effect: 'NoExecute' }] }, keys);
    const arm = node('arm', { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'arm64', pool: 'evals', zone: 'a' }, 'arm64', {}, keys);
    for (const n of [otherPool, otherZone, tainted, evicting, arm]) {
      expect(offered(facts(n), nodeCapacity(n, none), policy), n.metadata.name).toMatchObject({ schedulable: false, cpuMillisFree: 0n, gpusFree: 0 });
    }
    // PreferNoSchedule only steers the scheduler: the node is still offered
    const prefer = node('prefer', { ...amd64, pool: 'evals', zone: 'a' }, 'amd64', { taints: [{ key: 'spot', effect: 'PreferNoSchedule' }] }, keys);
    expect(prefer.spec.taints).toBeUndefined();
    expect(offered(facts(prefer), nodeCapacity(prefer, none), policy).schedulable).toBe(true);
  });

  it('without a policy, a node with a taint evaluations do not tolerate is not offered either', () => {
    const gpu = node('gpu', amd64, 'amd64', { taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }] });
    expect(offered(facts(gpu), nodeCapacity(gpu, none)).schedulable).toBe(false);
    expect(runsEvaluations(amd64, clusterPlacementSchema.parse({ tolerations: [{ operator: 'Exists' }] }), { taints: gpu.spec.taints })).toBe(true);
  });

  it('keeps the labels the policy reads, and no others', () => {
    const n = node('x', { ...amd64, pool: 'evals', zone: 'a', unrelated: 'x' }, 'amd64', {}, keys);
    expect(n.metadata.labels).toEqual({ ...amd64, pool: 'evals', zone: 'a' });
  });
});
