import { describe, expect, it } from 'vitest';
import { createBackoff, sleep } from './backoff.ts';

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
    const t0 = Date.now();
    setTimeout(() => ac.abort(), 20);
    await sleep(10_000, ac.signal);
    expect(Date.now() - t0).toBeLessThan(2000);
  });
});
