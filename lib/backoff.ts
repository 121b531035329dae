// Exponential backoff, one formula for every retry in the runtime: the
// ceiling grows from baseMs by factor per attempt up to maxMs, and jitter
// spreads the delay over the top part of the ceiling so that many clients
// failing together (agents after a control-plane restart, keys after an
// apiserver blip) do not retry in lockstep.
export type BackoffPolicy = {
  baseMs: number;
  maxMs: number;
  /** growth per attempt; 2 unless given */
  factor?: number;
  /** the share of the ceiling that is random: 0 = exactly the ceiling, 0.5 = between half the ceiling and the ceiling (the default) */
  jitter?: number;
};

/** The delay before retry number `attempt` (1 = the first retry). */
export function backoffDelayMs(attempt: number, p: BackoffPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(p.maxMs, p.baseMs * (p.factor ?? 2) ** Math.min(Math.max(0, attempt - 1), 60));
  const jitter = p.jitter ?? 0.5;
  // never below (1 - jitter) of the ceiling, so a retry storm still spreads out but never spins
  return Math.round(ceiling * (1 - jitter) + random() * ceiling * jitter);
}

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
      attempts++;
      return backoffDelayMs(attempts, { baseMs, maxMs, factor }, random);
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
