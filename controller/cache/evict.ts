// Which artifacts to evict: least recently used first, only when the cache is
// above its high-water mark, down to the low-water mark, and never an artifact
// that an evaluation which has not finished still needs.
import type { Entry } from './store.ts';

export type EvictionPolicy = {
  capacityBytes: number;
  highWaterMarkPercent: number;
  lowWaterMarkPercent: number;
  inUse: ReadonlySet<string>;
  /** Bytes about to be downloaded, counted as used so there is room for them. */
  incomingBytes?: number;
};

export type EvictionPlan = {
  victims: Entry[];
  usedBefore: number;
  usedAfter: number;
  /** Still above the high-water mark after evicting everything allowed. */
  full: boolean;
};

export function planEviction(entries: readonly Entry[], p: EvictionPolicy): EvictionPlan {
  const usedBefore = entries.reduce((n, e) => n + e.size, 0) + (p.incomingBytes ?? 0);
  const high = (p.capacityBytes * p.highWaterMarkPercent) / 100;
  const low = (p.capacityBytes * p.lowWaterMarkPercent) / 100;
  if (usedBefore <= high) return { victims: [], usedBefore, usedAfter: usedBefore, full: false };
  const victims: Entry[] = [];
  let used = usedBefore;
  const candidates = entries.filter((e) => !p.inUse.has(e.digest)).sort((a, b) => a.lastUsedMs - b.lastUsedMs);
  for (const e of candidates) {
    if (used <= low) break;
    victims.push(e);
    used -= e.size;
  }
  return { victims, usedBefore, usedAfter: used, full: used > high };
}
