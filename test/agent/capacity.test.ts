// Node reports on the real cluster: the GPU model from discovery labels, free
// capacity net of another tenant's pod (GPUs from limits) soon after the
// change, only the nodes the selector names, free capacity capped by a
// ResourceQuota of the runs namespace, and only linux/amd64 nodes offered (an
// arm64 node is reported unschedulable with nothing free); and the cluster's
// own address ranges, for the egress proxy, from every node, the ServiceCIDRs,
// the API server's endpoints and every Service's external addresses.
import * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { adminKubeConfig, kubectl } from '../support/cluster.ts';
import { api } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { applyKwokNode, deleteNodes } from '../support/kwok-node.ts';
import { endpointSliceRanges, nodeRanges, serviceRanges } from '../../agent/cluster-ranges.ts';
import { newCluster, RUNS, runtimeConfig, SYSTEM } from './harness.ts';
import { agentSuite } from './suite.ts';

const TENANT = 'rlmesh-agent-it-tenant';

type ReportedNode = {
  name: string;
  architecture?: string;
  schedulable?: boolean;
  gpusAllocatable?: number;
  gpusFree?: number;
  cpuMillisFree?: string;
  cpuMillisAllocatable?: string;
  memoryBytesFree?: string;
  gpus?: { vendor: string; model: string; memoryMib: string; count: number }[];
};
type Report = { nodes: ReportedNode[] };
// the nodes the architecture test adds, and the label its report selector names
const ARM = 'rlmesh-agent-it-arm64-0';
const AMD = 'rlmesh-agent-it-amd64-0';
const ARCH_GROUP = 'rlmesh.dev/agent-it-arch';

describe('agent node reports', () => {
  const suite = agentSuite({ joinToken: true }, {
    before: async () => {
      kubectl(['create', 'namespace', TENANT], { allowFail: true });
      kubectl(['-n', TENANT, 'delete', 'pod', '--all', '--grace-period=0', '--force'], { allowFail: true });
    },
    after: async () => {
      kubectl(['delete', 'namespace', TENANT, '--wait=false'], { allowFail: true });
      deleteNodes(ARM, AMD);
    },
  });

  it("reports another tenant's GPU pod once it changes, and only the selected nodes", async () => {
    const { clusterId, joinToken } = await newCluster(suite.cp, 'capacity');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp, { nodeSelector: 'nvidia.com/gpu.present=true' }), token: joinToken });
    await agent.waitFor('connected', /session connected/);
    const report = async () => (await api<{ nodeReport: { report: Report; received: number } | null }>(suite.cp, 'GET', `/v1/clusters/${clusterId}`)).body.nodeReport;
    const first = await until('a node report', async () => (await report()) ?? undefined, { timeoutMs: 20_000 });
    // the selector keeps the CPU-only nodes out of what the control plane learns
    expect(first.report.nodes.map((n) => n.name)).toEqual(['kwok-gpu-0']);
    const gpu = first.report.nodes[0]!;
    expect(gpu.gpusAllocatable).toBe(8);
    expect(gpu.gpus).toEqual([{ vendor: 'nvidia', model: 'NVIDIA-H100-80GB-HBM3', memoryMib: '81559', count: 8 }]);
    const freeBefore = gpu.gpusFree ?? 0;
    const cpuBefore = Number(gpu.cpuMillisFree);

    const core = adminKubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedPod({
      namespace: TENANT,
      body: {
        metadata: { name: 'someone-elses-training' },
        spec: {
          nodeName: 'kwok-gpu-0',
          restartPolicy: 'Always',
          tolerations: [{ operator: 'Exists' }],
          containers: [{ name: 'train', image: 'busybox', resources: { requests: { cpu: '3', memory: '1Gi' }, limits: { 'nvidia.com/gpu': '3' } } }],
        },
      },
    });
    await until('report shows the pod', async () => {
      const n = (await report())?.report.nodes[0];
      return n && (n.gpusFree ?? 0) === freeBefore - 3 && Number(n.cpuMillisFree) === cpuBefore - 3000 ? n : undefined;
    }, { timeoutMs: 30_000, intervalMs: 50 });

    await core.deleteNamespacedPod({ namespace: TENANT, name: 'someone-elses-training', gracePeriodSeconds: 0 });
    await until('freed again', async () => ((await report())?.report.nodes[0]?.gpusFree === freeBefore ? true : undefined), { timeoutMs: 15_000, intervalMs: 50 });
    expect(await agent.metrics()).toMatch(/rlmesh_agent_node_report_latency_seconds_count [1-9]/);
    await agent.stop();
  });
  it('offers no more than the ResourceQuotas of the runs namespace still admit, under the chart\'s RBAC', async () => {
    const { clusterId, joinToken } = await newCluster(suite.cp, 'quota');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp, { nodeSelector: 'nvidia.com/gpu.present=true' }), token: joinToken });
    await agent.waitFor('connected', /session connected/);
    const node = async () => (await api<{ nodeReport: { report: Report } | null }>(suite.cp, 'GET', `/v1/clusters/${clusterId}`)).body.nodeReport?.report.nodes[0];
    const before = await until('a node report', node, { timeoutMs: 20_000 });
    expect(before.gpusFree ?? 0).toBeGreaterThan(2);
    const quota = { apiVersion: 'v1', kind: 'ResourceQuota', metadata: { name: 'gpus', namespace: RUNS }, spec: { hard: { 'requests.nvidia.com/gpu': '2', 'requests.cpu': '1500m' } } };
    kubectl(['apply', '-f', '-'], { input: JSON.stringify(quota) });
    try {
      const capped = await until('the report capped at the quota', async () => {
        const n = await node();
        return n && n.gpusFree === 2 && Number(n.cpuMillisFree) === Math.min(1500, Number(before.cpuMillisFree)) ? n : undefined;
      }, { timeoutMs: 15_000, intervalMs: 100 });
      expect(capped.gpusAllocatable).toBe(before.gpusAllocatable);
      expect(capped.cpuMillisAllocatable).toBe(before.cpuMillisAllocatable);
    } finally {
      kubectl(['-n', RUNS, 'delete', 'resourcequota', 'gpus', '--ignore-not-found']);
    }
    await until('the cap lifted with the quota', async () => ((await node())?.gpusFree === before.gpusFree ? true : undefined), { timeoutMs: 15_000, intervalMs: 100 });
    await agent.stop();
  });

  it('offers the platform only linux/amd64 nodes: an arm64 GPU node is reported, unschedulable and with nothing free', async () => {
    // a Grace Hopper node beside an x86 one: the runtime images (and so every evaluation pod) are linux/amd64 only
    applyKwokNode(ARM, { arch: 'arm64', labels: { [ARCH_GROUP]: 'yes', 'nvidia.com/gpu.product': 'NVIDIA-GH200-480GB' }, capacity: { 'nvidia.com/gpu': '1' } });
    applyKwokNode(AMD, { labels: { [ARCH_GROUP]: 'yes' } });
    const { clusterId, joinToken } = await newCluster(suite.cp, 'architecture');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp, { nodeSelector: `${ARCH_GROUP}=yes` }), token: joinToken });
    await agent.waitFor('connected', /session connected/);
    const reported = async () => {
      const nodes = (await api<{ nodeReport: { report: Report } | null }>(suite.cp, 'GET', `/v1/clusters/${clusterId}`)).body.nodeReport?.report.nodes ?? [];
      return Object.fromEntries(nodes.map((n) => [n.name, n]));
    };
    const first = await until('a report of both nodes', async () => {
      const r = await reported();
      return r[ARM] && r[AMD] ? r : undefined;
    }, { timeoutMs: 20_000 });
    expect(Object.keys(first).sort()).toEqual([AMD, ARM]);
    expect(first[AMD]).toMatchObject({ architecture: 'amd64', schedulable: true, cpuMillisAllocatable: '16000' });
    expect(Number(first[AMD]!.cpuMillisFree)).toBeGreaterThan(0);
    // the platform sees the node, its size and its GPUs, and can place nothing there (proto JSON leaves out false and 0)
    expect(first[ARM]).toMatchObject({ architecture: 'arm64', cpuMillisAllocatable: '16000', gpusAllocatable: 1, gpus: [{ vendor: 'nvidia', model: 'NVIDIA-GH200-480GB', count: 1 }] });
    expect(first[ARM]!.schedulable ?? false).toBe(false);
    expect(first[ARM]!.cpuMillisFree ?? '0').toBe('0');
    expect(first[ARM]!.memoryBytesFree ?? '0').toBe('0');
    expect(first[ARM]!.gpusFree ?? 0).toBe(0);

    // the rule follows the label the scheduler matches: relabelled amd64, the node is offered in the next report
    kubectl(['label', 'node', ARM, 'kubernetes.io/arch=amd64', '--overwrite']);
    const offered = await until('the relabelled node offered', async () => {
      const n = (await reported())[ARM];
      return n?.schedulable ? n : undefined;
    }, { timeoutMs: 10_000, intervalMs: 100 });
    expect(offered).toMatchObject({ architecture: 'amd64', gpusFree: 1 });
    expect(Number(offered.cpuMillisFree)).toBeGreaterThan(0);
    await agent.stop();
    deleteNodes(ARM, AMD);
  });
  it("writes the cluster's own ranges to ConfigMap rlmesh-cluster-ranges: every node's pod ranges and addresses (those the report selector leaves out too), the ServiceCIDRs, the API server's endpoints and every Service's external addresses, a new one within seconds", async () => {
    // the chart creates it empty; the agent fills it
    kubectl(['-n', SYSTEM, 'delete', 'configmap', 'rlmesh-cluster-ranges', '--ignore-not-found']);
    kubectl(['-n', SYSTEM, 'create', 'configmap', 'rlmesh-cluster-ranges']);
    kubectl(['-n', TENANT, 'delete', 'service', 'external', '--ignore-not-found']);
    const { joinToken } = await newCluster(suite.cp, 'ranges');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp, { nodeSelector: 'nvidia.com/gpu.present=true' }), token: joinToken });
    await agent.waitFor('ranges written', /wrote the cluster's own address ranges/);
    const expected = (): string[] => {
      const nodes = (JSON.parse(kubectl(['get', 'nodes', '-o', 'json']).stdout) as { items: k8s.V1Node[] }).items;
      const serviceCidrs = (JSON.parse(kubectl(['get', 'servicecidrs', '-o', 'json']).stdout) as { items: k8s.V1ServiceCIDR[] }).items.flatMap((c) => c.spec?.cidrs ?? []);
      expect(serviceCidrs.length, 'the local apiserver publishes its Service range as a ServiceCIDR').toBeGreaterThan(0);
      expect(nodes.filter((n) => nodeRanges(n).length > 0).length, 'nodes with addresses to refuse').toBeGreaterThan(0);
      const apiServer = endpointSliceRanges(JSON.parse(kubectl(['-n', 'default', 'get', 'endpointslice', 'kubernetes', '-o', 'json']).stdout) as k8s.V1EndpointSlice);
      expect(apiServer.length, "the API server's own addresses").toBeGreaterThan(0);
      const services = (JSON.parse(kubectl(['get', 'services', '-A', '-o', 'json']).stdout) as { items: k8s.V1Service[] }).items.flatMap(serviceRanges);
      return [...new Set([...nodes.flatMap(nodeRanges), ...serviceCidrs, ...apiServer, ...services])].sort();
    };
    const written = () => kubectl(['-n', SYSTEM, 'get', 'configmap', 'rlmesh-cluster-ranges', '-o', 'jsonpath={.data.ranges}']).stdout.split('\n');
    expect(written()).toEqual(expected());
    // a Service given an external address (never dialled: nothing here connects to it) is the cluster's own at once
    kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'external', namespace: TENANT }, spec: { ports: [{ port: 9 }], externalIPs: ['203.0.113.77'] } }) });
    await until('the external IP among the ranges', () => (written().includes('203.0.113.77/32') ? true : undefined), { timeoutMs: 15_000, intervalMs: 200 });
    expect(written()).toEqual(expected());
    kubectl(['-n', TENANT, 'delete', 'service', 'external']);
    await until('the external IP gone from the ranges', () => (written().includes('203.0.113.77/32') ? undefined : true), { timeoutMs: 15_000, intervalMs: 200 });
  });
});

