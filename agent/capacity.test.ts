import { describe, expect, it } from 'vitest';
import { nodeCapacity, quotaBound, trimNode, trimPod, trimQuota } from './capacity.ts';
import { parseQuantity } from '../lib/quantity.ts';

const podUsage = (containers: object[], extra: { initContainers?: object[]; overhead?: object; phase?: string } = {}) =>
  trimPod({
    metadata: { name: 'p', namespace: 'tenant-a' },
    spec: { nodeName: 'n1', containers, initContainers: extra.initContainers, overhead: extra.overhead },
    status: { phase: extra.phase ?? 'Running' },
  }).usage;
const c = (requests: object, limits: object = {}, restartPolicy?: string) => ({ name: 'c', resources: { requests, limits }, restartPolicy });

const gpuNode = trimNode({
  metadata: {
    name: 'gpu-1',
    labels: { 'kubernetes.io/arch': 'amd64', 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559', unrelated: 'x' },
  },
  spec: {},
  status: {
    allocatable: { cpu: '31500m', memory: '250Gi', 'nvidia.com/gpu': '8', pods: '110' },
    conditions: [{ type: 'Ready', status: 'True' }],
    nodeInfo: { architecture: 'amd64' },
  },
});

describe('quantities', () => {
  it('parses decimal, binary, fractional and exponent forms', () => {
    expect(parseQuantity('500m')).toBe(0.5);
    expect(parseQuantity('2')).toBe(2);
    expect(parseQuantity('1.5Gi')).toBe(1.5 * 2 ** 30);
    expect(parseQuantity('128974848')).toBe(128974848);
    expect(parseQuantity('129e6')).toBe(129e6);
    expect(parseQuantity('123Mi')).toBe(123 * 2 ** 20);
    expect(parseQuantity('1k')).toBe(1000);
    expect(parseQuantity('garbage')).toBe(0);
    expect(parseQuantity(undefined)).toBe(0);
  });
});

describe('capacity math', () => {
  it('sums container requests and takes GPUs from limits', () => {
    const u = podUsage([c({ cpu: '500m', memory: '1Gi' }, { 'nvidia.com/gpu': '2' }), c({ cpu: '1', memory: '512Mi' })]);
    expect(u).toEqual({ cpuMillis: 1500, memoryBytes: 1.5 * 2 ** 30, nvidia: 2, amd: 0 });
  });

  it('reserves the larger of init and app containers, counts sidecars and overhead', () => {
    const heavyInit = podUsage([c({ cpu: '1', memory: '1Gi' })], { initContainers: [c({ cpu: '4', memory: '100Mi' })] });
    expect(heavyInit.cpuMillis).toBe(4000);
    expect(heavyInit.memoryBytes).toBe(2 ** 30);
    const sidecar = podUsage([c({ cpu: '1' })], { initContainers: [c({ cpu: '250m' }, {}, 'Always'), c({ cpu: '2' })], overhead: { cpu: '100m' } },
    );
    // init peak = sidecar 250m + init 2 = 2250m > app 1 + sidecar 250m; plus 100m overhead
    expect(sidecar.cpuMillis).toBe(2350);
  });

  it('finished pods hold nothing', () => {
    expect(podUsage([c({ cpu: '4' })], { phase: 'Succeeded' }).cpuMillis).toBe(0);
    expect(podUsage([c({ cpu: '4' })], { phase: 'Failed' }).cpuMillis).toBe(0);
  });

  it('reports allocatable, free net of every tenant, GPU model and memory', () => {
    const used = podUsage([c({ cpu: '30', memory: '10Gi' }, { 'nvidia.com/gpu': '8' })]);
    const cap = nodeCapacity(gpuNode, used);
    expect(cap.name).toBe('gpu-1');
    expect(cap.architecture).toBe('amd64');
    expect(cap.ready).toBe(true);
    expect(cap.schedulable).toBe(true);
    expect(cap.cpuMillisAllocatable).toBe(31500n);
    expect(cap.cpuMillisFree).toBe(1500n);
    expect(cap.memoryBytesFree).toBe(BigInt(240 * 2 ** 30));
    expect(cap.gpusAllocatable).toBe(8);
    expect(cap.gpusFree).toBe(0);
    expect(cap.gpus).toHaveLength(1);
    expect(cap.gpus[0]).toMatchObject({ vendor: 'nvidia', model: 'NVIDIA-H100-80GB-HBM3', memoryMib: 81559n, count: 8 });
  });

  it('never reports negative free capacity (overcommitted node) and reads AMD labels and cordons', () => {
    const amd = trimNode({
      metadata: { name: 'amd-1', labels: { 'amd.com/gpu.product-name': 'AMD_Instinct_MI300X_OAM', 'amd.com/gpu.vram': '192G' } },
      spec: { unschedulable: true },
      status: { allocatable: { cpu: '4', memory: '8Gi', 'amd.com/gpu': '4' }, conditions: [{ type: 'Ready', status: 'False' }], nodeInfo: { architecture: 'arm64' } },
    });
    const cap = nodeCapacity(amd, podUsage([c({ cpu: '6', memory: '9Gi' }, { 'amd.com/gpu': '1' })]));
    expect(cap.cpuMillisFree).toBe(0n);
    expect(cap.memoryBytesFree).toBe(0n);
    expect(cap.gpusFree).toBe(3);
    expect(cap.ready).toBe(false);
    expect(cap.schedulable).toBe(false);
    expect(cap.architecture).toBe('arm64');
    expect(cap.gpus[0]).toMatchObject({ vendor: 'amd', model: 'AMD_Instinct_MI300X_OAM', memoryMib: 192n * 1024n, count: 4 });
  });

  it('trims objects to the fields it uses', () => {
    expect(Object.keys(gpuNode.metadata.labels)).not.toContain('unrelated');
    const p = trimPod({ metadata: { name: 'a', namespace: 'b', annotations: { big: 'x'.repeat(1000) } }, spec: { containers: [{ name: 'c', image: 'i', env: [] }] }, status: {} });
    expect(JSON.stringify(p).length).toBeLessThan(200);
  });
});

describe('GPU models from what the chart\'s GPU discovery writes', () => {
  const node = (labels: Record<string, string>, gpus: Record<string, string>) =>
    trimNode({ metadata: { name: 'n', labels }, spec: {}, status: { allocatable: { cpu: '8', memory: '64Gi', ...gpus }, conditions: [{ type: 'Ready', status: 'True' }] } });
  const none = { cpuMillis: 0, memoryBytes: 0, nvidia: 0, amd: 0 };

  it('reads rlmesh.dev/gpu.* when the vendor labels are absent (nodes without NVIDIA GFD or AMD\'s labeller)', () => {
    const nv = nodeCapacity(node({ 'rlmesh.dev/gpu.vendor': 'nvidia', 'rlmesh.dev/gpu.product': 'NVIDIA-H100-SXM5-80GB', 'rlmesh.dev/gpu.memory': '81920', 'rlmesh.dev/gpu.count': '8' }, { 'nvidia.com/gpu': '8' }), none);
    expect(nv.gpus).toEqual([expect.objectContaining({ vendor: 'nvidia', model: 'NVIDIA-H100-SXM5-80GB', memoryMib: 81920n, count: 8 })]);
    const amd = nodeCapacity(node({ 'rlmesh.dev/gpu.vendor': 'amd', 'rlmesh.dev/gpu.product': 'AMD-Instinct-MI300X', 'rlmesh.dev/gpu.memory': '196592' }, { 'amd.com/gpu': '8' }), none);
    expect(amd.gpus).toEqual([expect.objectContaining({ vendor: 'amd', model: 'AMD-Instinct-MI300X', memoryMib: 196592n, count: 8 })]);
  });

  it('prefers the vendor\'s own labels, and never takes another vendor\'s', () => {
    const both = nodeCapacity(node({ 'nvidia.com/gpu.product': 'H100-from-GFD', 'rlmesh.dev/gpu.vendor': 'nvidia', 'rlmesh.dev/gpu.product': 'ours' }, { 'nvidia.com/gpu': '1' }), none);
    expect(both.gpus[0]!.model).toBe('H100-from-GFD');
    const mismatch = nodeCapacity(node({ 'rlmesh.dev/gpu.vendor': 'amd', 'rlmesh.dev/gpu.product': 'AMD-Instinct-MI300X' }, { 'nvidia.com/gpu': '1' }), none);
    expect(mismatch.gpus[0]!.model).toBe('');
  });
});

describe('the ResourceQuotas of the runs namespace', () => {
  const quota = (name: string, hard: Record<string, string>, used: Record<string, string>, spec: object = {}) =>
    trimQuota({ metadata: { name, namespace: 'rlmesh-runs' }, spec: { hard, ...spec }, status: { hard, used } });
  const idle = podUsage([c({ cpu: '1500m', memory: '10Gi' })]);

  it('caps what every node offers at what the quota still admits: hard minus used, for requests and limits alike', () => {
    const q = quota(
      'rlmesh-runs',
      { pods: '1000', 'requests.cpu': '16', 'limits.memory': '64Gi', 'requests.nvidia.com/gpu': '8' },
      { pods: '3', 'requests.cpu': '12', 'limits.memory': '40Gi', 'requests.nvidia.com/gpu': '6' },
    );
    expect(q.room).toEqual({ cpuMillis: 4000, memoryBytes: 24 * 2 ** 30, nvidia: 2, pods: 997 });
    const cap = nodeCapacity(gpuNode, idle, quotaBound([q]));
    expect(cap.cpuMillisFree).toBe(4000n);
    expect(cap.memoryBytesFree).toBe(BigInt(24 * 2 ** 30));
    expect(cap.gpusFree).toBe(2);
    // allocatable is the node's, whatever the quota
    expect(cap.gpusAllocatable).toBe(8);
    expect(cap.cpuMillisAllocatable).toBe(31500n);
    // a node with less free than the quota leaves offers what it has
    expect(nodeCapacity(gpuNode, podUsage([c({ cpu: '30' }, { 'nvidia.com/gpu': '7' })]), quotaBound([q]))).toMatchObject({ cpuMillisFree: 1500n, gpusFree: 1 });
  });

  it('takes the tightest of several quotas, and offers nothing once no pod is admitted', () => {
    const gpus = quota('gpus', { 'requests.nvidia.com/gpu': '4' }, { 'requests.nvidia.com/gpu': '3' });
    const cpu = quota('cpu', { cpu: '100', 'requests.nvidia.com/gpu': '16' }, { cpu: '10', 'requests.nvidia.com/gpu': '3' });
    expect(quotaBound([gpus, cpu])).toEqual({ nvidia: 1, cpuMillis: 90_000 });
    const full = quota('rlmesh-runs', { pods: '10' }, { pods: '10' });
    expect(nodeCapacity(gpuNode, idle, quotaBound([full, cpu]))).toMatchObject({ cpuMillisFree: 0n, memoryBytesFree: 0n, gpusFree: 0 });
    // an overused quota (its hard lowered below what runs) admits nothing, never a negative amount
    expect(quota('lowered', { 'requests.nvidia.com/gpu': '2' }, { 'requests.nvidia.com/gpu': '5' }).room).toEqual({ nvidia: 0 });
    expect(nodeCapacity(gpuNode, idle, quotaBound([]))).toMatchObject({ cpuMillisFree: 30000n, gpusFree: 8 });
  });

  it('ignores quotas scoped to pods evaluations never are (BestEffort, NotTerminating), and reads an unsynced quota from its spec', () => {
    expect(quota('be', { pods: '0' }, {}, { scopes: ['BestEffort'] }).room).toEqual({});
    expect(quota('nt', { 'requests.cpu': '1' }, {}, { scopeSelector: { matchExpressions: [{ scopeName: 'NotTerminating', operator: 'Exists' }] } }).room).toEqual({});
    expect(quota('t', { 'requests.cpu': '1' }, {}, { scopes: ['Terminating'] }).room).toEqual({ cpuMillis: 1000 });
    expect(trimQuota({ metadata: { name: 'new', namespace: 'rlmesh-runs' }, spec: { hard: { 'requests.amd.com/gpu': '2' } } }).room).toEqual({ amd: 2 });
  });
});
