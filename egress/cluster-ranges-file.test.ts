import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ClusterRange } from './classify-address.ts';
import { followRangesFile, parseRangesFile } from './cluster-ranges-file.ts';

describe('the cluster ranges file', () => {
  it('reads one CIDR per line, skipping comments, blanks and lines that are no usable range, each with its reason', () => {
    const { ranges, skipped } = parseRangesFile('# written by the agent\n10.244.0.0/24\n\n 2600:1f14:e22:b400::/56 \n10.0.0.1\n::/0\n');
    expect(ranges.map((r) => r.cidr)).toEqual(['10.244.0.0/24', '2600:1f14:e22:b400::/56']);
    expect(skipped).toHaveLength(2);
    expect(skipped[1]).toContain('covers every address');
  });

  it('is read at start (missing: no ranges) and again whenever its text changes', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'ranges-')), 'ranges');
    const seen: string[][] = [];
    const stop = await followRangesFile({ path: file, log: pino({ level: 'silent' }), intervalMs: 20, onChange: (r: ClusterRange[]) => seen.push(r.map((x) => x.cidr)) });
    expect(seen).toEqual([[]]);
    writeFileSync(file, '10.244.1.0/24\n');
    await expect.poll(() => seen.length).toBe(2);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual([[], ['10.244.1.0/24']]); // unchanged text: no second call
    rmSync(file);
    await expect.poll(() => seen.length).toBe(3);
    expect(seen[2]).toEqual([]);
    stop();
  });
});
