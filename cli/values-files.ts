// The -f values files a command reads, merged as helm merges them and checked
// against the chart's schema (its shape: the cross-field rules are helm install's).
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { errorMessage } from '../lib/error-fields.ts';
import { valuesObjectSchema, type Values } from '../lib/values-schema.ts';
import { UsageError } from './usage-error.ts';

export function readValuesFiles(files: string[]): Values {
  let merged: Record<string, unknown> = {};
  for (const file of files) {
    let doc: unknown;
    try {
      doc = parseYaml(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new UsageError(`cannot read values file ${file}: ${errorMessage(err)}`);
    }
    if (doc !== null && doc !== undefined && (typeof doc !== 'object' || Array.isArray(doc))) throw new UsageError(`values file ${file} is not a YAML mapping`);
    merged = deepMerge(merged, (doc ?? {}) as Record<string, unknown>);
  }
  // the shape only: preflight runs before a join token exists, helm install checks the cross-field rules
  const parsed = valuesObjectSchema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UsageError(`invalid values: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  return parsed.data;
}

// helm's rule: maps merge key by key, anything else is replaced
function deepMerge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    const isMap = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
    out[k] = isMap(prev) && isMap(v) ? deepMerge(prev, v) : v;
  }
  return out;
}

