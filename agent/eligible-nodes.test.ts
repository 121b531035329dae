import { describe, expect, it } from 'vitest';
import { nodeCapacity, trimNode } from './capacity.ts';
import { offered, runsEvaluations } from './eligible-nodes.ts';

const none = { cpuMillis: 0, memoryBytes: 0, nvidia: 0, amd: 0 };
const used = { cpuMillis: 2000, memoryBytes: 2 ** 30, nvidia: 1, amd: 0 };
const node = (name: string, labels: Record<string, string>, architecture: string) =>
  trimNode({
    metadata: { name, labels: { 'kubernetes.io/hostname': name, ...labels } },
    spec: {},
    status: {
      allocatable: { cpu: '72', memory: '480Gi', 'nvidia.com/gpu': '4' },
      conditions: [{ type: 'Ready', status: 'True' }],
      nodeInfo: { architecture, operatingSystem: 'linux' },
    },
  });

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
    const cap = offered(gh200.metadata.labels, nodeCapacity(gh200, used));
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
    expect(offered(x86.metadata.labels, nodeCapacity(x86, used))).toEqual(nodeCapacity(x86, used));
    expect(offered(x86.metadata.labels, nodeCapacity(x86, none))).toMatchObject({ schedulable: true, cpuMillisFree: 72000n, gpusFree: 4 });
  });
});
