import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ClusterRange } from './classify-address.ts';
import { followRangesFile, parseRangesFile } from './cluster-ranges-file.ts';
import { tempDir } from '../test/support/temp.ts';
import { unknownRangesText } from '../lib/cluster-ranges-text.ts';

describe('the cluster ranges file', () => {
  it('reads one CIDR per line, skipping comments, blanks and lines that are no usable range, each with its reason', () => {
    const { ranges, skipped } = parseRangesFile('# written by the agent\n10.244.0.0/24\n\n 2600:1f14:e22:b400::/56 \n10.0.0.1\n::/0\n');
    expect(ranges.map((r) => r.cidr)).toEqual(['10.244.0.0/24', '2600:1f14:e22:b400::/56']);
    expect(skipped).toHaveLength(2);
    expect(skipped[1]).toContain('covers every address');
  });

  it('is read at start and again whenever its text changes; missing or empty is a problem that keeps the ranges in use', async () => {
    const file = join(tempDir('ranges-'), 'ranges');
    const seen: string[][] = [];
    const f = await followRangesFile({ path: file, log: pino({ level: 'silent' }), intervalMs: 20, onChange: (r: ClusterRange[]) => seen.push(r.map((x) => x.cidr)) });
    expect(seen).toEqual([]);
    expect(f.problem()).toMatch(/ranges file .* is missing: ConfigMap rlmesh-cluster-ranges holds no ranges yet, so the proxy cannot refuse the cluster's own addresses and stays not ready/);
    writeFileSync(file, '10.244.1.0/24\n');
    await expect.poll(() => seen.length).toBe(1);
    expect(f.problem()).toBeUndefined();
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual([['10.244.1.0/24']]); // unchanged text: no second call
    writeFileSync(file, '# nothing\n');
    await expect.poll(() => f.problem()).toMatch(/holds no ranges/);
    rmSync(file);
    await expect.poll(() => f.problem()).toMatch(/is missing/);
    expect(seen).toEqual([['10.244.1.0/24']]); // the ranges in use stay
    writeFileSync(file, '10.244.1.0/24\n');
    await expect.poll(() => f.problem()).toBeUndefined();
    f.stop();
  });

  it("says why when the agent wrote the ranges as unknown, and is usable again once it writes them", async () => {
    const file = join(tempDir('ranges-'), 'ranges');
    writeFileSync(file, '10.244.1.0/24\n');
    const seen: string[][] = [];
    const f = await followRangesFile({ path: file, log: pino({ level: 'silent' }), intervalMs: 20, onChange: (r: ClusterRange[]) => seen.push(r.map((x) => x.cidr)) });
    expect(f.problem()).toBeUndefined();
    writeFileSync(file, unknownRangesText('the agent may not read them (services is forbidden)'));
    await expect.poll(() => f.problem()).toBe("the agent could not read the cluster's own address ranges: the agent may not read them (services is forbidden)");
    expect(seen).toEqual([['10.244.1.0/24']]);
    writeFileSync(file, '10.244.1.0/24\n198.51.100.7/32');
    await expect.poll(() => f.problem()).toBeUndefined();
    expect(seen).toEqual([['10.244.1.0/24'], ['10.244.1.0/24', '198.51.100.7/32']]);
    f.stop();
  });
});
