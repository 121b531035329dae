import { describe, expect, it } from 'vitest';
import { BufferBudget, bufferLimits, MiB } from './buffer-budget.ts';

describe('relay buffer budget', () => {
  it('derives the budget, the shares and the default tunnel limits from the memory limit', () => {
    expect(bufferLimits(256 * MiB)).toEqual({
      memoryLimitBytes: 256 * MiB, totalBytes: 64 * MiB, perClientBytes: 8 * MiB, poolBytesPerSize: 4 * MiB,
      maxTunnels: 2048, maxTunnelsPerClient: 256,
    });
    expect(bufferLimits(1024 * MiB)).toMatchObject({ totalBytes: 256 * MiB, perClientBytes: 32 * MiB, maxTunnels: 8192, maxTunnelsPerClient: 1024 });
  });

  it('counts each client apart and all together, and gives back what a closed holding still held', () => {
    const budget = new BufferBudget(bufferLimits(64 * MiB)); // 16 MiB budget, 2 MiB shares
    const a = budget.holding('10.0.0.1');
    const b = budget.holding('10.0.0.2');
    a.hold(2 * MiB);
    expect(a.full()).toBe(true);
    expect(b.full()).toBe(false);
    expect(b.room()).toBe(2 * MiB);
    a.free(MiB);
    expect(a.full()).toBe(false);
    a.end();
    a.free(MiB); // a write callback after the close
    a.hold(MiB);
    expect(budget.held()).toBe(0);
    expect(budget.heldBy('10.0.0.1')).toBe(0);
    const many = Array.from({ length: 8 }, (_, i) => budget.holding(`10.0.1.${i}`));
    for (const h of many) h.hold(2 * MiB);
    expect(b.full()).toBe(true); // every client together is at the budget, b with nothing
    expect(b.room()).toBe(0);
  });
});
