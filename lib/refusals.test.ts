import { describe, expect, it } from 'vitest';
import { placeholders, refuse } from './refusals.ts';

describe('refuse', () => {
  const r = { path: 'a.{key}', message: '{key} is {value:q}, not {key}' };
  it('fills every placeholder, quoting :q ones', () => {
    expect(refuse(r, { key: 'x', value: 'y"z' })).toEqual({ path: 'a.x', message: 'x is "y\\"z", not x' });
    expect(placeholders(`${r.path} ${r.message}`)).toEqual([
      { name: 'key', quoted: false },
      { name: 'key', quoted: false },
      { name: 'value', quoted: true },
      { name: 'key', quoted: false },
    ]);
  });
  it('names a missing argument', () => {
    expect(() => refuse(r, { key: 'x' })).toThrow(/needs a value for \{value\}/);
  });
});
