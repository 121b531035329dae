import { describe, expect, it } from 'vitest';
import { BARE_REGISTRY_HOST, matchingPrefix, normalPrefix, qualifiedRepository, REPOSITORY_PREFIX, underPrefix } from './image-prefix.ts';

describe('repository prefixes', () => {
  it.each([
    'registry.corp.example/',
    'registry.corp.example/evals/',
    'registry.corp.example:5000/evals/team/',
    'docker.io/library/',
    'localhost:5000/a__b/c--d/e.f_g/',
  ])('%s is a prefix', (p) => {
    expect(REPOSITORY_PREFIX.test(p)).toBe(true);
    expect(BARE_REGISTRY_HOST.test(p)).toBe(false);
  });

  it.each([
    'registry.corp.example',
    'registry.corp.example/evals',
    'registry.corp.example/evals/gym:1',
    'registry.corp.example/evals@sha256:aa',
    'registry.corp.example//',
    'registry.corp.example/Evals/',
    'registry.corp.example/-evals/',
    'https://registry.corp.example/',
    'Registry.corp.example/',
    '/evals/',
  ])('%s is not a prefix', (p) => {
    expect(REPOSITORY_PREFIX.test(p)).toBe(false);
  });

  it('a bare host is told apart, so its refusal can name the prefix to write', () => {
    expect(BARE_REGISTRY_HOST.test('registry.corp.example')).toBe(true);
    expect(BARE_REGISTRY_HOST.test('registry.corp.example:5000')).toBe(true);
    expect(BARE_REGISTRY_HOST.test('registry.corp.example/')).toBe(false);
  });

  it('normalises the host (case, index.docker.io) and reads a bare host as its whole registry', () => {
    expect(normalPrefix('index.docker.io/corp/')).toBe('docker.io/corp/');
    expect(normalPrefix('Registry.RLMesh.dev')).toBe('registry.rlmesh.dev/');
    expect(normalPrefix('registry.corp.example:5000/evals/')).toBe('registry.corp.example:5000/evals/');
  });

  // [domain, path, prefix, under]
  it.each([
    ['registry.corp.example', 'evals/gym', 'registry.corp.example/evals/', true],
    ['registry.corp.example', 'evals/team/gym', 'registry.corp.example/evals/', true],
    ['Registry.Corp.Example', 'evals/gym', 'registry.corp.example/evals/', true],
    ['registry.corp.example', 'evals-evil/gym', 'registry.corp.example/evals/', false],
    ['registry.corp.example', 'evalsx', 'registry.corp.example/evals/', false],
    ['registry.corp.example', 'evals', 'registry.corp.example/evals/', false],
    ['registry.corp.example:5000', 'evals/gym', 'registry.corp.example/evals/', false],
    ['registry.corp.example', 'evals/gym', 'registry.corp.example:5000/evals/', false],
    ['registry.corp.example.evil', 'evals/gym', 'registry.corp.example/', false],
    ['registry.corp.example', 'anything/at/all', 'registry.corp.example/', true],
    ['docker.io', 'library/busybox', 'index.docker.io/library/', true],
    ['index.docker.io', 'corp/gym', 'docker.io/corp/', true],
    ['docker.io', 'corp/gym', 'registry.corp.example/', false],
    ['registry.rlmesh.dev', 'envs/gym', 'registry.rlmesh.dev', true],
  ] as const)('%s/%s under %s: %s', (domain, path, prefix, under) => {
    expect(underPrefix(domain, path, prefix)).toBe(under);
  });

  it('finds the first matching prefix', () => {
    expect(matchingPrefix('registry.corp.example', 'evals/gym', ['registry.rlmesh.dev', 'registry.corp.example/evals/', 'registry.corp.example/'])).toBe('registry.corp.example/evals/');
    expect(matchingPrefix('registry.corp.example', 'other/gym', ['registry.corp.example/evals/'])).toBeUndefined();
  });

  it('reads the repository of a fully qualified reference, tag and digest left off', () => {
    expect(qualifiedRepository('registry.corp.example:5000/evals/gym:1')).toEqual({ domain: 'registry.corp.example:5000', path: 'evals/gym' });
    expect(qualifiedRepository(`registry.corp.example/evals/gym:1@sha256:${'a'.repeat(64)}`)).toEqual({ domain: 'registry.corp.example', path: 'evals/gym' });
    expect(qualifiedRepository('docker.io/library/busybox')).toEqual({ domain: 'docker.io', path: 'library/busybox' });
    expect(qualifiedRepository('busybox:1')).toBeUndefined();
    expect(qualifiedRepository('registry.corp.example/')).toBeUndefined();
  });
});
