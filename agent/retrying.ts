// Kubernetes writes that must not be lost to a transient API error: retried
// with backoff, ten times (or for ever, for a rotated credential), and given up
// on only with a log line that says what happens next.
import type { Logger } from 'pino';
import { createBackoff, sleep } from '../lib/backoff.ts';
import { errorFields } from '../lib/error-fields.ts';

export type Retrying = <T>(what: string, fn: () => Promise<T>, opts?: { forever?: boolean }) => Promise<T>;

export function retryingWrites(o: { backoffBaseMs: number; backoffMaxMs: number; signal: AbortSignal; log: Logger }): Retrying {
  return async <T>(what: string, fn: () => Promise<T>, opts: { forever?: boolean } = {}): Promise<T> => {
    const backoff = createBackoff(o.backoffBaseMs, o.backoffMaxMs);
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if ((attempt >= 10 && !opts.forever) || o.signal.aborted) {
          o.log.error(errorFields(err), `${what} failed ${attempt} times; giving up until the control plane sends it again (next session)`);
          throw err;
        }
        const delay = backoff.next();
        o.log.warn({ ...errorFields(err), retryInMs: delay }, `${what} failed; retrying`);
        await sleep(delay, o.signal);
      }
    }
  };
}
