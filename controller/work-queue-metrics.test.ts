import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { createWorkQueueMetrics } from './work-queue-metrics.ts';
import { WorkQueue } from './work-queue.ts';

type Sample = { value: number; labels: Record<string, string | number>; metricName?: string };
const sample = async (r: Registry, name: string, series: string): Promise<number> =>
  ((await r.getMetricsAsJSON()).find((m) => m.name === name)?.values as Sample[] | undefined)?.find((v) => v.labels.queue === 'q' && (v.metricName ?? name) === series)?.value ?? 0;
const value = (r: Registry, name: string) => sample(r, name, name);
const count = (r: Registry, name: string) => sample(r, name, `${name}_count`);

describe('work queue metrics', () => {
  it("exports client-go's workqueue set: depth, adds, queue and work duration, retries", async () => {
    const registry = new Registry();
    const metrics = createWorkQueueMetrics(registry, 'controller')('q');
    let fail = true;
    const q = new WorkQueue({
      baseDelayMs: 1,
      maxDelayMs: 1,
      metrics,
      worker: async (key) => {
        if (key === 'b' && fail) {
          fail = false;
          throw new Error('first try fails');
        }
      },
    });
    q.add('a');
    q.add('a'); // deduplicated: one add
    q.add('b');
    expect(await value(registry, 'rlmesh_controller_workqueue_depth')).toBe(2);
    q.start();
    // b's retry runs after its backoff
    await vi.waitFor(async () => expect(await count(registry, 'rlmesh_controller_workqueue_work_duration_seconds')).toBe(3));
    expect(await value(registry, 'rlmesh_controller_workqueue_depth')).toBe(0);
    expect(await value(registry, 'rlmesh_controller_workqueue_adds_total')).toBe(3); // a, b, and b again after its retry
    expect(await value(registry, 'rlmesh_controller_workqueue_retries_total')).toBe(1);
    expect(await count(registry, 'rlmesh_controller_workqueue_queue_duration_seconds')).toBe(3);
    q.stop();
  });
});
