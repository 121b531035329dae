// What client-go's workqueue exports, for our work queue, so dashboards and
// alerts written for controllers read ours too: depth, adds, time waiting,
// time working, retries. Names carry the component (rlmesh_controller_workqueue_depth).
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

// client-go's workqueue buckets: 1 µs to 10 s in decades
const DURATION_BUCKETS = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10];

export type WorkQueueMetrics = {
  depth: { inc(): void; dec(): void };
  added(): void;
  /** seconds a key waited in the queue before a worker took it */
  waited(seconds: number): void;
  /** seconds a worker spent on a key */
  worked(seconds: number): void;
  retried(): void;
};

export function createWorkQueueMetrics(registry: Registry, component: string) {
  const p = `rlmesh_${component}_workqueue`;
  const depth = new Gauge({ name: `${p}_depth`, help: 'Keys waiting in the work queue', labelNames: ['queue'], registers: [registry] });
  const adds = new Counter({ name: `${p}_adds_total`, help: 'Keys added to the work queue', labelNames: ['queue'], registers: [registry] });
  const queueSeconds = new Histogram({ name: `${p}_queue_duration_seconds`, help: 'Time a key waits in the work queue before a worker takes it', labelNames: ['queue'], buckets: DURATION_BUCKETS, registers: [registry] });
  const workSeconds = new Histogram({ name: `${p}_work_duration_seconds`, help: 'Time a worker spends on one key', labelNames: ['queue'], buckets: DURATION_BUCKETS, registers: [registry] });
  const retries = new Counter({ name: `${p}_retries_total`, help: 'Keys re-queued with backoff after a failure', labelNames: ['queue'], registers: [registry] });
  return (queue: string): WorkQueueMetrics => {
    const l = { queue };
    return {
      depth: { inc: () => depth.inc(l), dec: () => depth.dec(l) },
      added: () => adds.inc(l),
      waited: (s) => queueSeconds.observe(l, s),
      worked: (s) => workSeconds.observe(l, s),
      retried: () => retries.inc(l),
    };
  };
}
