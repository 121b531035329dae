// The cluster's own address ranges, which the egress proxy refuses even where
// they are public (IPv6 global unicast, a public IPv4 pod range, a cloud load
// balancer's address): the Service ranges (ServiceCIDR objects, Kubernetes
// 1.33+), every node's pod ranges (spec.podCIDRs) and every node address, the
// API server's endpoints (EndpointSlice default/kubernetes), and every
// Service's external addresses (spec.externalIPs, spec.loadBalancerIP,
// status.loadBalancer.ingress[].ip). Services are watched, so a new load
// balancer address is refused within seconds; the rest is read at start and
// every few minutes. All of it goes to ConfigMap rlmesh-cluster-ranges, which
// the proxy mounts and re-reads. What the API does not expose (a VPC range the
// CNI hands pods from, a load balancer known by host name only) comes from
// the chart's egress.clusterRanges.
//
// Fail closed: when the agent may not read one of these sources (a 403), or
// has not listed the Services within a minute of starting, it writes the
// ranges as unknown with the reason, and the proxy refuses every destination
// until they are known again. Other errors (the API server away) leave the
// ranges last written in place, and the next try comes sooner.
import { isIP } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { unknownRangesText, unknownReason } from '../lib/cluster-ranges-text.ts';
import { MOUNTS, NAMES } from '../lib/fixed-names.ts';
import { startInformer, type Informer } from '../lib/informer.ts';
import type { InformerMetricsFor } from '../lib/informer-metrics.ts';
import { isForbidden, isNotFound } from '../lib/kube-errors.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';

export const CLUSTER_RANGES_CONFIGMAP = NAMES.clusterRangesConfigMap;
/** the key of the ConfigMap holding one CIDR per line */
export const CLUSTER_RANGES_KEY = MOUNTS.clusterRangesKey;
/** the EndpointSlice the API server keeps of its own addresses */
export const API_SERVER_ENDPOINTS = { namespace: 'default', name: 'kubernetes' } as const;
const PAGE = 500;

type NodeLike = Pick<k8s.V1Node, 'spec' | 'status'>;
type ServiceLike = { metadata?: { name?: string; namespace?: string }; spec?: Pick<k8s.V1ServiceSpec, 'externalIPs' | 'loadBalancerIP'>; status?: { loadBalancer?: { ingress?: { ip?: string }[] } } };

const asRange = (address: string): string => `${address}/${address.includes(':') ? 128 : 32}`;

/** A node's pod ranges and its addresses (each as a one-address range). */
export function nodeRanges(n: NodeLike): string[] {
  const pod = n.spec?.podCIDRs?.length ? n.spec.podCIDRs : n.spec?.podCIDR ? [n.spec.podCIDR] : [];
  const addresses = (n.status?.addresses ?? []).filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP').map((a) => asRange(a.address));
  return [...pod, ...addresses];
}

/** A Service's addresses outside the cluster's Service range: its external IPs and load balancer addresses. */
export function serviceRanges(s: ServiceLike): string[] {
  const addresses = [...(s.spec?.externalIPs ?? []), s.spec?.loadBalancerIP ?? '', ...(s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? '')];
  return addresses.filter((a) => isIP(a) !== 0).map(asRange);
}

/** The addresses of an EndpointSlice's endpoints. */
export function endpointSliceRanges(slice: Partial<Pick<k8s.V1EndpointSlice, 'endpoints'>>): string[] {
  return (slice.endpoints ?? []).flatMap((e) => e.addresses).filter((a) => isIP(a) !== 0).map(asRange);
}

/** What the Service informer keeps of a Service: its name and the addresses serviceRanges reads. */
function trimService(o: unknown): ServiceLike {
  const s = o as k8s.V1Service;
  return {
    metadata: { name: s.metadata?.name, namespace: s.metadata?.namespace },
    spec: { externalIPs: s.spec?.externalIPs, loadBalancerIP: s.spec?.loadBalancerIP },
    status: { loadBalancer: { ingress: (s.status?.loadBalancer?.ingress ?? []).map((i) => ({ ip: i.ip })) } },
  };
}

/** Nodes, ServiceCIDRs and the API server's endpoints: the ranges read on every full run. */
export async function readPolledRanges(kc: k8s.KubeConfig, log: Logger): Promise<string[]> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const networking = kc.makeApiClient(k8s.NetworkingV1Api);
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
  const ranges: string[] = [];
  let _continue: string | undefined;
  do {
    // paged, and nothing kept but the ranges: a 5,000-node list never sits in memory at once
    const page = await core.listNode({ limit: PAGE, ...(_continue ? { _continue } : {}) });
    for (const n of page.items) ranges.push(...nodeRanges(n));
    _continue = page.metadata?._continue || undefined;
  } while (_continue);
  try {
    for (const s of (await networking.listServiceCIDR()).items) ranges.push(...(s.spec?.cidrs ?? []));
  } catch (err) {
    // before Kubernetes 1.33 the API has no ServiceCIDRs: egress.clusterRanges names the Service range
    if (!isNotFound(err)) throw err;
  }
  try {
    ranges.push(...endpointSliceRanges(await discovery.readNamespacedEndpointSlice(API_SERVER_ENDPOINTS)));
  } catch (err) {
    // an API server run with --endpoint-reconciler-type=none publishes none: egress.clusterRanges lists its addresses
    if (!isNotFound(err)) throw err;
    log.warn(`EndpointSlice ${API_SERVER_ENDPOINTS.namespace}/${API_SERVER_ENDPOINTS.name} does not exist, so the egress proxy does not know the API server's addresses from it; list them in egress.clusterRanges if they are public`);
  }
  return ranges;
}

/** The ConfigMap's text: every range once, sorted. */
export function clusterRangesText(polled: readonly string[], services: readonly ServiceLike[]): string {
  const all = new Set(polled);
  for (const s of services) for (const r of serviceRanges(s)) all.add(r);
  return [...all].sort().join('\n');
}

export type ClusterRangesOptions = {
  kc: k8s.KubeConfig;
  namespace: string;
  log: Logger;
  watchSilenceMs: number;
  informerMetrics?: InformerMetricsFor;
  /** a full run (nodes, ServiceCIDRs, the API server's endpoints); 5 minutes */
  intervalMs?: number;
  /** how long the Service list may take at start before the ranges are written as unknown; 1 minute */
  servicesSyncMs?: number;
};

/** Keeps ConfigMap rlmesh-cluster-ranges current; returns stop(). */
export function startClusterRanges(o: ClusterRangesOptions): () => Promise<void> {
  const core = o.kc.makeApiClient(k8s.CoreV1Api);
  const intervalMs = o.intervalMs ?? 300_000;
  const retryMs = Math.min(intervalMs, 30_000);
  const services: Informer<ServiceLike> = startInformer<ServiceLike>({
    name: 'services',
    kc: o.kc,
    log: o.log,
    path: '/api/v1/services',
    list: (p) => core.listServiceForAllNamespaces(p),
    trim: trimService,
    watchSilenceMs: o.watchSilenceMs,
    ...(o.informerMetrics ? { metrics: o.informerMetrics } : {}),
  });
  let servicesSynced = false;
  const started = Date.now();
  let polled: string[] | undefined;
  let polledAt = 0;
  let running = false;
  let again = false;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const write = async (text: string): Promise<boolean> => {
    const cm = await core.readNamespacedConfigMap({ name: CLUSTER_RANGES_CONFIGMAP, namespace: o.namespace });
    if (cm.data?.[CLUSTER_RANGES_KEY] === text) return false;
    // a replace carries the resourceVersion just read: a concurrent change makes it fail, and the next run retries
    await core.replaceNamespacedConfigMap({ name: CLUSTER_RANGES_CONFIGMAP, namespace: o.namespace, body: { ...cm, data: { ...cm.data, [CLUSTER_RANGES_KEY]: text } } });
    return true;
  };
  // one timer for the next run, only ever brought forward: a stream of Service changes cannot postpone it
  let dueAt = Infinity;
  const schedule = (ms: number) => {
    if (stopped || Date.now() + ms >= dueAt) return;
    clearTimeout(timer);
    dueAt = Date.now() + ms;
    timer = setTimeout(() => {
      dueAt = Infinity;
      void tick();
    }, ms);
    timer.unref();
  };
  const syncMs = o.servicesSyncMs ?? 60_000;

  /** The ConfigMap's text, or undefined when a source could not be read for a reason that passes (logged). */
  const read = async (): Promise<string | undefined> => {
    if (!servicesSynced) {
      if (Date.now() - started < syncMs) return undefined;
      const why = `the agent has not listed the cluster's Services within ${Math.round(syncMs / 1000)} s of starting (its log says why), so their load balancer and external addresses are unknown; check that ClusterRole ${NAMES.agentClusterRole} lets it list and watch services`;
      o.log.error(`the cluster's own address ranges are unknown: ${why}; the egress proxy refuses every destination until they are known`);
      return unknownRangesText(why);
    }
    try {
      if (polled === undefined || Date.now() - polledAt >= intervalMs) {
        polled = await readPolledRanges(o.kc, o.log);
        polledAt = Date.now();
      }
    } catch (err) {
      polled = undefined;
      if (!isForbidden(err)) {
        o.log.warn(errorFields(err), `cannot read the cluster's own address ranges; the egress proxy keeps refusing the ranges it has, and the next try is in ${Math.round(retryMs / 1000)} s`);
        return undefined;
      }
      const why = `the agent may not read them (${errorMessage(err)}); the chart's ClusterRole ${NAMES.agentClusterRole} and its Role in namespace ${API_SERVER_ENDPOINTS.namespace} grant that`;
      o.log.error(errorFields(err), `the cluster's own address ranges are unknown: ${why}; the egress proxy refuses every destination until they are known`);
      return unknownRangesText(why);
    }
    return clusterRangesText(polled, services.cache.list());
  };

  const tick = async (): Promise<void> => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      const text = await read();
      if (text !== undefined && (await write(text)) && unknownReason(text) === undefined) {
        o.log.info({ ranges: text.split('\n').filter(Boolean).length }, `wrote the cluster's own address ranges to ConfigMap ${CLUSTER_RANGES_CONFIGMAP} for the egress proxy`);
      }
    } catch (err) {
      polled = undefined;
      o.log.warn(
        errorFields(err),
        `cannot update ConfigMap ${o.namespace}/${CLUSTER_RANGES_CONFIGMAP} with the cluster's own address ranges; the egress proxy keeps refusing the ranges it has, and the next try is in ${Math.round(retryMs / 1000)} s (the chart creates that ConfigMap and lets the agent update it)`,
      );
    } finally {
      running = false;
      const known = polled !== undefined && servicesSynced;
      schedule(again ? 0 : !servicesSynced && Date.now() - started < syncMs ? 1_000 : known ? intervalMs - (Date.now() - polledAt) : retryMs);
      again = false;
    }
  };

  void services.synced.then(() => {
    servicesSynced = true;
    schedule(0);
  });
  // a Service that gains or loses an address: written within seconds, a burst of changes once
  const changed = () => {
    if (running) again = true;
    else if (servicesSynced) schedule(1_000);
  };
  services.on('add', changed);
  services.on('update', changed);
  services.on('delete', changed);
  schedule(0);
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await services.stop();
  };
}
