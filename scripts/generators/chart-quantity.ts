// templates/_quantity.tpl: rlmesh.quantityBytes, the chart's parser of the
// quantities its values take, from the grammar and suffixes in lib/quantity.ts.
import { CHART_NUMBER, CHART_SUFFIXES, SUFFIX } from '../../lib/quantity.ts';

/** A Go template float literal of n (exact: every suffix value is a float64). */
const goFloat = (n: number): string => (Number.isInteger(n) ? `${BigInt(n)}.0` : String(n));

export function quantityTemplate(): string {
  const units = ['', ...CHART_SUFFIXES].map((s) => `"${s}" ${goFloat(SUFFIX[s]!)}`).join(' ');
  return (
    '{{/* Generated from lib/quantity.ts by `npm run generate`; do not edit. */}}\n' +
    '{{/* A Kubernetes quantity as the values take it (CHART_QUANTITY), in bytes, as a float (parseQuantity()) */}}\n' +
    '{{- define "rlmesh.quantityBytes" -}}\n' +
    `{{- $num := regexFind \`^${CHART_NUMBER}\` . }}\n` +
    '{{- $unit := trimPrefix $num . }}\n' +
    `{{- $units := dict ${units} }}\n` +
    '{{- mulf (float64 $num) (get $units $unit) }}\n' +
    '{{- end }}\n'
  );
}

export async function outputs(): Promise<Record<string, string>> {
  return { 'charts/rlmesh-runtime/templates/_quantity.tpl': quantityTemplate() };
}
