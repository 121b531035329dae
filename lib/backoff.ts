// Jittered exponential backoff ("full jitter" over an exponentially growing
// ceiling) so that many agents reconnecting after a control-plane restart do
// not arrive in lockstep.
export type Backoff = {
  /** the delay before the next attempt; grows with each call until reset */
  next(): number;
  reset(): void;
  readonly attempts: number;
};

export function createBackoff(baseMs: number, maxMs: number, random: () => number = Math.random, factor = 2): Backoff {
  let attempts = 0;
  return {
    next() {
      const ceiling = Math.min(maxMs, baseMs * factor ** Math.min(attempts, 60));
      attempts++;
      // at least half the ceiling, so a retry storm still spreads out but never spins
      return Math.round(ceiling / 2 + random() * (ceiling / 2));
    },
    reset() {
      attempts = 0;
    },
    get attempts() {
      return attempts;
    },
  };
}

export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
