import { describe, expect, it } from 'vitest';
import { minuteWindow } from './egress-recent-refusals.ts';

describe('minuteWindow', () => {
  it('counts what fell in the last minutes, by the minute, and forgets the older', () => {
    const w = minuteWindow(10);
    const t0 = Date.UTC(2026, 11, 6, 12, 0, 30);
    w.add(t0);
    w.add(t0 + 5 * 60_000);
    w.add(t0 + 5 * 60_000 + 1000);
    expect(w.count(t0 + 5 * 60_000 + 2000)).toBe(3);
    // ten minutes on, the first minute has left the window
    expect(w.count(t0 + 10 * 60_000)).toBe(2);
    expect(w.count(t0 + 15 * 60_000)).toBe(0);
  });
});
