// The cluster's own address ranges, which the egress proxy refuses even where
// they are public (IPv6 global unicast, a public IPv4 pod range): the Service
// ranges (ServiceCIDR objects, Kubernetes 1.33+), every node's pod ranges
// (spec.podCIDRs) and every node address. Read at start and every few minutes,
// and written to ConfigMap rlmesh-cluster-ranges, which the proxy mounts and
// re-reads. What the API does not expose (a VPC range the CNI hands pods from)
// comes from the chart's egress.clusterRanges.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { MOUNTS, NAMES } from '../lib/fixed-names.ts';
import { isNotFound } from '../lib/kube-errors.ts';
import { errorFields } from '../lib/error-fields.ts';

export const CLUSTER_RANGES_CONFIGMAP = NAMES.clusterRangesConfigMap;
/** the key of the ConfigMap holding one CIDR per line */
export const CLUSTER_RANGES_KEY = MOUNTS.clusterRangesKey;
const PAGE = 500;

type NodeLike = Pick<k8s.V1Node, 'spec' | 'status'>;

/** A node's pod ranges and its addresses (each as a one-address range). */
export function nodeRanges(n: NodeLike): string[] {
  const pod = n.spec?.podCIDRs?.length ? n.spec.podCIDRs : n.spec?.podCIDR ? [n.spec.podCIDR] : [];
  const addresses = (n.status?.addresses ?? []).filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP').map((a) => `${a.address}/${a.address.includes(':') ? 128 : 32}`);
  return [...pod, ...addresses];
}

/** Everything the API says is the cluster's own, sorted and without repeats. */
export async function readClusterRanges(kc: k8s.KubeConfig): Promise<string[]> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const networking = kc.makeApiClient(k8s.NetworkingV1Api);
  const ranges = new Set<string>();
  let _continue: string | undefined;
  do {
    // paged, and nothing kept but the ranges: a 5,000-node list never sits in memory at once
    const page = await core.listNode({ limit: PAGE, ...(_continue ? { _continue } : {}) });
    for (const n of page.items) for (const r of nodeRanges(n)) ranges.add(r);
    _continue = page.metadata?._continue || undefined;
  } while (_continue);
  try {
    for (const s of (await networking.listServiceCIDR()).items) for (const c of s.spec?.cidrs ?? []) ranges.add(c);
  } catch (err) {
    // before Kubernetes 1.33 the API has no ServiceCIDRs: egress.clusterRanges names the Service range
    if (!isNotFound(err)) throw err;
  }
  return [...ranges].sort();
}

export type ClusterRangesOptions = { kc: k8s.KubeConfig; namespace: string; log: Logger; intervalMs?: number };

/** Keeps ConfigMap rlmesh-cluster-ranges current; returns stop(). */
export function startClusterRanges(o: ClusterRangesOptions): () => void {
  const core = o.kc.makeApiClient(k8s.CoreV1Api);
  let running = false;
  const tick = async (): Promise<void> => {
    if (running) return;
    running = true;
    try {
      const ranges = (await readClusterRanges(o.kc)).join('\n');
      const cm = await core.readNamespacedConfigMap({ name: CLUSTER_RANGES_CONFIGMAP, namespace: o.namespace });
      if (cm.data?.[CLUSTER_RANGES_KEY] === ranges) return;
      // a replace carries the resourceVersion just read: a concurrent change makes it fail, and the next run retries
      await core.replaceNamespacedConfigMap({ name: CLUSTER_RANGES_CONFIGMAP, namespace: o.namespace, body: { ...cm, data: { ...cm.data, [CLUSTER_RANGES_KEY]: ranges } } });
      o.log.info({ ranges: ranges.split('\n').filter(Boolean).length }, `wrote the cluster's own address ranges to ConfigMap ${CLUSTER_RANGES_CONFIGMAP} for the egress proxy`);
    } catch (err) {
      o.log.warn(
        errorFields(err),
        `cannot update ConfigMap ${o.namespace}/${CLUSTER_RANGES_CONFIGMAP} with the cluster's own address ranges; the egress proxy keeps refusing the ranges it has, and the next try is in ${Math.round((o.intervalMs ?? 300_000) / 1000)} s (the chart creates that ConfigMap; check the agent may list nodes and servicecidrs)`,
      );
    } finally {
      running = false;
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), o.intervalMs ?? 300_000);
  timer.unref();
  return () => clearInterval(timer);
}
