import { describe, expect, it } from 'vitest';
import { until } from './until.ts';

describe('until', () => {
  it('returns the first value that is not undefined, null or false', async () => {
    let n = 0;
    expect(await until('the third try', () => (++n < 3 ? (n === 1 ? null : false) : 0), { intervalMs: 1 })).toBe(0);
    expect(n).toBe(3);
  });

  it('retries a probe that throws and reports its last error on timeout', async () => {
    let n = 0;
    const waited = until(
      'a probe that always fails',
      () => {
        throw new Error(`failure ${++n}`);
      },
      { timeoutMs: 50, intervalMs: 5, context: () => 'log tail: x' },
    );
    const err = await waited.catch((e: unknown) => e as Error);
    expect(n).toBeGreaterThan(1);
    expect(err.message).toBe(`timed out after 50 ms waiting for a probe that always fails (last error: failure ${n})\nlog tail: x`);
  });

  it('reports the last value when the probe never threw', async () => {
    await expect(until('never', () => false, { timeoutMs: 10, intervalMs: 2 })).rejects.toThrow('timed out after 10 ms waiting for never (last value: false)');
  });
});
