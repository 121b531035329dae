import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createHasher } from './hasher.ts';

describe('createHasher', () => {
  it('computes the same SHA-256 off the main thread, in uneven pieces, with backpressure', async () => {
    const data = randomBytes(70 * 1024 * 1024 + 3);
    const h = createHasher(data.length);
    for (let off = 0; off < data.length; ) {
      const n = Math.min(data.length - off, 1 + Math.floor(Math.random() * 3 * 1024 * 1024));
      await h.update(data.subarray(off, off + n));
      off += n;
    }
    expect(await h.digest()).toBe(createHash('sha256').update(data).digest('hex'));
  });

  it('hashes small artifacts inline', async () => {
    const data = randomBytes(1000);
    const h = createHasher(data.length);
    await h.update(data);
    expect(await h.digest()).toBe(createHash('sha256').update(data).digest('hex'));
  });
});
