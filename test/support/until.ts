// The one way tests wait for state: poll a probe until it yields a value.
// A probe that throws is retried like one that is not there yet; when time
// runs out, the error names what was awaited, the last error (or the last
// value) the probe gave, and whatever context the caller adds (a log tail).
export type UntilOptions = {
  timeoutMs?: number;
  intervalMs?: number;
  /** extra context for the timeout error, e.g. the tail of a process's log */
  context?: () => string;
};

/** Not there yet: undefined, null and false; anything else is the awaited value. */
export type Probe<T> = () => Promise<T | undefined | null | false> | T | undefined | null | false;

export async function until<T>(what: string, probe: Probe<T>, { timeoutMs = 60_000, intervalMs = 250, context }: UntilOptions = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: { error: unknown } | { value: unknown } | undefined;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== null && v !== false) return v;
      last = { value: v };
    } catch (error) {
      last = { error };
    }
    if (Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
  const seen = last && 'error' in last ? `last error: ${last.error instanceof Error ? last.error.message : String(last.error)}` : `last value: ${String(last?.value)}`;
  const extra = context ? `\n${context()}` : '';
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (${seen})${extra}`);
}
