// GPU resources the nodes advertise (device plugins: nvidia.com/gpu,
// amd.com/gpu; DRA: DeviceClasses of resource.k8s.io) and whether
// gpuFeatureDiscovery fits them: enabled, and running on the GPU nodes that
// have no model label (its DaemonSet selects nodes by label).
import * as k8s from '@kubernetes/client-node';
import { isForbidden, isNotFound } from '../../kube-errors.ts';
import { PLATFORM_NODE_REQUIREMENTS } from '../../fixed-names.ts';
import { listNodes, nameList, nodeName } from '../kube.ts';
import { matchesNodeSelectorTerms, type NodeSelectorTerm } from '../label-selector.ts';
import type { CheckResult, PreflightContext } from '../types.ts';
import { errorMessage } from '../../error-fields.ts';

const ID = 'gpu-resources';

const VENDORS = [
  {
    resource: 'nvidia.com/gpu',
    vendor: 'nvidia',
    name: 'NVIDIA',
    hardware: ['feature.node.kubernetes.io/pci-10de.present', 'nvidia.com/gpu.present'],
    model: ['nvidia.com/gpu.product'],
    plugin: 'the NVIDIA device plugin or GPU Operator',
  },
  {
    resource: 'amd.com/gpu',
    vendor: 'amd',
    name: 'AMD',
    hardware: ['feature.node.kubernetes.io/pci-1002.present', 'amd.com/gpu.present'],
    model: ['amd.com/gpu.family', 'beta.amd.com/gpu.family', 'amd.com/gpu.product-name'],
    plugin: 'the AMD GPU device plugin or GPU Operator',
  },
] as const;

/** What DRA offers: DeviceClass names, or why they could not be read. */
export type DeviceClasses = { names: string[]; unreadable?: string };

function gpuCount(node: k8s.V1Node, resource: string): number {
  const q = node.status?.allocatable?.[resource] ?? node.status?.capacity?.[resource];
  return q === undefined ? 0 : Number.parseInt(q, 10) || 0;
}

const PLATFORM_TERM: NodeSelectorTerm = { matchExpressions: PLATFORM_NODE_REQUIREMENTS.map((r) => ({ ...r, values: [...r.values] })) };

/** discoveryTerms: GPU discovery's required node terms (empty: every linux/amd64 node). */
export function gpuVerdict(nodes: k8s.V1Node[], dra: DeviceClasses, discovery: boolean, discoveryTerms: NodeSelectorTerm[] = []): CheckResult {
  const advertised: string[] = [];
  const withoutModel: string[] = [];
  const unselected: string[] = [];
  const missingPlugin: string[] = [];
  const plugins = new Set<string>();
  for (const n of nodes) {
    const labels = n.metadata?.labels ?? {};
    const selector = { name: nodeName(n), labels };
    // a node off the runtime's platform runs no GPU discovery and no evaluation: node-architecture names it
    const discoverySkips = matchesNodeSelectorTerms([PLATFORM_TERM], selector) && discoveryTerms.length > 0 && !matchesNodeSelectorTerms(discoveryTerms, selector);
    for (const v of VENDORS) {
      const count = gpuCount(n, v.resource);
      const hasHardware = v.hardware.some((l) => labels[l] === 'true');
      if (count > 0) {
        // the vendor's labeller, else the chart's own GPU discovery (rlmesh.dev/gpu.*) for this vendor
        const ours = labels['rlmesh.dev/gpu.vendor'] === v.vendor ? labels['rlmesh.dev/gpu.product'] : undefined;
        const model = v.model.map((l) => labels[l]).find(Boolean) ?? ours;
        advertised.push(`${nodeName(n)}: ${v.resource} ${count}${model ? ` (${model})` : ''}`);
        if (!model) withoutModel.push(nodeName(n));
        if (!model && discovery && discoverySkips && !unselected.includes(nodeName(n))) unselected.push(nodeName(n));
      } else if (hasHardware) {
        missingPlugin.push(`${nodeName(n)} (${v.name} hardware labels, no ${v.resource})`);
        plugins.add(v.plugin);
      }
    }
  }
  const draText = dra.unreadable ? `DRA DeviceClasses not read (${dra.unreadable})` : dra.names.length ? `DRA DeviceClasses: ${dra.names.join(', ')}` : 'no DRA DeviceClasses';
  const found = `${advertised.length ? `device plugins: ${advertised.join('; ')}` : 'no node advertises nvidia.com/gpu or amd.com/gpu'}; ${draText}; gpuFeatureDiscovery.enabled=${discovery}`;
  if (missingPlugin.length) {
    return {
      id: ID,
      verdict: 'warn',
      found: `${found}; GPU hardware without a device plugin resource on ${nameList(missingPlugin)}`,
      fix: `Install ${[...plugins].join(' and ')} on those nodes so they advertise the GPU resource evaluation pods request.`,
    };
  }
  if (unselected.length) {
    return {
      id: ID,
      verdict: 'warn',
      found: `${found}; GPU discovery does not run on ${nameList(unselected)}: none of the required node terms of gpuFeatureDiscovery.affinity matches their labels, so their GPUs are reported without a model`,
      fix: 'Label those nodes nvidia.com/gpu.present=true or amd.com/gpu.present=true, or add a term that selects them to gpuFeatureDiscovery.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, so GPU discovery labels their GPU model.',
    };
  }
  if (advertised.length === 0 && dra.names.length > 0) {
    return {
      id: ID,
      verdict: 'warn',
      found,
      fix: 'Evaluation pods request GPUs as nvidia.com/gpu or amd.com/gpu, so also install the vendor device plugin to run GPU evaluations; CPU evaluations run as they are.',
    };
  }
  if (advertised.length === 0 && discovery) {
    return { id: ID, verdict: 'warn', found: `${found}: the cluster is CPU-only`, fix: 'Set gpuFeatureDiscovery.enabled=false, as no node has a GPU to label.' };
  }
  if (withoutModel.length && !discovery) {
    return {
      id: ID,
      verdict: 'warn',
      found: `${found}; no GPU model label on ${nameList(withoutModel)}`,
      fix: 'Set gpuFeatureDiscovery.enabled=true so GPU nodes are labelled with vendor, model and memory and evaluations can choose a GPU model.',
    };
  }
  return { id: ID, verdict: 'pass', found: advertised.length ? found : `${found}: CPU-only`, fix: 'Nothing to do.' };
}

export async function listDeviceClasses(kc: k8s.KubeConfig): Promise<DeviceClasses> {
  try {
    const list = await kc.makeApiClient(k8s.ResourceV1Api).listDeviceClass();
    return { names: list.items.map((d) => d.metadata?.name ?? '') };
  } catch (err) {
    if (isNotFound(err)) return { names: [] }; // resource.k8s.io/v1 not served: no DRA
    if (isForbidden(err)) return { names: [], unreadable: errorMessage(err) };
    throw err;
  }
}

export async function checkGpuResources(ctx: PreflightContext): Promise<CheckResult> {
  const [nodes, dra] = await Promise.all([listNodes(ctx), listDeviceClasses(ctx.kc)]);
  return gpuVerdict(nodes, dra, ctx.settings.gpuFeatureDiscovery, ctx.settings.gpuDiscoveryNodeTerms);
}
