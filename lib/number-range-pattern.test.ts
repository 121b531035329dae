import { describe, expect, it } from 'vitest';
import { numberRangePattern } from './number-range-pattern.ts';

describe('numberRangePattern', () => {
  it.each([
    [8, 32],
    [7, 128],
    [0, 255],
    [5, 1234],
    [1, 1],
  ])('matches exactly %i to %i', (lo, hi) => {
    const re = new RegExp(`^${numberRangePattern(lo, hi)}$`);
    for (let n = 0; n <= 2000; n++) expect(re.test(String(n)), String(n)).toBe(n >= lo && n <= hi);
    expect(re.test('08')).toBe(false);
  });

  it('keeps the patterns the values schema has always had', () => {
    expect(numberRangePattern(8, 32)).toBe('([89]|[12]\\d|3[0-2])');
    expect(numberRangePattern(7, 128)).toBe('([7-9]|[1-9]\\d|1[01]\\d|12[0-8])');
  });
});
