import { describe, expect, it } from 'vitest';
import { pullSecretsFor } from './pull-secrets.ts';

describe('pullSecretsFor: the operator\'s pull Secrets an image gets', () => {
  const secrets = [
    { name: 'evals-pull', registries: ['registry.corp.example/evals/'] },
    { name: 'corp-pull', registries: ['registry.corp.example/'] },
    { name: 'hub-pull', registries: ['index.docker.io/corp/'] },
    { name: 'port-pull', registries: ['registry.corp.example:5000/evals/'] },
  ];
  it.each([
    ['registry.corp.example/evals/gym:1', ['evals-pull', 'corp-pull']],
    [`registry.corp.example/evals/team/gym@sha256:${'a'.repeat(64)}`, ['evals-pull', 'corp-pull']],
    ['registry.corp.example/evals-evil/gym:1', ['corp-pull']],
    ['registry.corp.example/evals:1', ['corp-pull']],
    ['Registry.Corp.Example/evals/gym', ['evals-pull', 'corp-pull']],
    ['registry.corp.example:5000/evals/gym:1', ['port-pull']],
    ['registry.corp.example:5000/other/gym:1', []],
    ['registry.corp.example.evil.example/evals/gym', []],
    ['docker.io/corp/gym:1', ['hub-pull']],
    ['docker.io/library/busybox', []],
    ['registry.rlmesh.dev/envs/gym:1', []],
    ['img:1', []],
  ])('%s gets %j', (image, names) => {
    expect(pullSecretsFor(image, secrets)).toEqual(names);
  });
});
