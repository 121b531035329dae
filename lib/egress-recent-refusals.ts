// The egress proxy's recent refusals, as its metrics expose them to `rlmesh
// status`, which reads one scrape and so cannot take a rate of the decisions
// counter: how many refusals fell in the last RECENT_MINUTES (counted by the
// minute), and when the last one was.
export const RECENT_MINUTES = 10;
export const RECENT_REFUSALS_METRIC = 'rlmesh_egress_recent_refusals';
export const LAST_REFUSAL_METRIC = 'rlmesh_egress_last_refusal_timestamp_seconds';

/** Events counted in one-minute buckets, of which the last `minutes` are kept. */
export function minuteWindow(minutes = RECENT_MINUTES) {
  const buckets = new Map<number, number>();
  const minute = (ms: number) => Math.floor(ms / 60_000);
  return {
    add(nowMs: number): void {
      const m = minute(nowMs);
      buckets.set(m, (buckets.get(m) ?? 0) + 1);
      for (const k of buckets.keys()) if (k <= m - minutes) buckets.delete(k);
    },
    count(nowMs: number): number {
      const m = minute(nowMs);
      let n = 0;
      for (const [k, v] of buckets) if (k > m - minutes) n += v;
      return n;
    },
  };
}
