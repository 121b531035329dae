import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WorkQueue } from './work-queue.ts';

// fake timers: the global setTimeout and Date, which both the queue and these workers use
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('WorkQueue', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

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
    await vi.advanceTimersByTimeAsync(5);
    q.add('a'); // while running: marks dirty
    q.add('a'); // still one re-run
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(15); // the first run ends, the re-run starts
    expect(runs).toBe(2);
    await vi.advanceTimersByTimeAsync(100);
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
    const idle = q.idle();
    await vi.advanceTimersByTimeAsync(20);
    await idle;
    expect(seen.sort()).toEqual(['a', 'b', 'c']);
    expect(maxRunning).toBe(3);
  });

  it('retries a failing key with exponential backoff, then forgets the failures on success', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(1); // no jitter: the delays are exactly the ceilings
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
    await vi.advanceTimersByTimeAsync(0);
    expect(q.failures('k')).toBe(1);
    await vi.advanceTimersByTimeAsync(400);
    expect(times).toHaveLength(4);
    expect(times.slice(1).map((t, i) => t - times[i]!)).toEqual([20, 40, 80]);
    expect(q.failures('k')).toBe(0);
  });

  it('caps the backoff and jitters it by at most 10% below the ceiling', () => {
    const q = new WorkQueue({ baseDelayMs: 100, maxDelayMs: 1000, worker: async () => {} });
    const random = vi.spyOn(Math, 'random');
    random.mockReturnValue(0);
    expect(q.backoffMs(1)).toBe(90);
    expect(q.backoffMs(3)).toBe(360);
    random.mockReturnValue(1);
    expect(q.backoffMs(1)).toBe(100);
    expect(q.backoffMs(3)).toBe(400);
    expect(q.backoffMs(20)).toBe(1000);
  });

  it('requeues after the delay a worker asks for', async () => {
    let runs = 0;
    const q = new WorkQueue({ worker: async () => (++runs < 3 ? { requeueAfterMs: 15 } : undefined) });
    q.start();
    q.add('x');
    await vi.advanceTimersByTimeAsync(14);
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toBe(2);
    await vi.advanceTimersByTimeAsync(150);
    expect(runs).toBe(3);
  });
});
