// --interval-seconds: how long GPU discovery waits between checks of its node.
// A whole number of seconds; anything else is refused at start-up (a NaN or 0
// interval would re-read and patch the node in a tight loop).

// setTimeout's limit (2^31 - 1 ms), about 24.8 days
const MAX_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

/** The interval in milliseconds, or an error naming the flag, the value and what to write. */
export function parseIntervalSeconds(text: string): number {
  const trimmed = text.trim();
  const seconds = /^\d+$/.test(trimmed) ? Number(trimmed) : Number.NaN;
  if (!Number.isSafeInteger(seconds) || seconds < 1 || seconds > MAX_SECONDS) {
    throw new Error(
      `--interval-seconds '${text}' is not a whole number of seconds from 1 to ${MAX_SECONDS}; ` +
        'write the seconds alone, e.g. --interval-seconds 600 for ten minutes',
    );
  }
  return seconds * 1000;
}
