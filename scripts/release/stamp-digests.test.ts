import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { imageBlocks, imageReference } from '../../lib/chart-values.ts';
import { observabilityValuesObjectSchema } from '../../lib/observability-values-schema.ts';
import { CHART_APP_VERSION, valuesObjectSchema } from '../../lib/values-schema.ts';
import { stampDigests } from './stamp-digests.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const RUNTIME = 'sha256:' + '1a'.repeat(32);
const KUBECTL = 'sha256:' + '2b'.repeat(32);
const PROMETHEUS = 'sha256:' + '3c'.repeat(32);
const RUNTIME_DIGESTS = { 'rlmesh/rlmesh-runtime': RUNTIME, 'rlmesh/kubectl': KUBECTL };

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
/** An unpacked copy of a chart, as the release stamps it before helm package. */
function copy(chart: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-stamp-'));
  dirs.push(dir);
  cpSync(join(root, 'charts', chart), dir, { recursive: true });
  return dir;
}
const read = (dir: string, f = 'values.yaml') => readFileSync(join(dir, f), 'utf8');
const defaultsJson = (dir: string) => JSON.parse(/define "rlmesh\.defaultValues" -\}\}\n(.*)\n/.exec(read(dir, 'templates/_defaults.tpl'))![1]!) as unknown;

describe('stampDigests', () => {
  it('the runtime chart: every image block gets its digest; comments, order and everything else stay', () => {
    const dir = copy('rlmesh-runtime');
    const before = read(dir);
    stampDigests(dir, RUNTIME_DIGESTS);
    const after = read(dir);

    const values = valuesObjectSchema.parse(parse(after));
    const blocks = imageBlocks(values);
    expect(blocks.map((b) => b.path)).toEqual([
      'egress.image',
      'artifactCache.filler.image',
      'agent.image',
      'controller.image',
      'gpuFeatureDiscovery.image',
      'crdUpgradeHook.image',
    ]);
    for (const { path, image } of blocks) {
      expect(image.digest, path).toBe(path === 'crdUpgradeHook.image' ? KUBECTL : RUNTIME);
      expect(imageReference(image, CHART_APP_VERSION), path).toBe(`${image.repository}@${image.digest}`);
    }
    // only the digest lines changed, each from "" to the digest
    const a = before.split('\n');
    const b = after.split('\n');
    expect(b.length).toBe(a.length);
    const changed = a.flatMap((line, i) => (line === b[i] ? [] : [[line.trim(), b[i]!.trim()]]));
    expect(changed).toHaveLength(6);
    for (const [from, to] of changed) {
      expect(from).toBe('digest: ""');
      expect([`digest: ${RUNTIME}`, `digest: ${KUBECTL}`]).toContain(to);
    }
    expect(after).toContain('# Image digest (sha256: and 64 hex digits).');

    // templates/_defaults.tpl (rlmesh.defaults fills values an old release lacks) says the same
    expect(defaultsJson(dir)).toEqual(values);
  });

  it('the observability chart: Prometheus is stamped, Grafana (no image named) is left empty', () => {
    const dir = copy('rlmesh-observability');
    stampDigests(dir, { 'rlmesh/prometheus': PROMETHEUS });
    const values = observabilityValuesObjectSchema.parse(parse(read(dir)));
    expect(values.prometheus.image.digest).toBe(PROMETHEUS);
    expect(values.grafana.image).toMatchObject({ repository: '', tag: '', digest: '' });
  });

  it('matches the repository under any registry host, e.g. a chart pointed at a mirror', () => {
    const dir = copy('rlmesh-observability');
    writeFileSync(join(dir, 'values.yaml'), read(dir).replace('repository: registry.rlmesh.dev/rlmesh/prometheus', 'repository: localhost:5000/rlmesh/prometheus'));
    stampDigests(dir, { 'rlmesh/prometheus': PROMETHEUS });
    expect((parse(read(dir)) as { prometheus: { image: { digest: string } } }).prometheus.image.digest).toBe(PROMETHEUS);
  });

  it('refuses, writing nothing: a key that matches no image block', () => {
    const dir = copy('rlmesh-runtime');
    const before = read(dir);
    expect(() => stampDigests(dir, { ...RUNTIME_DIGESTS, 'rlmesh/grafana': PROMETHEUS })).toThrow(
      /no image block has repository <host>\/rlmesh\/grafana; its repositories are registry\.rlmesh\.dev\/rlmesh\/rlmesh-runtime, registry\.rlmesh\.dev\/rlmesh\/kubectl/,
    );
    expect(read(dir)).toBe(before);
  });

  it('refuses, writing nothing: an image block with no digest given', () => {
    const dir = copy('rlmesh-runtime');
    const before = read(dir);
    const tpl = read(dir, 'templates/_defaults.tpl');
    expect(() => stampDigests(dir, { 'rlmesh/rlmesh-runtime': RUNTIME })).toThrow(/no digest given for crdUpgradeHook\.image \(registry\.rlmesh\.dev\/rlmesh\/kubectl\)/);
    expect(read(dir)).toBe(before);
    expect(read(dir, 'templates/_defaults.tpl')).toBe(tpl);
  });

  it('refuses a digest that is not sha256:<64 hex>, and a key with a host, tag or digest', () => {
    const dir = copy('rlmesh-observability');
    expect(() => stampDigests(dir, { 'rlmesh/prometheus': 'sha256:abc' })).toThrow(/the digest for rlmesh\/prometheus is "sha256:abc", not sha256: followed by 64 lowercase hex digits/);
    expect(() => stampDigests(dir, { 'rlmesh/prometheus': PROMETHEUS.toUpperCase() })).toThrow(/not sha256:/);
    expect(() => stampDigests(dir, { 'rlmesh/prometheus:v3.5.0': PROMETHEUS })).toThrow(/not a repository without its registry host/);
    // a key is the path after the host: the host alone or a partial path does not match
    expect(() => stampDigests(dir, { prometheus: PROMETHEUS })).toThrow(/no digest given for prometheus\.image/);
  });
});
