import { describe, expect, it } from 'vitest';
import { AllowList, parseAbsoluteUrl, parseAuthority, type Destination, type Refusal } from './allow-list.ts';

const list = new AllowList({
  entries: ['api.rlmesh.dev', '*.example.org', 'Bücher.example', 'MIXED.Example.COM.', '203.0.113.7', '[2001:db8::7]', '*.xn--caf-dma.example'],
  ports: [443],
});

function decide(authority: string): string {
  const dest = parseAuthority(authority);
  if ('rule' in dest) return dest.rule;
  return list.check(dest)?.rule ?? 'allowed';
}

describe('allow-list matching', () => {
  it.each([
    ['api.rlmesh.dev:443', 'allowed'],
    ['API.RLMESH.DEV:443', 'allowed'],
    ['api.rlmesh.dev.:443', 'allowed'],
    ['api.rlmesh.dev..:443', 'invalid-name'],
    ['x.api.rlmesh.dev:443', 'not-allowed'],
    ['rlmesh.dev:443', 'not-allowed'],
    ['api.rlmesh.dev.evil.example:443', 'not-allowed'],
    ['evilapi.rlmesh.dev:443', 'not-allowed'],
    // wildcard: one or more extra labels, never the suffix itself
    ['a.example.org:443', 'allowed'],
    ['a.b.example.org:443', 'allowed'],
    ['A.Example.Org.:443', 'allowed'],
    ['example.org:443', 'not-allowed'],
    ['badexample.org:443', 'not-allowed'],
    ['example.org.evil.example:443', 'not-allowed'],
    // internationalised names compare in punycode, either spelling
    ['bücher.example:443', 'allowed'],
    ['BÜCHER.example:443', 'allowed'],
    ['xn--bcher-kva.example:443', 'allowed'],
    ['a.café.example:443', 'allowed'],
    ['mixed.example.com:443', 'allowed'],
    // ports: 443 only unless configured
    ['api.rlmesh.dev:80', 'port-not-allowed'],
    ['api.rlmesh.dev:8443', 'port-not-allowed'],
    ['api.rlmesh.dev', 'missing-port'],
    ['api.rlmesh.dev:', 'invalid-port'],
    ['api.rlmesh.dev:0', 'invalid-port'],
    ['api.rlmesh.dev:65536', 'invalid-port'],
    ['api.rlmesh.dev:443x', 'invalid-port'],
    ['api.rlmesh.dev:+443', 'invalid-port'],
    ['api.rlmesh.dev:443:443', 'invalid-port'],
    // userinfo and characters outside the hostname alphabet
    ['user@api.rlmesh.dev:443', 'userinfo'],
    ['user:pw@api.rlmesh.dev:443', 'userinfo'],
    ['api.rlmesh.dev%2f@evil:443', 'userinfo'],
    ['api_x.rlmesh.dev:443', 'invalid-name'],
    ['api.rlmesh.dev%00:443', 'invalid-name'],
    ['%61pi.rlmesh.dev:443', 'invalid-name'],
    ['api.rlmesh.dev\\x:443', 'invalid-name'],
    ['api.rlmesh.dev/x:443', 'invalid-name'],
    ['api .rlmesh.dev:443', 'invalid-name'],
    ['api.rlmesh.dev#:443', 'invalid-name'],
    ['-api.rlmesh.dev:443', 'invalid-name'],
    [`${'a'.repeat(64)}.example.org:443`, 'invalid-name'],
    [':443', 'invalid-name'],
    ['', 'invalid-name'],
    // IP literals: refused unless listed, in any spelling
    ['8.8.8.8:443', 'ip-literal'],
    ['203.0.113.7:443', 'allowed'],
    ['[2001:db8::7]:443', 'allowed'],
    ['[2001:0db8:0:0::7]:443', 'allowed'],
    ['[2001:db8::8]:443', 'ip-literal'],
    ['2130706433:443', 'ip-literal'],
    ['0177.0.0.1:443', 'ip-literal'],
    ['0x7f.1:443', 'ip-literal'],
    ['127.1:443', 'ip-literal'],
    ['[::ffff:127.0.0.1]:443', 'ip-literal'],
    ['[fe80::1%25eth0]:443', 'invalid-name'],
    ['::1:443', 'invalid-name'],
  ])('%s → %s', (authority, expected) => {
    expect(decide(authority)).toBe(expected);
  });

  it('normalises the destination it hands on', () => {
    expect(parseAuthority('Bücher.Example.:443')).toEqual({ host: 'xn--bcher-kva.example', port: 443, kind: 'name' });
    expect(parseAuthority('0x7f.1:443')).toEqual({ host: '127.0.0.1', port: 443, kind: 'ip' });
    expect(parseAuthority('[::ffff:127.0.0.1]:443')).toEqual({ host: '::ffff:7f00:1', port: 443, kind: 'ip' });
  });

  it('explains each refusal with the host and what to do', () => {
    const dest = parseAuthority('x.example:443') as Destination;
    expect(list.check(dest)).toEqual({
      rule: 'not-allowed', reason: "'x.example' is not on the egress allow-list; add it to egress.extraDomains if evaluations need it",
    });
    expect((parseAuthority('x.example') as Refusal).reason).toContain('host:port');
  });
});

describe('absolute-form URLs', () => {
  const http = new AllowList({ entries: ['plain.example'], ports: [80] });
  it.each([
    ['http://plain.example/x', 'allowed'],
    ['http://PLAIN.example:80/x?y', 'allowed'],
    ['http://plain.example:8080/', 'port-not-allowed'],
    ['http://user@plain.example/', 'userinfo'],
    ['https://plain.example/', 'unsupported-request'],
    ['/relative', 'unsupported-request'],
    ['http://%70lain.example/', 'invalid-name'],
    ['http://127.1/', 'ip-literal'],
  ])('%s → %s', (target, expected) => {
    const dest = parseAbsoluteUrl(target);
    expect('rule' in dest ? dest.rule : (http.check(dest)?.rule ?? 'allowed')).toBe(expected);
  });
});

describe('configuration', () => {
  it.each([['*'], ['*.com'], ['a.*.example'], ['foo*.example'], ['exa mple.org'], ['http://x.example'], ['x.example:443'], ['']])(
    'refuses entry %j', (entry) => {
      expect(() => new AllowList({ entries: [entry], ports: [443] })).toThrow(/allow-list entry/);
    },
  );
  it('refuses empty or invalid ports', () => {
    expect(() => new AllowList({ entries: [], ports: [] })).toThrow(/no allowed ports/);
    expect(() => new AllowList({ entries: [], ports: [0] })).toThrow(/1 to 65535/);
  });
});
