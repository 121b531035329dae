// Node reports: each node's allocatable CPU, memory and GPUs and what is free
// net of what every tenant's non-terminal pods request (GPUs from limits), from
// node and pod informers, capped at what the ResourceQuotas of the runs
// namespace still admit. Changes are coalesced into one report sent within the
// report delay of the first change; a full report also goes out on every
// (re)connect and on a slow resync timer. A node evaluations cannot run on is
// reported unschedulable with nothing free (eligible-nodes.ts): one of another
// platform, or one the operator's policy for evaluation pods rules out
// (evaluations.nodeSelector, affinity, and taints evaluations.tolerations do not tolerate).
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import * as k8s from '@kubernetes/client-node';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import {
  GpuModelSchema,
  NodeCapacitySchema,
  NodeReportSchema,
  type GpuModel,
  type NodeCapacity,
  type NodeReport,
} from '../lib/gen/rlmesh/v1/session_pb.ts';
import { startInformer, type Informer } from '../lib/informer.ts';
import type { InformerMetricsFor } from '../lib/informer-metrics.ts';
import { bytes, cpuMillis, parseQuantity } from '../lib/quantity.ts';
import { offered, PLATFORM_LABELS } from './eligible-nodes.ts';
import { BLOCKING_EFFECTS, NO_PLACEMENT, placementLabelKeys, type ClusterPlacement, type Taint } from '../lib/evaluation-placement.ts';

export const GPU_RESOURCES = { nvidia: 'nvidia.com/gpu', amd: 'amd.com/gpu' } as const;
type Vendor = keyof typeof GPU_RESOURCES;
const VENDORS = Object.keys(GPU_RESOURCES) as Vendor[];

type Resources = { requests?: Record<string, string>; limits?: Record<string, string> };
type ContainerLite = { resources?: Resources; restartPolicy?: string };
type PodSpecLite = { containers?: ContainerLite[]; initContainers?: ContainerLite[]; overhead?: Record<string, string> };

/**
 * What the agent keeps of a pod: its node and what it reserves there, computed
 * once when the object arrives. 50,000 of these are a few MiB; the containers
 * they came from would be tens.
 */
export type PodLite = {
  metadata: { name: string; namespace: string };
  nodeName: string;
  usage: Usage;
};

export type NodeLite = {
  metadata: { name: string; labels: Record<string, string> };
  /** taints: only the NoSchedule and NoExecute ones, which keep a pod off the node */
  spec: { unschedulable?: boolean; taints?: Taint[] };
  status: { allocatable: Record<string, string>; ready: boolean; architecture?: string };
};

export type Usage = { cpuMillis: number; memoryBytes: number } & Record<Vendor, number>;

/** The most a pod may still take of each resource; an absent one is not bounded. */
export type Bound = Partial<Usage>;

/** What the agent keeps of a ResourceQuota: how much more of each resource it admits. */
export type QuotaLite = { metadata: { name: string; namespace: string }; room: Bound & { pods?: number } };

// the node labels GPU discovery writes (NVIDIA GFD, AMD's node labeller, and the chart's own
// rlmesh-gpu-feature-discovery), plus os and arch
const KEPT_LABELS = [
  ...PLATFORM_LABELS,
  'rlmesh.dev/gpu.vendor',
  'rlmesh.dev/gpu.product',
  'rlmesh.dev/gpu.memory',
  'nvidia.com/gpu.product',
  'nvidia.com/gpu.memory',
  'amd.com/gpu.product-name',
  'beta.amd.com/gpu.product-name',
  'amd.com/gpu.vram',
  'beta.amd.com/gpu.vram',
];

type AnyObj = Record<string, unknown> & { metadata?: Record<string, unknown>; spec?: Record<string, unknown>; status?: Record<string, unknown> };

// Namespace and node names repeat across thousands of pods, and each parsed
// object carries its own copy; sharing one copy per value saves most of them.
// Bounded: a cluster churning through names clears it rather than growing it.
const INTERN_MAX = 20_000;
const interned = new Map<string, string>();
function intern(s: string): string {
  const have = interned.get(s);
  if (have !== undefined) return have;
  if (interned.size >= INTERN_MAX) interned.clear();
  interned.set(s, s);
  return s;
}

export function trimPod(o: unknown): PodLite {
  const p = o as AnyObj;
  return {
    metadata: { name: String(p.metadata?.name ?? ''), namespace: intern(String(p.metadata?.namespace ?? '')) },
    nodeName: intern(String((p.spec as { nodeName?: string } | undefined)?.nodeName ?? '')),
    usage: podUsage((p.spec ?? {}) as PodSpecLite, (p.status as { phase?: string } | undefined)?.phase),
  };
}

/** `extraLabels`: the labels the operator's policy for evaluation pods reads (placementLabelKeys()). */
export function trimNode(o: unknown, extraLabels: readonly string[] = []): NodeLite {
  const n = o as AnyObj;
  const labels = (n.metadata?.labels ?? {}) as Record<string, string>;
  const kept: Record<string, string> = {};
  for (const k of KEPT_LABELS) if (labels[k] !== undefined) kept[k] = labels[k];
  for (const k of extraLabels) if (labels[k] !== undefined) kept[k] = labels[k];
  const taints = ((n.spec as { taints?: Taint[] } | undefined)?.taints ?? [])
    .filter((t) => BLOCKING_EFFECTS.includes(t.effect))
    .map((t) => ({ key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect }));
  const status = (n.status ?? {}) as { allocatable?: Record<string, string>; conditions?: { type: string; status: string }[]; nodeInfo?: { architecture?: string } };
  return {
    metadata: { name: String(n.metadata?.name ?? ''), labels: kept },
    spec: { unschedulable: Boolean((n.spec as { unschedulable?: boolean } | undefined)?.unschedulable), ...(taints.length ? { taints } : {}) },
    status: {
      allocatable: status.allocatable ?? {},
      ready: (status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
      architecture: kept['kubernetes.io/arch'] ?? status.nodeInfo?.architecture,
    },
  };
}

const zero = (): Usage => ({ cpuMillis: 0, memoryBytes: 0, nvidia: 0, amd: 0 });

function containerUsage(c: ContainerLite): Usage {
  const req = c.resources?.requests ?? {};
  const lim = c.resources?.limits ?? {};
  const u = zero();
  // the apiserver defaults requests to limits, but objects from older clients may only carry limits
  u.cpuMillis = cpuMillis(req.cpu ?? lim.cpu);
  u.memoryBytes = bytes(req.memory ?? lim.memory);
  // extended resources: requests must equal limits; limits are what the device plugin allocates
  for (const v of VENDORS) u[v] = Math.round(parseQuantity(lim[GPU_RESOURCES[v]] ?? req[GPU_RESOURCES[v]]));
  return u;
}

const combine = (f: (x: number, y: number) => number) => (a: Usage, b: Usage): Usage => ({
  cpuMillis: f(a.cpuMillis, b.cpuMillis),
  memoryBytes: f(a.memoryBytes, b.memoryBytes),
  nvidia: f(a.nvidia, b.nvidia),
  amd: f(a.amd, b.amd),
});
const add = combine((x, y) => x + y);
const max = combine(Math.max);

/**
 * What the scheduler reserves for a pod: the larger of its app containers (plus
 * sidecars) and its heaviest init container (plus the sidecars started before
 * it), plus the pod overhead. Terminal pods reserve nothing.
 */
export function podUsage(spec: PodSpecLite, phase: string | undefined): Usage {
  if (phase === 'Succeeded' || phase === 'Failed') return zero();
  let sidecars = zero();
  let initPeak = zero();
  for (const c of spec.initContainers ?? []) {
    const u = containerUsage(c);
    if (c.restartPolicy === 'Always') {
      sidecars = add(sidecars, u);
      initPeak = max(initPeak, sidecars);
    } else {
      initPeak = max(initPeak, add(sidecars, u));
    }
  }
  let app = sidecars;
  for (const c of spec.containers ?? []) app = add(app, containerUsage(c));
  const overhead = spec.overhead ? containerUsage({ resources: { requests: spec.overhead } }) : zero();
  return add(max(app, initPeak), overhead);
}

function gpuMemoryMiB(v: string | undefined): number {
  if (!v) return 0;
  const m = /^(\d+(?:\.\d+)?)\s*([KMGT]i?)?B?$/i.exec(v.trim());
  if (!m) return 0;
  const n = Number(m[1]);
  const unit = (m[2] ?? 'M').toUpperCase()[0];
  return Math.round(unit === 'K' ? n / 1024 : unit === 'G' ? n * 1024 : unit === 'T' ? n * 1024 * 1024 : n);
}

export function gpuModels(node: NodeLite): GpuModel[] {
  const l = node.metadata.labels;
  // the vendor's own labeller first; else what the chart's GPU discovery wrote for that vendor
  const ours = (vendor: Vendor, key: 'product' | 'memory') => (l['rlmesh.dev/gpu.vendor'] === vendor ? l[`rlmesh.dev/gpu.${key}`] : undefined);
  const out: GpuModel[] = [];
  const nv = Math.round(parseQuantity(node.status.allocatable[GPU_RESOURCES.nvidia]));
  if (nv > 0) {
    out.push(create(GpuModelSchema, {
      vendor: 'nvidia',
      model: l['nvidia.com/gpu.product'] ?? ours('nvidia', 'product') ?? '',
      memoryMib: BigInt(gpuMemoryMiB(l['nvidia.com/gpu.memory'] ?? ours('nvidia', 'memory'))),
      count: nv,
    }));
  }
  const amd = Math.round(parseQuantity(node.status.allocatable[GPU_RESOURCES.amd]));
  if (amd > 0) {
    out.push(
      create(GpuModelSchema, {
        vendor: 'amd',
        model: l['amd.com/gpu.product-name'] ?? l['beta.amd.com/gpu.product-name'] ?? ours('amd', 'product') ?? '',
        memoryMib: BigInt(gpuMemoryMiB(l['amd.com/gpu.vram'] ?? l['beta.amd.com/gpu.vram'] ?? ours('amd', 'memory'))),
        count: amd,
      }),
    );
  }
  return out;
}

// Quota entries that hold an evaluation pod back, per resource: its containers' requests equal their limits
// (lib/crds/types.ts), so a limits.* entry bounds it as much as a requests.* one; extended resources have only requests.*
const QUOTA_ENTRIES: { field: keyof QuotaLite['room']; entries: string[]; amount: (q: string | undefined) => number }[] = [
  { field: 'cpuMillis', entries: ['requests.cpu', 'cpu', 'limits.cpu'], amount: cpuMillis },
  { field: 'memoryBytes', entries: ['requests.memory', 'memory', 'limits.memory'], amount: bytes },
  ...VENDORS.map((v) => ({ field: v, entries: [`requests.${GPU_RESOURCES[v]}`], amount: (q: string | undefined) => Math.round(parseQuantity(q)) })),
  { field: 'pods', entries: ['pods', 'count/pods'], amount: (q: string | undefined) => Math.round(parseQuantity(q)) },
];

type QuotaObject = {
  metadata?: { name?: string; namespace?: string };
  spec?: { hard?: Record<string, string>; scopes?: string[]; scopeSelector?: { matchExpressions?: { scopeName: string; operator: string }[] } };
  status?: { hard?: Record<string, string>; used?: Record<string, string> };
};

export function trimQuota(o: unknown): QuotaLite {
  const q = o as QuotaObject;
  const metadata = { name: String(q.metadata?.name ?? ''), namespace: String(q.metadata?.namespace ?? '') };
  // evaluation pods are never BestEffort (the LimitRange gives every container requests) and always
  // Terminating (activeDeadlineSeconds): a quota scoped to the other kind does not count them
  const scopes = [...(q.spec?.scopes ?? []), ...(q.spec?.scopeSelector?.matchExpressions ?? []).filter((e) => e.operator === 'Exists').map((e) => e.scopeName)];
  if (scopes.some((s) => s === 'BestEffort' || s === 'NotTerminating')) return { metadata, room: {} };
  // status.hard is what admission enforces; a quota the quota controller has not synced yet has only spec.hard
  const hard = q.status?.hard ?? q.spec?.hard ?? {};
  const used = q.status?.used ?? {};
  const room: QuotaLite['room'] = {};
  for (const { field, entries, amount } of QUOTA_ENTRIES) {
    for (const e of entries) {
      if (hard[e] === undefined) continue;
      const left = Math.max(0, amount(hard[e]) - amount(used[e]));
      room[field] = Math.min(room[field] ?? left, left);
    }
  }
  return { metadata, room };
}

/** The tightest of the quotas, each of which the API server enforces on its own; no room for a pod leaves room for nothing. */
export function quotaBound(quotas: Iterable<QuotaLite>): Bound {
  const bound: Bound & { pods?: number } = {};
  for (const { room } of quotas) {
    for (const [k, v] of Object.entries(room) as [keyof QuotaLite['room'], number][]) bound[k] = Math.min(bound[k] ?? v, v);
  }
  const { pods, ...rest } = bound;
  return pods === 0 ? { cpuMillis: 0, memoryBytes: 0, nvidia: 0, amd: 0 } : rest;
}

/** Allocatable and free, free being allocatable net of `used` and at most `bound` (the runs namespace's quotas). */
export function nodeCapacity(node: NodeLite, used: Usage, bound: Bound = {}): NodeCapacity {
  const a = node.status.allocatable;
  const cpu = cpuMillis(a.cpu);
  const mem = bytes(a.memory);
  const gpusOf = (v: Vendor) => Math.round(parseQuantity(a[GPU_RESOURCES[v]]));
  const gpus = VENDORS.reduce((s, v) => s + gpusOf(v), 0);
  const free = (have: number, most: number | undefined) => Math.max(0, Math.min(have, most ?? have));
  return create(NodeCapacitySchema, {
    name: node.metadata.name,
    architecture: node.status.architecture ?? '',
    schedulable: !node.spec.unschedulable,
    ready: node.status.ready,
    cpuMillisAllocatable: BigInt(cpu),
    memoryBytesAllocatable: BigInt(mem),
    gpusAllocatable: gpus,
    cpuMillisFree: BigInt(free(cpu - used.cpuMillis, bound.cpuMillis)),
    memoryBytesFree: BigInt(free(mem - used.memoryBytes, bound.memoryBytes)),
    gpusFree: VENDORS.reduce((s, v) => s + free(gpusOf(v) - used[v], bound[v]), 0),
    gpus: gpuModels(node),
  });
}

export type CapacityOptions = {
  informerMetrics?: InformerMetricsFor;
  kc: k8s.KubeConfig;
  log: Logger;
  nodeSelector: string;
  /** the operator's policy for evaluation pods: nodes it rules out are reported unschedulable with nothing free */
  placement?: ClusterPlacement;
  /** where evaluation pods run: its ResourceQuotas bound what every node offers */
  runsNamespace: string;
  reportDelayMs: number;
  watchSilenceMs: number;
  resyncMs?: number;
  /** called with each coalesced report and how long after the first change it left */
  send: (report: NodeReport, latencyMs: number) => void;
};

export class CapacityReporter {
  private readonly opts: CapacityOptions;
  private readonly nodes = new Map<string, NodeLite>();
  // namespace → name → pod, for the previous version of an updated or deleted pod
  private readonly pods = new Map<string, Map<string, PodLite>>();
  private podCount = 0;
  // what the pods on each node reserve, kept as a running sum
  private readonly usedByNode = new Map<string, Usage>();
  // what each node reported last: the message (reused by every full report) and its comparison key
  private readonly reported = new Map<string, { cap: NodeCapacity; key: string }>();
  private firstChangeAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private resync: NodeJS.Timeout | undefined;
  private readonly quotas = new Map<string, QuotaLite>();
  private bound: Bound = {};
  private nodeInformer!: Informer<NodeLite>;
  private podInformer!: Informer<PodLite>;
  private quotaInformer!: Informer<QuotaLite>;
  private ready = false;

  constructor(opts: CapacityOptions) {
    this.opts = opts;
  }

  async start(): Promise<void> {
    const { kc, log, watchSilenceMs } = this.opts;
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const labelSelector = this.opts.nodeSelector || undefined;
    const extraLabels = placementLabelKeys(this.opts.placement ?? NO_PLACEMENT);
    this.nodeInformer = startInformer<NodeLite>({
      name: 'nodes',
      kc,
      log,
      path: '/api/v1/nodes',
      labelSelector,
      list: (p) => core.listNode({ ...p, labelSelector }),
      trim: (o) => trimNode(o, extraLabels),
      watchSilenceMs,
      metrics: this.opts.informerMetrics,
    });
    // non-terminal, scheduled pods of every namespace: only they hold resources on a node
    const fieldSelector = 'spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed';
    this.podInformer = startInformer<PodLite>({
      name: 'pods',
      kc,
      log,
      path: '/api/v1/pods',
      fieldSelector,
      list: (p) => core.listPodForAllNamespaces({ ...p, fieldSelector }),
      trim: trimPod,
      watchSilenceMs,
      metrics: this.opts.informerMetrics,
    });
    const runs = this.opts.runsNamespace;
    this.quotaInformer = startInformer<QuotaLite>({
      name: 'resourcequotas',
      kc,
      log,
      path: `/api/v1/namespaces/${runs}/resourcequotas`,
      list: (p) => core.listNamespacedResourceQuota({ ...p, namespace: runs }),
      trim: trimQuota,
      watchSilenceMs,
      metrics: this.opts.informerMetrics,
    });
    const onNode = (n: NodeLite) => {
      this.nodes.set(n.metadata.name, n);
      this.touch(n.metadata.name);
    };
    this.nodeInformer.on('add', onNode);
    this.nodeInformer.on('update', onNode);
    this.nodeInformer.on('delete', (n) => {
      this.nodes.delete(n.metadata.name);
      this.touch(n.metadata.name);
    });
    const onPod = (p: PodLite) => this.setPod(p, p);
    this.podInformer.on('add', onPod);
    this.podInformer.on('update', onPod);
    this.podInformer.on('delete', (p) => this.setPod(p, undefined));
    const onQuota = (q: QuotaLite) => {
      this.quotas.set(q.metadata.name, q);
      this.setBound();
    };
    this.quotaInformer.on('add', onQuota);
    this.quotaInformer.on('update', onQuota);
    this.quotaInformer.on('delete', (q) => {
      this.quotas.delete(q.metadata.name);
      this.setBound();
    });
    await Promise.all([this.nodeInformer.synced, this.podInformer.synced, this.quotaInformer.synced]);
    for (const name of this.nodes.keys()) this.record(name);
    this.ready = true;
    this.resync = setInterval(() => this.flush(), this.opts.resyncMs ?? 60_000);
    this.resync.unref();
    log.info({ nodes: this.nodes.size, pods: this.podCount, quotas: this.quotas.size, bound: this.bound }, 'node and pod informers synced');
  }

  /** every reported node, as of now */
  fullReport(): NodeReport {
    const nodes = [...this.reported.keys()].sort().map((name) => this.reported.get(name)!.cap);
    return create(NodeReportSchema, { id: randomUUID(), observedAt: timestampFromDate(new Date()), nodes });
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    clearInterval(this.resync);
    await Promise.all([this.nodeInformer?.stop(), this.podInformer?.stop(), this.quotaInformer?.stop()]);
  }

  /** A quota changed: when what it leaves room for did, every node's offer may have */
  private setBound() {
    const next = quotaBound(this.quotas.values());
    if (JSON.stringify(next) === JSON.stringify(this.bound)) return;
    this.bound = next;
    this.opts.log.debug({ bound: next }, 'the ResourceQuotas of the runs namespace bound what nodes offer');
    for (const name of this.nodes.keys()) this.touch(name);
  }

  private setPod(key: PodLite, next: PodLite | undefined) {
    const { namespace, name } = key.metadata;
    let inNamespace = this.pods.get(namespace);
    const prev = inNamespace?.get(name);
    if (prev) this.reserve(prev.nodeName, prev.usage, -1);
    if (next?.nodeName) {
      if (!inNamespace) this.pods.set(namespace, (inNamespace = new Map()));
      inNamespace.set(name, next);
      this.reserve(next.nodeName, next.usage, 1);
    } else if (prev) {
      inNamespace!.delete(name);
      if (inNamespace!.size === 0) this.pods.delete(namespace);
    }
    this.podCount += (next?.nodeName ? 1 : 0) - (prev ? 1 : 0);
    if (prev && prev.nodeName !== next?.nodeName) this.touch(prev.nodeName);
    if (next?.nodeName) this.touch(next.nodeName);
  }

  /** adds (sign 1) or removes (sign -1) a pod's reservation from its node's running total, in place */
  private reserve(node: string, usage: Usage, sign: 1 | -1) {
    let total = this.usedByNode.get(node);
    if (!total) this.usedByNode.set(node, (total = zero()));
    total.cpuMillis += sign * usage.cpuMillis;
    total.memoryBytes += sign * usage.memoryBytes;
    for (const v of VENDORS) total[v] += sign * usage[v];
    if (total.cpuMillis === 0 && total.memoryBytes === 0 && VENDORS.every((v) => total[v] === 0)) this.usedByNode.delete(node);
  }

  private capacityOf(name: string): NodeCapacity | undefined {
    const node = this.nodes.get(name);
    if (!node) return undefined;
    const facts = { name, labels: node.metadata.labels, taints: node.spec.taints ?? [] };
    return offered(facts, nodeCapacity(node, this.usedByNode.get(name) ?? zero(), this.bound), this.opts.placement ?? NO_PLACEMENT);
  }

  // Only a change in what a node reports schedules a report: kubelet heartbeats
  // rewrite node status every few seconds without changing any of it.
  private touch(name: string) {
    // during the first sync nothing is reported yet: start() records every node once at the end
    if (!this.ready || !this.record(name)) return;
    this.firstChangeAt ??= performance.now();
    this.timer ??= setTimeout(() => this.flush(), this.opts.reportDelayMs);
  }

  /** remembers what the node reports now; false when that is what it reported before */
  private record(name: string): boolean {
    const cap = this.capacityOf(name);
    if (!cap) return this.reported.delete(name);
    const key = JSON.stringify([cap.ready, cap.schedulable, cap.cpuMillisFree, cap.memoryBytesFree, cap.gpusFree, cap.cpuMillisAllocatable, cap.memoryBytesAllocatable, cap.gpusAllocatable, cap.architecture, cap.gpus.map((g) => [g.model, g.memoryMib, g.count])], (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    if (this.reported.get(name)?.key === key) return false;
    this.reported.set(name, { cap, key });
    return true;
  }

  private flush() {
    clearTimeout(this.timer);
    this.timer = undefined;
    const latency = this.firstChangeAt === undefined ? 0 : performance.now() - this.firstChangeAt;
    this.firstChangeAt = undefined;
    this.opts.send(this.fullReport(), latency);
  }
}
