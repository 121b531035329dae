// templates/_names.tpl: the fixed names and mount paths of lib/fixed-names.ts as
// rlmesh.name.<key> and rlmesh.mount.<key>, so the chart and the code share one list.
import { MOUNTS, NAMES } from '../../lib/fixed-names.ts';

export function namesTemplate(): string {
  const define = (prefix: string, entries: Record<string, string>) =>
    Object.entries(entries).map(([k, v]) => `{{- define "rlmesh.${prefix}.${k}" -}}${v}{{- end }}\n`).join('');
  return `{{/* Generated from lib/fixed-names.ts by \`npm run generate\`; do not edit. */}}\n${define('name', NAMES)}${define('mount', MOUNTS)}`;
}

export async function outputs(): Promise<Record<string, string>> {
  return { 'charts/rlmesh-runtime/templates/_names.tpl': namesTemplate() };
}
