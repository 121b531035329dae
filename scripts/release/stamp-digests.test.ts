import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateKeyPairSync } from 'node:crypto';
import { ARTIFACTHUB_SIGN_KEY, artifactHubImages, imageRepositories, keyFingerprint, RELEASED_IMAGES_TPL, stampDigests, stampSignKey } from './stamp-digests.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const digest = (c: string) => `sha256:${c.repeat(64)}`;
const RUNTIME = { 'rlmesh-runtime': { tag: '0.1.0', digest: digest('a') }, kubectl: { tag: 'v1.35.4', digest: digest('b') } };

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function copy(chart: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-stamp-'));
  dirs.push(dir);
  cpSync(join(root, 'charts', chart), dir, { recursive: true });
  return dir;
}
const read = (dir: string, f: string) => readFileSync(join(dir, f), 'utf8');
const released = (dir: string) => JSON.parse(/releasedImages" -\}\}(.*)\{\{- end/.exec(read(dir, RELEASED_IMAGES_TPL))![1]!) as unknown;

describe('stampDigests', () => {
  it('records each released image in the chart template and leaves values.yaml as it is', () => {
    const dir = copy('rlmesh-runtime');
    const values = read(dir, 'values.yaml');
    expect(released(dir)).toEqual({});
    stampDigests(dir, RUNTIME);
    expect(released(dir)).toEqual(RUNTIME);
    expect(read(dir, 'values.yaml')).toBe(values);
  });

  it('the observability chart: Prometheus only (Grafana names no image)', () => {
    const dir = copy('rlmesh-observability');
    stampDigests(dir, { prometheus: { tag: 'v3.5.0', digest: digest('c') } });
    expect(released(dir)).toEqual({ prometheus: { tag: 'v3.5.0', digest: digest('c') } });
  });

  it('refuses a chart image the release did not build, and writes nothing', () => {
    const dir = copy('rlmesh-runtime');
    const before = read(dir, RELEASED_IMAGES_TPL);
    expect(() => stampDigests(dir, { 'rlmesh-runtime': RUNTIME['rlmesh-runtime'] })).toThrow(/runs kubectl but the release built no such image/);
    expect(read(dir, RELEASED_IMAGES_TPL)).toBe(before);
  });

  it('refuses a released image the chart does not name', () => {
    expect(() => stampDigests(copy('rlmesh-runtime'), { ...RUNTIME, prometheus: { tag: 'v3.5.0', digest: digest('c') } })).toThrow(/names no image prometheus/);
  });

  it('refuses a malformed digest and a chart stamped already', () => {
    expect(() => stampDigests(copy('rlmesh-runtime'), { ...RUNTIME, kubectl: { tag: 'v1.35.4', digest: 'sha256:1234' } })).toThrow(/not sha256: followed by 64/);
    const dir = copy('rlmesh-runtime');
    stampDigests(dir, RUNTIME);
    expect(() => stampDigests(dir, RUNTIME)).toThrow(/not an unreleased chart's template/);
  });
});

describe('the artifacthub.io/images annotation', () => {
  const imageNames = (dir: string) => artifactHubImages(dir).map((i) => i.image.replace(/[:@].*$/, '').split('/').pop());

  it.each(['rlmesh-runtime', 'rlmesh-observability'])('%s lists exactly the images its values name, for linux/amd64', (chart) => {
    const dir = join(root, 'charts', chart);
    const values = parse(read(dir, 'values.yaml')) as unknown;
    expect(imageNames(dir).sort()).toEqual([...new Set(imageRepositories(values).map((r) => r.split('/').pop()))].sort());
    for (const i of artifactHubImages(dir)) expect(i.platforms).toEqual(['linux/amd64']);
  });

  it('the release pins each listed image to its digest', () => {
    const dir = copy('rlmesh-runtime');
    stampDigests(dir, RUNTIME);
    expect(artifactHubImages(dir).map((i) => i.image)).toEqual([
      `registry.rlmesh.dev/rlmesh/rlmesh-runtime:0.1.0@${digest('a')}`,
      `registry.rlmesh.dev/rlmesh/kubectl:v1.35.4@${digest('b')}`,
    ]);
    expect(read(dir, 'Chart.yaml')).toContain('artifacthub.io/category: ai-machine-learning');
  });

  it('refuses a list whose tag is not the one released, and writes nothing', () => {
    const dir = copy('rlmesh-runtime');
    const before = read(dir, 'Chart.yaml');
    expect(() => stampDigests(dir, { ...RUNTIME, kubectl: { tag: 'v9.9.9', digest: digest('b') } })).toThrow(/lists registry.rlmesh.dev\/rlmesh\/kubectl:v1.35.4, but the release pushed tag v9.9.9/);
    expect(read(dir, 'Chart.yaml')).toBe(before);
    expect(released(dir)).toEqual({});
  });
});

describe('stampSignKey', () => {
  const publicKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();

  it('names the published key and its fingerprint in artifacthub.io/signKey, and keeps the other annotations', () => {
    const dir = copy('rlmesh-runtime');
    const before = parse(read(dir, 'Chart.yaml')) as { annotations: Record<string, string> };
    stampSignKey(dir, { publicKey, url: 'https://downloads.example/rlmesh/0.1.0/cosign.pub' });
    const after = parse(read(dir, 'Chart.yaml')) as { annotations: Record<string, string> };
    expect(parse(after.annotations[ARTIFACTHUB_SIGN_KEY]!)).toEqual({ fingerprint: keyFingerprint(publicKey), url: 'https://downloads.example/rlmesh/0.1.0/cosign.pub' });
    expect(keyFingerprint(publicKey)).toMatch(/^[0-9A-F]{64}$/);
    const { [ARTIFACTHUB_SIGN_KEY]: _, ...rest } = after.annotations;
    expect(rest).toEqual(before.annotations);
  });

  it('refuses an address that is not https', () => {
    const dir = copy('rlmesh-observability');
    expect(() => stampSignKey(dir, { publicKey, url: 'cosign.pub' })).toThrow(/not an https:\/\/ URL/);
  });
});
