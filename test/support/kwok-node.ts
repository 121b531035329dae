// Nodes a test adds to the local cluster and removes again: kwok manages every
// node annotated kwok.x-k8s.io/node=fake (test/cluster/up), so it keeps one Ready
// and "runs" the pods scheduled to it. Each carries kwok's taint (as the
// cluster's own kwok nodes do beside real ones, test/cluster/nodes.ts), so only
// pods that tolerate it, or every NoSchedule taint, land there.
import { kubectl } from './cluster.ts';

export type TestNode = { arch?: string; labels?: Record<string, string>; capacity?: Record<string, string> };

export function applyKwokNode(name: string, o: TestNode = {}): void {
  const capacity = { cpu: '16', memory: '64Gi', 'ephemeral-storage': '100Gi', pods: '110', ...(o.capacity ?? {}) };
  kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        labels: { 'kubernetes.io/arch': o.arch ?? 'amd64', 'kubernetes.io/os': 'linux', 'kubernetes.io/hostname': name, ...(o.labels ?? {}) },
        annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      },
      spec: { taints: [{ key: 'kwok.x-k8s.io/node', value: 'fake', effect: 'NoSchedule' }] },
      status: { allocatable: capacity, capacity },
    }),
  });
}

export function deleteNodes(...names: string[]): void {
  kubectl(['delete', 'node', ...names, '--ignore-not-found'], { allowFail: true });
}
