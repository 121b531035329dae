import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../image/source.ts';
import { GO_SUMS, provenance } from './provenance.ts';

const sha256 = (file: string) => createHash('sha256').update(readFileSync(join(ROOT, file))).digest('hex');

describe('the SLSA provenance predicate', () => {
  const p = provenance({ image: 'kubectl', command: 'node scripts/release/release.ts --registry r', revision: '0123abc-dirty' });
  const dep = (name: string) => p.buildDefinition.resolvedDependencies.find((d) => d.name === name);

  it('names the commit without the dirty mark, and keeps the mark in the parameters', () => {
    expect(dep('source')).toEqual({ name: 'source', digest: { gitCommit: '0123abc' } });
    expect(p.buildDefinition.externalParameters).toEqual({ image: 'kubectl', command: 'node scripts/release/release.ts --registry r', revision: '0123abc-dirty' });
  });

  it('records the digests the repository pins, as the files say now', () => {
    const pins = JSON.parse(readFileSync(join(ROOT, 'scripts/image/pins.json'), 'utf8')) as { node: { version: string; platform: string; sha256: string } };
    expect(dep(`node-v${pins.node.version}-${pins.node.platform}/bin/node`)?.digest).toEqual({ sha256: pins.node.sha256 });
    const lock = readFileSync(join(ROOT, 'scripts/image/debian.lock'), 'utf8').split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
    expect(lock.length).toBeGreaterThan(0);
    for (const line of lock) {
      const [name, version, arch, hash] = line.split(/\s+/);
      expect(dep(`${name}_${version}_${arch}.deb`)?.digest, line).toEqual({ sha256: hash });
    }
    for (const file of ['package-lock.json', ...GO_SUMS]) expect(dep(file)?.digest, file).toEqual({ sha256: sha256(file) });
  });
});
