// A regular expression (RE2 and JavaScript alike: Helm's values.schema.json checks it too)
// of the decimal numbers in a range, e.g. the prefix lengths a CIDR may have.

const digitClass = (lo: number, hi: number): string => (lo === hi ? `${lo}` : hi === lo + 1 ? `[${lo}${hi}]` : `[${lo}-${hi}]`);

/** RE2-safe alternatives matching the decimal numbers from lo to hi of one length (no leading zeros beyond it). */
function sameLength(lo: string, hi: string): string[] {
  const n = lo.length;
  if (n === 1) return [digitClass(Number(lo), Number(hi))];
  const [a, b] = [Number(lo[0]), Number(hi[0])];
  const restLo = lo.slice(1);
  const restHi = hi.slice(1);
  if (a === b) return sameLength(restLo, restHi).map((alt) => `${a}${alt}`);
  const any = '\\d'.repeat(n - 1);
  const out: string[] = [];
  const lowFull = /^0*$/.test(restLo);
  const highFull = /^9*$/.test(restHi);
  if (!lowFull) out.push(...sameLength(restLo, '9'.repeat(n - 1)).map((alt) => `${a}${alt}`));
  const midLo = lowFull ? a : a + 1;
  const midHi = highFull ? b : b - 1;
  if (midLo <= midHi) out.push(`${digitClass(midLo, midHi)}${any}`);
  if (!highFull) out.push(...sameLength('0'.repeat(n - 1), restHi).map((alt) => `${b}${alt}`));
  return out;
}

/** A pattern of the decimal numbers lo..hi (e.g. a prefix length), as RE2 and JavaScript read it. */
export function numberRangePattern(lo: number, hi: number): string {
  const alts: string[] = [];
  for (let len = String(lo).length; len <= String(hi).length; len++) {
    const from = Math.max(lo, len === 1 ? 0 : 10 ** (len - 1));
    const to = Math.min(hi, 10 ** len - 1);
    if (from <= to) alts.push(...sameLength(String(from), String(to)));
  }
  return `(${alts.join('|')})`;
}
