// The controller's Prometheus metrics (prefix rlmesh_controller_), one registry per process.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { createInformerMetrics } from '../lib/informer-metrics.ts';
import { createWorkQueueMetrics } from './work-queue-metrics.ts';

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'rlmesh_controller_' });
  const m = {
    registry,
    leader: new Gauge({ name: 'rlmesh_controller_leader', help: '1 while this replica holds the leader Lease of its role', labelNames: ['role'], registers: [registry] }),
    reconciles: new Counter({ name: 'rlmesh_controller_reconciles_total', help: 'Reconciles by queue and outcome (ok, error)', labelNames: ['queue', 'outcome'], registers: [registry] }),
    reconcileSeconds: new Histogram({ name: 'rlmesh_controller_reconcile_seconds', help: 'Time per reconcile', labelNames: ['queue'], buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30], registers: [registry] }),
    podsCreated: new Counter({ name: 'rlmesh_controller_pods_created_total', help: 'Evaluation pods created', registers: [registry] }),
    phaseTransitions: new Counter({ name: 'rlmesh_controller_phase_transitions_total', help: 'Evaluation phase changes written', labelNames: ['phase', 'reason'], registers: [registry] }),
    evaluationsCollected: new Counter({ name: 'rlmesh_controller_evaluations_collected_total', help: 'Finished, reported evaluations garbage-collected', registers: [registry] }),
    cacheBytes: new Gauge({ name: 'rlmesh_controller_cache_bytes', help: 'Bytes used by cached artifacts', registers: [registry] }),
    cacheCapacityBytes: new Gauge({ name: 'rlmesh_controller_cache_capacity_bytes', help: 'Capacity of the artifact cache', registers: [registry] }),
    cacheEntries: new Gauge({ name: 'rlmesh_controller_cache_entries', help: 'Artifacts in the cache', registers: [registry] }),
    cacheHits: new Counter({ name: 'rlmesh_controller_cache_hits_total', help: 'Artifact requests served from the cache', registers: [registry] }),
    cacheMisses: new Counter({ name: 'rlmesh_controller_cache_misses_total', help: 'Artifact requests that needed a download', registers: [registry] }),
    cacheFetches: new Counter({ name: 'rlmesh_controller_cache_fetches_total', help: 'Artifact downloads by source kind and outcome (ok, or why it failed)', labelNames: ['source', 'outcome'], registers: [registry] }),
    cacheFetchBytes: new Counter({ name: 'rlmesh_controller_cache_fetch_bytes_total', help: 'Bytes downloaded into the cache', registers: [registry] }),
    cacheFetchSeconds: new Histogram({ name: 'rlmesh_controller_cache_fetch_seconds', help: 'Time to download and verify one artifact', labelNames: ['source'], buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 1800], registers: [registry] }),
    cacheEvictions: new Counter({ name: 'rlmesh_controller_cache_evictions_total', help: 'Artifacts evicted from the cache', registers: [registry] }),
    workQueue: createWorkQueueMetrics(registry, 'controller'),
    informer: createInformerMetrics(registry, 'controller'),
    cacheEvictedBytes: new Counter({ name: 'rlmesh_controller_cache_evicted_bytes_total', help: 'Bytes freed by eviction', registers: [registry] }),
  };
  return m;
}

export type Metrics = ReturnType<typeof createMetrics>;
