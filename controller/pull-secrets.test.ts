import { describe, expect, it } from 'vitest';
import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { PULL_SECRET_RECHECK_MS, PullSecretCheck, pullSecretsFor } from './pull-secrets.ts';

/** The API's answers to GET secret, by name: a Secret, or an HTTP status to fail with. */
function api(answers: Record<string, V1Secret | number>) {
  const reads: string[] = [];
  const core = {
    readNamespacedSecret: async ({ name, namespace }: { name: string; namespace: string }) => {
      reads.push(`${namespace}/${name}`);
      const a = answers[name];
      if (typeof a === 'number' || a === undefined) throw Object.assign(new Error(`HTTP ${a ?? 404}`), { code: a ?? 404 });
      return a;
    },
  } as unknown as CoreV1Api;
  return { core, reads };
}
const docker = (name: string): V1Secret => ({ metadata: { name, namespace: 'rlmesh-runs' }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': 'e30=' } });

describe('PullSecretCheck', () => {
  it('passes when every named Secret is a dockerconfigjson, and asks nothing without names', async () => {
    const { core, reads } = api({ a: docker('a'), b: docker('b') });
    expect(await new PullSecretCheck({ core, namespace: 'rlmesh-runs' }).check(['a', 'b'])).toEqual({ ok: true });
    expect(reads).toEqual(['rlmesh-runs/a', 'rlmesh-runs/b']);
    const none = api({});
    expect(await new PullSecretCheck({ core: none.core, namespace: 'rlmesh-runs' }).check([])).toEqual({ ok: true });
    expect(none.reads).toEqual([]);
  });

  it('names a missing Secret, the value and the command that creates it', async () => {
    const { core } = api({ a: docker('a') });
    const v = await new PullSecretCheck({ core, namespace: 'rlmesh-runs' }).check(['a', 'corp-pull']);
    expect(v.ok).toBe(false);
    expect(!v.ok && v.message).toMatch(/^Secret rlmesh-runs\/corp-pull, named in the chart value evaluations.imagePullSecrets, does not exist/);
    expect(!v.ok && v.message).toContain('kubectl -n rlmesh-runs create secret docker-registry corp-pull');
    expect(!v.ok && v.message).not.toContain('rlmesh-runs/a');
  });

  it('names a Secret of another type, and never its data', async () => {
    const { core } = api({ corp: { metadata: { name: 'corp' }, type: 'Opaque', data: { password: 'c2VjcmV0' } } });
    const v = await new PullSecretCheck({ core, namespace: 'rlmesh-runs' }).check(['corp']);
    expect(!v.ok && v.message).toMatch(/Secret rlmesh-runs\/corp, .* is of type Opaque, not kubernetes.io\/dockerconfigjson/);
    expect(!v.ok && v.message).not.toContain('c2VjcmV0');
  });

  it("says when the controller's Role does not let it read the Secret", async () => {
    const { core } = api({ corp: 403 });
    const v = await new PullSecretCheck({ core, namespace: 'rlmesh-runs' }).check(['corp']);
    expect(!v.ok && v.message).toMatch(/may not read Secret rlmesh-runs\/corp.*upgrade the release/);
  });

  it('asks again only after PULL_SECRET_RECHECK_MS, so a fix is seen', async () => {
    const answers: Record<string, V1Secret | number> = {};
    const { core, reads } = api(answers);
    let now = 1_000;
    const check = new PullSecretCheck({ core, namespace: 'rlmesh-runs', now: () => now });
    expect((await check.check(['corp'])).ok).toBe(false);
    answers.corp = docker('corp');
    expect((await check.check(['corp'])).ok).toBe(false);
    expect(reads).toHaveLength(1);
    now += PULL_SECRET_RECHECK_MS;
    expect(await check.check(['corp'])).toEqual({ ok: true });
    expect(reads).toHaveLength(2);
  });
});

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
