import { describe, expect, it } from 'vitest';
import { shownTarget } from './shown.ts';

describe('a request target as logs and answers show it', () => {
  it.each([
    ['http://files.example/data/object.tar', 'http://files.example/data/object.tar'],
    ['http://user:pass@files.example/x', 'http://<redacted>@files.example/x'],
    ['http://user:p@ss@files.example:8080/x', 'http://<redacted>@files.example:8080/x'],
    ['http://files.example/object?X-Amz-Signature=abc&X-Amz-Credential=def', 'http://files.example/object?<redacted>'],
    ['http://files.example/object#token=abc', 'http://files.example/object#<redacted>'],
    ['http://files.example/object?sig=abc#frag', 'http://files.example/object?<redacted>'],
    ['http://files.example?sig=abc', 'http://files.example?<redacted>'],
    ['HTTP://u@files.example/a@b', 'HTTP://<redacted>@files.example/a@b'],
    ['ftp://user:pass@files.example/x?y=z', 'ftp://<redacted>@files.example/x?<redacted>'],
    ['user:pass@files.example:443', '<redacted>@files.example:443'],
    ['files.example:443?token=abc', 'files.example:443?<redacted>'],
    ['files.example:443', 'files.example:443'],
    ['/relative/path?token=abc', '/relative/path?<redacted>'],
    ['http://user:se\\cret@files.example/', 'http://<redacted>@files.example/'],
    ['http://files.example/\u0000\n?x', 'http://files.example/???<redacted>'],
  ])('%s → %s', (target, expected) => {
    expect(shownTarget(target)).toBe(expected);
  });

  it('cuts a long target after redacting it', () => {
    const shown = shownTarget(`http://files.example/${'a'.repeat(200)}?secret`);
    expect(shown).toHaveLength(101);
    expect(shown).not.toContain('secret');
  });
});
