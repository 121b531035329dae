import { describe, expect, it } from 'vitest';
import { planEviction } from './evict.ts';

const e = (digest: string, size: number, lastUsedMs: number) => ({ digest, size, lastUsedMs });

describe('planEviction', () => {
  const policy = { capacityBytes: 1000, highWaterMarkPercent: 90, lowWaterMarkPercent: 50, inUse: new Set<string>() };

  it('does nothing at or below the high-water mark', () => {
    expect(planEviction([e('a', 500, 1), e('b', 400, 2)], policy).victims).toEqual([]);
  });

  it('evicts least recently used first, down to the low-water mark', () => {
    const plan = planEviction([e('new', 300, 30), e('old', 300, 10), e('mid', 300, 20), e('x', 50, 40)], policy);
    expect(plan.victims.map((v) => v.digest)).toEqual(['old', 'mid']);
    expect(plan.usedAfter).toBe(350);
    expect(plan.full).toBe(false);
  });

  it('never evicts an artifact in use, and reports full when nothing else can go', () => {
    const plan = planEviction([e('old', 600, 1), e('b', 350, 2)], { ...policy, inUse: new Set(['old', 'b']) });
    expect(plan.victims).toEqual([]);
    expect(plan.full).toBe(true);
    const partial = planEviction([e('old', 600, 1), e('b', 350, 2)], { ...policy, inUse: new Set(['old']) });
    expect(partial.victims.map((v) => v.digest)).toEqual(['b']);
  });

  it('makes room for an incoming download', () => {
    // 700 cached + 300 incoming is above 90%: evict down to 50% counting the incoming bytes
    const plan = planEviction([e('a', 400, 1), e('b', 300, 2), e('c', 100, 3)], { ...policy, incomingBytes: 200 });
    expect(plan.victims.map((v) => v.digest)).toEqual(['a', 'b']);
    expect(plan.usedAfter).toBe(300);
  });
});
