// Kubernetes resource quantities: one grammar and one parser. client-node's
// quantityToScalar refuses fractional binary quantities (1.5Gi) and exponents
// (1e3), both legal. The chart's values take a subset (CHART_QUANTITY: no sign,
// exponent or n/u suffix), the one its template rlmesh.quantityBytes parses;
// scripts/generators/quantity.ts writes that template from these tables.

/** The value of each suffix. */
export const SUFFIX: Readonly<Record<string, number>> = {
  n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};
/** The suffixes chart values may use (the chart's template parses these). */
export const CHART_SUFFIXES = ['m', 'k', 'M', 'G', 'T', 'P', 'E', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'] as const;
/** The number of a chart value's quantity, as RE2 and JavaScript both read it. */
export const CHART_NUMBER = '[0-9]+(\\.[0-9]+)?';
/** A quantity as the chart's values take it: 100m, 512Mi, 1.5Gi. */
export const CHART_QUANTITY = new RegExp(`^${CHART_NUMBER}(${CHART_SUFFIXES.join('|')})?$`);

const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/;

/** The value of a quantity (cores for CPU, bytes for memory, a count for GPUs); 0 when absent or malformed. */
export function parseQuantity(q: string | number | undefined | null): number {
  if (q === undefined || q === null) return 0;
  if (typeof q === 'number') return q;
  const m = QUANTITY.exec(q.trim());
  if (!m) return 0;
  const n = Number(m[1]);
  if (m[2]) return n * 10 ** Number(m[2].slice(1));
  return n * SUFFIX[m[3] ?? '']!;
}

export const cpuMillis = (q: string | number | undefined | null): number => Math.round(parseQuantity(q) * 1000);
export const bytes = (q: string | number | undefined | null): number => Math.round(parseQuantity(q));
