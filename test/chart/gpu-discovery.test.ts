// GPU feature discovery (gpuFeatureDiscovery.enabled): the DaemonSet's program
// reads a node's PCI devices from sysfs and labels the node. Here it runs as a
// local process authenticated as the chart's ServiceAccount (with the token of
// a pod of it on the node, as the DaemonSet's pods have), against a sysfs tree
// written like the kernel's, labelling the local cluster's kwok nodes. And the
// DaemonSet itself, on kwok nodes the test adds: it runs only on linux/amd64
// nodes that can have GPUs by their labels, not on a node without GPUs nor on
// an arm64 GPU node.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuLabels, LABELS } from '../../gpu-discovery/node-labels.ts';
import { findGpus } from '../../gpu-discovery/pci-devices.ts';
import { helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { CHART, HOOK_ON_KWOK, root, TOKEN } from './chart.ts';
import { KWOK_TOLERATION } from '../support/kwok-outcome.ts';
import { applyKwokNode, deleteNodes } from '../support/kwok-node.ts';
import { until } from '../support/until.ts';
import { matchesNodeSelectorTerms } from '../../lib/preflight/label-selector.ts';
import { PLATFORM_NODE_REQUIREMENTS } from '../../lib/fixed-names.ts';
import { GPU_NODE_TERMS } from '../../lib/values-schema.ts';
import { tempDir } from '../support/temp.ts';

type Dev = { vendor: string; device: string; class: string; vram?: string };
function sysfs(devices: Record<string, Dev>): string {
  const base = tempDir('rlmesh-sysfs-');
  const dir = join(base, 'bus/pci/devices');
  mkdirSync(dir, { recursive: true });
  for (const [address, d] of Object.entries(devices)) {
    mkdirSync(join(dir, address));
    writeFileSync(join(dir, address, 'vendor'), `${d.vendor}\n`);
    writeFileSync(join(dir, address, 'device'), `${d.device}\n`);
    writeFileSync(join(dir, address, 'class'), `${d.class}\n`);
    if (d.vram) writeFileSync(join(dir, address, 'mem_info_vram_total'), `${d.vram}\n`);
  }
  return base;
}

const h100 = { vendor: '0x10de', device: '0x2330', class: '0x030200' };
const eightH100 = sysfs({
  '0000:00:02.0': { vendor: '0x1a03', device: '0x2000', class: '0x030000' }, // the BMC's VGA, not a GPU
  '0000:00:1f.0': { vendor: '0x8086', device: '0xa1c1', class: '0x060100' },
  ...Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`0000:${(0x18 + i).toString(16)}:00.0`, h100])),
});

describe('finding GPUs in sysfs', () => {
  it('counts NVIDIA display controllers and names the model', async () => {
    const gpus = await findGpus(eightH100);
    expect(gpus).toHaveLength(8);
    expect(gpuLabels(gpus)).toEqual({
      [LABELS.vendor]: 'nvidia',
      [LABELS.product]: 'NVIDIA-H100-SXM5-80GB',
      [LABELS.memory]: String(80 * 1024),
      [LABELS.count]: '8',
    });
  });

  it('takes AMD memory from amdgpu, and labels an unknown model by its id', async () => {
    const amd = await findGpus(sysfs({ '0000:c1:00.0': { vendor: '0x1002', device: '0x74a1', class: '0x038000', vram: String(192 * 2 ** 30) } }));
    expect(gpuLabels(amd)).toMatchObject({ [LABELS.vendor]: 'amd', [LABELS.product]: 'AMD-Instinct-MI300X', [LABELS.memory]: String(192 * 1024) });
    const unknown = await findGpus(sysfs({ '0000:3b:00.0': { vendor: '0x10de', device: '0x9999', class: '0x030200' } }));
    expect(gpuLabels(unknown)).toEqual({ [LABELS.vendor]: 'nvidia', [LABELS.product]: 'NVIDIA-9999', [LABELS.memory]: null, [LABELS.count]: '1' });
  });

  it('a node without GPUs (or without a PCI bus) gets its GPU labels removed', async () => {
    expect(await findGpus(join(tmpdir(), 'no-such-sysfs'))).toEqual([]);
    expect(Object.values(gpuLabels([])).every((v) => v === null)).toBe(true);
  });
});

describe('labelling nodes as the chart ServiceAccount', () => {
  const labelsOf = (node: string): Record<string, string> =>
    (JSON.parse(kubectl(['get', 'node', node, '-o', 'json']).stdout) as { metadata: { labels: Record<string, string> } }).metadata.labels;
  // the program runs with the token of a GPU discovery pod on that node, as the DaemonSet's pod has it: the
  // chart's admission policy lets that token label its own node only
  const kubeconfigs = new Map<string, string>();
  async function kubeconfigOn(node: string): Promise<string> {
    if (!kubeconfigs.has(node)) {
      const name = `gpu-discovery-${node}`;
      const image = kubectl(['-n', 'rlmesh-system', 'get', 'daemonset', 'rlmesh-gpu-feature-discovery', '-o', 'jsonpath={.spec.template.spec.containers[0].image}']).stdout;
      kubectl(['apply', '-f', '-'], { input: JSON.stringify({
        apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'rlmesh-system', labels: { 'rlmesh.dev/test': 'gpu-discovery' } },
        spec: {
          serviceAccountName: 'rlmesh-gpu-feature-discovery', nodeName: node, tolerations: [KWOK_TOLERATION],
          securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [{ name: 'gpu-discovery', image, securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
        },
      }) });
      const uid = kubectl(['-n', 'rlmesh-system', 'get', 'pod', name, '-o', 'jsonpath={.metadata.uid}']).stdout;
      kubeconfigs.set(node, await serviceAccountKubeconfig('rlmesh-system', 'rlmesh-gpu-feature-discovery', 600, { name, uid }));
    }
    return kubeconfigs.get(node)!;
  }
  const run = async (node: string, sysfsRoot: string) =>
    execFileSync(join(root, 'node_modules/.bin/node'), [join(root, 'gpu-discovery/main.ts'), '--once', '--sysfs-root', sysfsRoot], {
      encoding: 'utf8',
      env: { ...process.env, KUBECONFIG: await kubeconfigOn(node), NODE_NAME: node },
    });
  const unlabel = (node: string) => kubectl(['label', 'node', node, ...Object.values(LABELS).map((l) => `${l}-`)], { allowFail: true });

  beforeAll(async () => {
    helm(['upgrade', '--install', 'rlmesh', CHART, '-n', 'rlmesh-system', '--create-namespace', '--set', `joinToken=${TOKEN}`, ...HOOK_ON_KWOK]);
  });
  afterAll(() => {
    kubectl(['-n', 'rlmesh-system', 'delete', 'pods', '-l', 'rlmesh.dev/test=gpu-discovery', '--wait=false'], { allowFail: true });
    unlabel('kwok-gpu-0');
    unlabel('kwok-cpu-0');
  });

  it('labels the GPU node with vendor, model, memory and count', async () => {
    unlabel('kwok-gpu-0');
    const out = await run('kwok-gpu-0', eightH100);
    expect(out).toContain('node GPU labels updated');
    expect(labelsOf('kwok-gpu-0')).toMatchObject({
      'rlmesh.dev/gpu.vendor': 'nvidia',
      'rlmesh.dev/gpu.product': 'NVIDIA-H100-SXM5-80GB',
      'rlmesh.dev/gpu.memory': '81920',
      'rlmesh.dev/gpu.count': '8',
    });
    // a second pass changes nothing and does not patch
    expect(await run('kwok-gpu-0', eightH100)).toContain('node GPU labels unchanged');
  });

  it('removes stale GPU labels from a CPU node', async () => {
    kubectl(['label', 'node', 'kwok-cpu-0', '--overwrite', 'rlmesh.dev/gpu.vendor=nvidia', 'rlmesh.dev/gpu.count=1']);
    await run('kwok-cpu-0', sysfs({ '0000:00:1f.0': { vendor: '0x8086', device: '0xa1c1', class: '0x060100' } }));
    const labels = labelsOf('kwok-cpu-0');
    expect(labels['rlmesh.dev/gpu.vendor']).toBeUndefined();
    expect(labels['rlmesh.dev/gpu.count']).toBeUndefined();
  });

  it('its ServiceAccount may patch nodes but read no Secrets', () => {
    const can = (args: string[]) => kubectl(['auth', 'can-i', ...args, '--as=system:serviceaccount:rlmesh-system:rlmesh-gpu-feature-discovery'], { allowFail: true }).stdout.trim();
    expect(can(['patch', 'nodes'])).toBe('yes');
    expect(can(['get', 'secrets', '-n', 'rlmesh-system'])).toBe('no');
    expect(can(['create', 'pods', '-n', 'rlmesh-runs'])).toBe('no');
  });
});

describe('where the DaemonSet runs', () => {
  const NO_GPU = 'rlmesh-gd-it-nogpu-0';
  const GKE_GPU = 'rlmesh-gd-it-gke-gpu-0';
  const ARM_GPU = 'rlmesh-gd-it-arm64-gpu-0';
  type NodeView = { metadata: { name: string; labels?: Record<string, string> } };

  beforeAll(() => {
    helm(['upgrade', '--install', 'rlmesh', CHART, '-n', 'rlmesh-system', '--create-namespace', '--set', `joinToken=${TOKEN}`, ...HOOK_ON_KWOK]);
    applyKwokNode(NO_GPU);
    // a GKE GPU pool's node: no vendor labeller, only the cloud's label
    applyKwokNode(GKE_GPU, { labels: { 'cloud.google.com/gke-accelerator': 'nvidia-l4' }, capacity: { 'nvidia.com/gpu': '1' } });
    // a Grace Hopper node: GPUs, but the runtime image is linux/amd64 only
    applyKwokNode(ARM_GPU, { arch: 'arm64', labels: { 'nvidia.com/gpu.present': 'true' }, capacity: { 'nvidia.com/gpu': '4' } });
  });
  afterAll(() => deleteNodes(NO_GPU, GKE_GPU, ARM_GPU));

  it('runs on linux/amd64 nodes with a GPU label only: not on a node without GPUs, a CPU node or an arm64 GPU node', async () => {
    const podNodes = (): string[] =>
      (JSON.parse(kubectl(['-n', 'rlmesh-system', 'get', 'pods', '-l', 'app.kubernetes.io/name=rlmesh-gpu-feature-discovery', '-o', 'json']).stdout) as { items: { spec: { nodeName?: string } }[] }).items
        .map((p) => p.spec.nodeName ?? '')
        .sort();
    const desired = (): number => Number(kubectl(['-n', 'rlmesh-system', 'get', 'daemonset', 'rlmesh-gpu-feature-discovery', '-o', 'jsonpath={.status.desiredNumberScheduled}']).stdout);
    // what the chart's node terms select, with the platform ANDed into each: computed from every node's labels
    const terms = GPU_NODE_TERMS.map((t) => ({ matchExpressions: [...t.matchExpressions, ...PLATFORM_NODE_REQUIREMENTS.map((r) => ({ ...r, values: [...r.values] }))] }));
    const nodes = (JSON.parse(kubectl(['get', 'nodes', '-o', 'json']).stdout) as { items: NodeView[] }).items;
    const expected = nodes.filter((n) => matchesNodeSelectorTerms(terms, { name: n.metadata.name, labels: n.metadata.labels ?? {} })).map((n) => n.metadata.name).sort();
    expect(expected).toContain('kwok-gpu-0');
    expect(expected).toContain(GKE_GPU);

    const placed = await until('a scheduled discovery pod on each GPU node, and no other', async () => {
      const on = podNodes();
      return desired() === expected.length && on.length === expected.length && on.every(Boolean) ? on : undefined;
    }, { timeoutMs: 60_000, intervalMs: 500, context: () => `expected ${expected.join(' ')}; desired ${desired()}; pods on ${podNodes().join(' ')}` });
    expect(placed).toEqual(expected);
    for (const other of [NO_GPU, ARM_GPU, 'kwok-cpu-0', 'kwok-cpu-1']) expect(placed, other).not.toContain(other);
    // each pod requires linux/amd64 in every term, beside the GPU label
    const pod = JSON.parse(kubectl(['-n', 'rlmesh-system', 'get', 'daemonset', 'rlmesh-gpu-feature-discovery', '-o', 'json']).stdout) as {
      spec: { template: { spec: { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: { matchExpressions: { key: string }[] }[] } } } } } };
    };
    for (const t of pod.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms)
      expect(t.matchExpressions.map((e) => e.key)).toEqual(expect.arrayContaining(['kubernetes.io/os', 'kubernetes.io/arch']));
  });
});
