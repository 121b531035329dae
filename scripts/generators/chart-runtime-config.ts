// templates/_runtime-config.tpl: rlmesh.runtimeConfig, compiled from
// RUNTIME_CONFIG_SPEC (lib/runtime-config-spec.ts), the table renderRuntimeConfig()
// evaluates. test/chart/templates.test.ts still compares the two in every scenario.
import { RUNTIME_CONFIG_SPEC, type HelperName, type Scalar, type SpecNode } from '../../lib/runtime-config-spec.ts';

const HELPERS: Record<HelperName, string> = {
  spoolMaxBytes: '(include "rlmesh.spoolMaxBytes" . | int64)',
  probeImage: '(include "rlmesh.image" (dict "image" $v.controller.image "root" . "defaultTag" .Chart.AppVersion))',
  gpuDiscoveryNodeTerms: '(dig "nodeAffinity" "requiredDuringSchedulingIgnoredDuringExecution" "nodeSelectorTerms" (list) $v.gpuFeatureDiscovery.affinity)',
};

const value = (path: string): string => {
  if (!/^[A-Za-z0-9.]+$/.test(path)) throw new Error(`values path ${path} needs index in a template; use a path of plain keys in RUNTIME_CONFIG_SPEC`);
  return `$v.${path}`;
};
const str = (s: string): string => JSON.stringify(s);

function scalar(n: Scalar): string {
  switch (n.kind) {
    case 'const':
      return typeof n.value === 'number' ? String(n.value) : str(n.value);
    case 'value':
      return value(n.path);
    case 'release':
      return n.field === 'name' ? '.Release.Name' : '.Release.Namespace';
    case 'valueOr':
      return `(${value(n.path)} | default ${str(n.fallback)})`;
    case 'whenSet':
      return `(ternary ${str(n.then)} "" (ne ${value(n.path)} ""))`;
    case 'isSet':
      return `(ne ${value(n.path)} "")`;
    case 'format': {
      const format = n.parts.map((p) => (typeof p === 'string' ? p.replace(/%/g, '%%') : '%v')).join('');
      const args = n.parts.filter((p): p is Scalar => typeof p !== 'string').map(scalar);
      return `(printf ${str(format)} ${args.join(' ')})`;
    }
    case 'uniqueList':
      return `(uniq (concat ${n.items.map((i) => ('scalar' in i ? `(list ${value(i.scalar)})` : value(i.list))).join(' ')}))`;
    case 'helper':
      return HELPERS[n.name];
  }
}

/** Statements that build node into a fresh variable; returns the expression of its value. */
function build(node: SpecNode, lines: string[], counter: { n: number }): string {
  if (node.kind !== 'object') return scalar(node);
  const name = `$o${counter.n++}`;
  lines.push(`{{- ${name} := dict }}`);
  for (const [k, f] of Object.entries(node.fields)) {
    if (f.kind === 'optional') {
      const expr = build(f.node, lines, counter);
      const when = [f.when].flat().map(value);
      lines.push(`{{- if ${when.length > 1 ? `or ${when.join(' ')}` : when[0]} }}{{ $_ := set ${name} ${str(k)} ${expr} }}{{ end }}`);
    } else {
      const expr = build(f, lines, counter);
      lines.push(`{{- $_ := set ${name} ${str(k)} ${expr} }}`);
    }
  }
  return name;
}

export function runtimeConfigTemplate(): string {
  const lines: string[] = [];
  const root = build(RUNTIME_CONFIG_SPEC, lines, { n: 0 });
  return [
    '{{/* Generated from lib/runtime-config-spec.ts by `npm run generate`; do not edit. */}}',
    '{{/* The runtime config (ConfigMap rlmesh-runtime-config, key config.json), as renderRuntimeConfig() in lib/values-schema.ts renders it */}}',
    '{{- define "rlmesh.runtimeConfig" -}}',
    '{{- $v := .Values }}',
    ...lines,
    `{{- toPrettyJson ${root} }}`,
    '{{- end }}',
    '',
  ].join('\n');
}

export async function outputs(): Promise<Record<string, string>> {
  return { 'charts/rlmesh-runtime/templates/_runtime-config.tpl': runtimeConfigTemplate() };
}
