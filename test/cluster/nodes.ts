// Prints the simulated nodes as a YAML list for kubectl apply: CPU nodes and
// GPU nodes carrying nvidia.com/gpu: 8 and the labels GPU feature discovery sets.
// RLMESH_KWOK_TAINT=1 (test/cluster/up does this when it starts real nodes)
// taints them kwok.x-k8s.io/node=fake:NoSchedule, so only pods that ask land there.
const [cpu = '2', gpu = '1'] = process.argv.slice(2);
const taints = process.env.RLMESH_KWOK_TAINT === '1' ? [{ key: 'kwok.x-k8s.io/node', value: 'fake', effect: 'NoSchedule' }] : [];

function node(name: string, gpus: number): object {
  const labels: Record<string, string> = {
    'kubernetes.io/arch': 'amd64',
    'kubernetes.io/os': 'linux',
    'kubernetes.io/hostname': name,
    'node.kubernetes.io/instance-type': gpus ? 'gpu-8x-h100' : 'cpu-16',
    type: 'kwok',
  };
  if (gpus) {
    Object.assign(labels, {
      'nvidia.com/gpu.present': 'true',
      'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3',
      'nvidia.com/gpu.memory': '81559',
      'nvidia.com/gpu.count': String(gpus),
      'feature.node.kubernetes.io/pci-10de.present': 'true',
    });
  }
  const capacity: Record<string, string> = { cpu: gpus ? '96' : '16', memory: gpus ? '1Ti' : '64Gi', pods: '110', 'ephemeral-storage': '500Gi' };
  if (gpus) capacity['nvidia.com/gpu'] = String(gpus);
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels, annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' } },
    spec: { taints },
    status: { allocatable: capacity, capacity },
  };
}

const items = [
  ...Array.from({ length: Number(cpu) }, (_, i) => node(`kwok-cpu-${i}`, 0)),
  ...Array.from({ length: Number(gpu) }, (_, i) => node(`kwok-gpu-${i}`, 8)),
];
console.log(JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
