import { describe, expect, it } from 'vitest';
import { backoffDelayMs, createBackoff, sleep } from './backoff.ts';

describe('backoff', () => {
  it('grows exponentially from the base and never exceeds the cap', () => {
    const hi = createBackoff(500, 30_000, () => 1);
    expect([hi.next(), hi.next(), hi.next(), hi.next()]).toEqual([500, 1000, 2000, 4000]);
    for (let i = 0; i < 50; i++) expect(hi.next()).toBeLessThanOrEqual(30_000);
    expect(hi.next()).toBe(30_000);
  });

  it('jitters between half the ceiling and the ceiling', () => {
    const lo = createBackoff(1000, 30_000, () => 0);
    expect([lo.next(), lo.next(), lo.next()]).toEqual([500, 1000, 2000]);
    const b = createBackoff(1000, 30_000);
    const seen = new Set(Array.from({ length: 20 }, () => (b.reset(), b.next())));
    expect(seen.size).toBeGreaterThan(1);
    for (const v of seen) expect(v).toBeGreaterThanOrEqual(500);
  });

  it('grows by the given factor', () => {
    const b = createBackoff(250, 30_000, () => 1, 1.5);
    expect([b.next(), b.next(), b.next()]).toEqual([250, 375, 563]);
  });

  it('reset starts again from the base', () => {
    const b = createBackoff(100, 1000, () => 1);
    b.next();
    b.next();
    expect(b.attempts).toBe(2);
    b.reset();
    expect(b.next()).toBe(100);
  });

  it('sleep ends early when aborted', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 20);
    // an abort that did nothing would leave it asleep for ten minutes, far past the test's timeout
    await sleep(600_000, ac.signal);
    expect(ac.signal.aborted).toBe(true);
  });
});

describe('backoffDelayMs', () => {
  it('is exactly the capped ceiling without jitter', () => {
    const p = { baseMs: 500, maxMs: 10_000, jitter: 0 };
    expect([1, 2, 3, 4, 5, 6, 100].map((n) => backoffDelayMs(n, p))).toEqual([500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
  });

  it('keeps a jittered delay within the top share of the ceiling', () => {
    const p = { baseMs: 100, maxMs: 1000, jitter: 0.1 };
    expect(backoffDelayMs(1, p, () => 0)).toBe(90);
    expect(backoffDelayMs(1, p, () => 1)).toBe(100);
    expect(backoffDelayMs(20, p, () => 1)).toBe(1000);
  });
});
