// Shared by the control plane's and the CLI's tests.
import type { Clock } from './store.ts';

export type ManualClock = Clock & { advance(ms: number): void };

export function manualClock(start = '2026-01-01T00:00:00.000Z'): ManualClock {
  let t = Date.parse(start);
  return { now: () => new Date(t), advance: (ms: number) => void (t += ms) };
}
