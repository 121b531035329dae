import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createHasher, InOrderHash } from './hasher.ts';

describe('createHasher', () => {
  it('computes the same SHA-256 off the main thread, in uneven pieces, with backpressure', async () => {
    const data = randomBytes(70 * 1024 * 1024 + 3);
    const h = createHasher(data.length, true);
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

  it('hashes ranges that complete out of order in file order, inline and on a worker', async () => {
    const data = randomBytes(9 * 1024 * 1024 + 11);
    const range = 2 * 1024 * 1024;
    const n = Math.ceil(data.length / range);
    for (const offThread of [false, true]) {
      const hash = createHasher(data.length, offThread);
      const ordered = new InOrderHash(hash);
      // ranges deliver interleaved pieces, and finish last-first
      const pieces = Array.from({ length: n }, (_, i) => {
        const r = data.subarray(i * range, Math.min(data.length, (i + 1) * range));
        return [r.subarray(0, 1000), r.subarray(1000, 70_000), r.subarray(70_000)];
      });
      for (let p = 0; p < 3; p++) for (let i = n - 1; i >= 0; i--) await ordered.add(i, pieces[i]![p]!);
      for (let i = n - 1; i >= 0; i--) await ordered.complete(i);
      expect(ordered.cursor).toBe(n);
      expect(await hash.digest()).toBe(createHash('sha256').update(data).digest('hex'));
    }
  });
});
