// What Artifact Hub and `helm show` read from each packaged chart, without the repository
// beside it: the README within its size budget and with no link that only resolves in the
// repository, Chart.yaml's Artifact Hub annotations, and alert texts that name values the
// chart has.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { OFFLINE_API_SERVER, TOKEN } from '../../test/chart/chart.ts';
import { tempDir } from '../../test/support/temp.ts';
import { valueRows, valuesJsonSchema } from '../generators/values-schema.ts';
import { ROOT } from '../image/source.ts';
import { findTool } from './tools.ts';

const README_BUDGET = 25 * 1024;
const ANNOTATIONS = ['artifacthub.io/license', 'artifacthub.io/links', 'artifacthub.io/images', 'artifacthub.io/changes', 'artifacthub.io/category'];

const helm = findTool('helm');
const run = (args: string[]): string => execFileSync(helm, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

function packaged(chart: string): string {
  const out = tempDir(`rlmesh-package-${chart}-`);
  run(['package', join(ROOT, 'charts', chart), '--destination', out]);
  const tgz = readdirSync(out).find((f) => f.endsWith('.tgz'));
  if (!tgz) throw new Error(`helm package charts/${chart} wrote no .tgz into ${out}`);
  return join(out, tgz);
}

/** Targets of Markdown links and images and of HTML href/src, outside code blocks and code spans. */
export function linkTargets(markdown: string): string[] {
  const text = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
  const inline = [...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]*)/g)].map((m) => m[1]!);
  const reference = [...text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)/gm)].map((m) => m[1]!);
  const html = [...text.matchAll(/\b(?:href|src)\s*=\s*["']([^"']*)["']/gi)].map((m) => m[1]!);
  return [...inline, ...reference, ...html];
}

const relative = (target: string): boolean => !/^https?:\/\//.test(target) && !target.startsWith('#');

describe('linkTargets', () => {
  it('finds relative links, images and HTML links, and ignores code', () => {
    const md = [
      '[guide](../../README.md) ![logo](img/logo.png) [ok](https://rlmesh.dev) [top](#install)',
      '[ref]: docs/x.md',
      '<a href="docs/y.md">y</a>',
      '`[not](a-link.md)`',
      '```sh',
      'echo "[not](either.md)"',
      '```',
    ].join('\n');
    expect(linkTargets(md).filter(relative)).toEqual(['../../README.md', 'img/logo.png', 'docs/x.md', 'docs/y.md']);
  });
});

describe.each(['rlmesh-runtime', 'rlmesh-observability'])('the packaged %s chart', (chart) => {
  const tgz = packaged(chart);

  it(`helm show readme is at most ${README_BUDGET} bytes and links only to absolute addresses or anchors`, () => {
    const readme = run(['show', 'readme', tgz]);
    expect(readme).toMatch(new RegExp(`^# ${chart}\\n`));
    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(README_BUDGET);
    expect(linkTargets(readme).filter(relative)).toEqual([]);
  });

  it('Chart.yaml carries the Artifact Hub annotations, the license the repository has', () => {
    const meta = parse(run(['show', 'chart', tgz])) as { annotations?: Record<string, string> };
    for (const key of ANNOTATIONS) expect(meta.annotations?.[key], key).toBeTruthy();
    expect(meta.annotations?.['artifacthub.io/license']).toBe('Apache-2.0');
    const links = parse(meta.annotations!['artifacthub.io/links']!) as { name: string; url: string }[];
    expect(links.length).toBeGreaterThan(0);
    for (const l of links) expect(l.url).toMatch(/^https:\/\//);
  });
});

describe('the PrometheusRule alerts', () => {
  it('name only value paths the values schema has', () => {
    const rendered = run(['template', 'rlmesh', join(ROOT, 'charts/rlmesh-runtime'), '-n', 'rlmesh-system', ...OFFLINE_API_SERVER, '--set', `joinToken=${TOKEN}`, '--set', 'metrics.prometheusRule.enabled=true', '--show-only', 'templates/prometheus-rule.yaml']);
    const rule = parseAllDocuments(rendered).map((d) => d.toJS() as { spec: { groups: { rules: { alert: string; annotations: Record<string, string> }[] }[] } })[0]!;
    const texts = rule.spec.groups.flatMap((g) => g.rules).flatMap((r) => Object.values(r.annotations));
    const topLevel = Object.keys(valuesJsonSchema().properties ?? {});
    const paths = new Set(valueRows().flatMap((r) => r.path.split('.').map((_, i, parts) => parts.slice(0, i + 1).join('.'))));
    const named = [...new Set(texts.flatMap((t) => [...t.matchAll(/\b([a-z][A-Za-z0-9]*(?:\.[a-z][A-Za-z0-9]*)+)/g)].map((m) => m[1]!)))].filter((p) => topLevel.includes(p.split('.')[0]!));
    // the spool alert and the cache alert name their sizes
    expect(named).toEqual(expect.arrayContaining(['agent.spool.size', 'artifactCache.storage.sharedPvc.size']));
    expect(named.filter((p) => !paths.has(p))).toEqual([]);
  });
});
