import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { WorkQueue } from './work-queue.ts';

describe('WorkQueue', () => {
  it('never runs one key twice at once and re-runs it when it changed meanwhile', async () => {
    let running = 0;
    let maxRunning = 0;
    let runs = 0;
    const q = new WorkQueue({
      concurrency: 4,
      worker: async () => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        runs++;
        await sleep(20);
        running--;
      },
    });
    q.start();
    q.add('a');
    await sleep(5);
    q.add('a'); // while running: marks dirty
    q.add('a'); // still one re-run
    await sleep(100);
    await q.idle();
    expect(maxRunning).toBe(1);
    expect(runs).toBe(2);
  });

  it('deduplicates queued keys and runs different keys in parallel', async () => {
    const seen: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const q = new WorkQueue({
      concurrency: 3,
      worker: async (k) => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        seen.push(k);
        await sleep(20);
        running--;
      },
    });
    for (const k of ['a', 'b', 'c', 'a', 'b']) q.add(k);
    q.start();
    await q.idle();
    expect(seen.sort()).toEqual(['a', 'b', 'c']);
    expect(maxRunning).toBe(3);
  });

  it('retries a failing key with exponential backoff, then forgets the failures on success', async () => {
    const times: number[] = [];
    const q = new WorkQueue({
      baseDelayMs: 20,
      maxDelayMs: 1000,
      worker: async () => {
        times.push(Date.now());
        if (times.length < 4) throw new Error('boom');
      },
    });
    q.start();
    q.add('k');
    await sleep(400);
    expect(times).toHaveLength(4);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(gaps[0]).toBeGreaterThanOrEqual(18);
    expect(gaps[1]).toBeGreaterThanOrEqual(38);
    expect(gaps[2]).toBeGreaterThanOrEqual(78);
    expect(q.failures('k')).toBe(0);
  });

  it('caps the backoff', () => {
    const q = new WorkQueue({ baseDelayMs: 100, maxDelayMs: 1000, worker: async () => {} });
    expect(q.backoffMs(1)).toBeGreaterThanOrEqual(100);
    expect(q.backoffMs(1)).toBeLessThanOrEqual(110);
    expect(q.backoffMs(20)).toBeLessThanOrEqual(1100);
  });

  it('requeues after the delay a worker asks for', async () => {
    let runs = 0;
    const q = new WorkQueue({ worker: async () => (++runs < 3 ? { requeueAfterMs: 15 } : undefined) });
    q.start();
    q.add('x');
    await sleep(150);
    expect(runs).toBe(3);
  });
});
