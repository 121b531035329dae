// GPU feature discovery (gpuFeatureDiscovery.enabled): the DaemonSet's program
// reads a node's PCI devices from sysfs and labels the node. Here it runs as a
// local process authenticated as the chart's ServiceAccount (with the token of
// a pod of it on the node, as the DaemonSet's pods have), against a sysfs tree
// written like the kernel's, labelling the local cluster's kwok nodes.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuLabels, LABELS } from '../../gpu-discovery/node-labels.ts';
import { findGpus } from '../../gpu-discovery/pci-devices.ts';
import { helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { CHART, HOOK_ON_KWOK, root, TOKEN } from './chart.ts';
import { KWOK_TOLERATION } from '../support/kwok-outcome.ts';

type Dev = { vendor: string; device: string; class: string; vram?: string };
function sysfs(devices: Record<string, Dev>): string {
  const base = mkdtempSync(join(tmpdir(), 'rlmesh-sysfs-'));
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
