// templates/_refusals.tpl of each chart: one named template per refusal of its
// values (lib/values-refusals.ts, lib/observability-refusals.ts, and IMAGE_REFUSALS
// of lib/chart-values.ts), so
// _validate.tpl says what crossFieldErrors() says without a copy of the words.
// Generation fails when a chart's _validate.tpl includes a refusal that does not
// exist, or leaves one out.
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IMAGE_REFUSALS } from '../../lib/chart-values.ts';
import { OBSERVABILITY_REFUSALS } from '../../lib/observability-refusals.ts';
import { placeholders, type Refusal } from '../../lib/refusals.ts';
import { VALUES_REFUSALS } from '../../lib/values-refusals.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

const CHARTS = [
  { dir: 'charts/rlmesh-runtime', prefix: 'rlmesh', source: 'lib/values-refusals.ts and lib/chart-values.ts', refusals: { ...VALUES_REFUSALS, ...IMAGE_REFUSALS } },
  { dir: 'charts/rlmesh-observability', prefix: 'obs', source: 'lib/observability-refusals.ts and lib/chart-values.ts', refusals: { ...OBSERVABILITY_REFUSALS, ...IMAGE_REFUSALS } },
] as const;

/** `path: message` as a Go printf call over the template's dict argument. */
function printf(r: Refusal): string {
  const text = `${r.path}: ${r.message}`;
  const format = text.replace(/%/g, '%%').replace(/\{(\w+)(:q)?\}/g, (_, __, q: string | undefined) => (q ? '%q' : '%v'));
  const args = placeholders(text).map((p) => ` (index . ${JSON.stringify(p.name)})`);
  return `printf ${JSON.stringify(format)}${args.join('')}`;
}

export function refusalsTemplate(prefix: string, source: string, refusals: Record<string, Refusal>): string {
  const defines = Object.entries(refusals).map(([name, r]) => {
    const needs = [...new Set(placeholders(`${r.path} ${r.message}`).map((p) => p.name))];
    const args = needs.length > 0 ? `; include with (dict ${needs.map((n) => `"${n}" …`).join(' ')})` : '';
    return `{{/* ${name}${args} */}}\n{{- define "${prefix}.refusal.${name}" -}}\n{{- ${printf(r)} -}}\n{{- end }}\n`;
  });
  return `{{/* Generated from ${source} by \`npm run generate\`; do not edit. The refusals _validate.tpl reports, as "path: message". */}}\n${defines.join('')}`;
}

export async function outputs(): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const c of CHARTS) {
    // _validate.tpl and the _validate-<topic>.tpl files it includes
    const validateFiles = (await readdir(join(root, c.dir, 'templates'))).filter((f) => /^_validate(-[\w-]+)?\.tpl$/.test(f)).sort();
    const validatePath = `${c.dir}/templates/${validateFiles.length > 1 ? `{${validateFiles.join(',')}}` : '_validate.tpl'}`;
    const validate = (await Promise.all(validateFiles.map((f) => readFile(join(root, c.dir, 'templates', f), 'utf8')))).join('\n');
    const used = new Set([...validate.matchAll(new RegExp(`"${c.prefix}\\.refusal\\.(\\w+)"`, 'g'))].map((m) => m[1]!));
    const known = Object.keys(c.refusals);
    const unknown = [...used].filter((n) => !known.includes(n));
    const unused = known.filter((n) => !used.has(n));
    if (unknown.length > 0 || unused.length > 0)
      throw new Error(
        `${validatePath} and its refusals (${c.source}) disagree: it includes ${unknown.join(', ') || 'none'} that do not exist and leaves out ${unused.join(', ') || 'none'}; include every ${c.prefix}.refusal.<name> where its rule is checked`,
      );
    files[`${c.dir}/templates/_refusals.tpl`] = refusalsTemplate(c.prefix, c.source, c.refusals);
  }
  return files;
}
