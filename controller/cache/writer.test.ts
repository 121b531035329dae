import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BackgroundSync, PositionalWriter } from './writer.ts';
import { tempDir } from '../../test/support/temp.ts';

describe('PositionalWriter', () => {
  it('writes pieces from several writers at their positions, in batches, with background datasyncs', async () => {
    const data = randomBytes(3 * 1024 * 1024 + 5);
    const file = join(tempDir('rlmesh-writer-'), 'f');
    const fh = await open(file, 'w+');
    const sync = new BackgroundSync(fh, 256 * 1024);
    const half = 1024 * 1024 + 3;
    const write = async (from: number, to: number): Promise<number> => {
      const out = new PositionalWriter(fh, from, { batchBytes: 100_000, sync });
      let waits = 0;
      for (let off = from; off < to; off += 16_384) {
        const w = out.push(data.subarray(off, Math.min(to, off + 16_384)));
        if (w) {
          waits++;
          await w;
        }
      }
      await out.end();
      expect(out.bytes).toBe(to - from);
      return waits;
    };
    await Promise.all([write(half, data.length), write(0, half)]);
    await sync.settle();
    await fh.close();
    expect(readFileSync(file).equals(data)).toBe(true);
  });

  it('reports a failed write on the next call', async () => {
    const file = join(tempDir('rlmesh-writer-'), 'f');
    await open(file, 'w').then((f) => f.close());
    const fh = await open(file, 'r'); // read-only: every write fails
    const out = new PositionalWriter(fh, 0, { batchBytes: 10 });
    out.push(Buffer.alloc(20));
    await expect(out.end()).rejects.toThrow(/EBADF/);
    await fh.close();
  });
});
