import { describe, expect, it } from 'vitest';
import { accessFor, granted, parseScope, policyFrom, type Identity } from './grants.ts';

const scope = (s: string) => parseScope(s)!;
const cluster: Identity = { kind: 'cluster', clusterId: 'c_1' };
const join: Identity = { kind: 'join', clusterId: 'c_1' };
const anonymous: Identity = { kind: 'anonymous' };

describe('registry grants', () => {
  it('parses type:name:actions, names with slashes, and refuses malformed scopes', () => {
    expect(parseScope('repository:rlmesh/charts/rlmesh-runtime:pull,push')).toEqual({ type: 'repository', name: 'rlmesh/charts/rlmesh-runtime', actions: ['pull', 'push'] });
    expect(parseScope('repository:rlmesh')).toBeUndefined();
    expect(parseScope(':x:pull')).toBeUndefined();
    expect(parseScope('repository::pull')).toBeUndefined();
  });

  it('the runtime images need a pull credential or, for the runtime image and the CRD hook\'s kubectl alone, a join token', () => {
    expect(granted(anonymous, scope('repository:rlmesh/rlmesh-runtime:pull'))).toEqual([]);
    expect(granted(join, scope('repository:rlmesh/rlmesh-runtime:pull'))).toEqual(['pull']);
    expect(granted(join, scope('repository:rlmesh/kubectl:pull'))).toEqual(['pull']);
    expect(granted(join, scope('repository:rlmesh/prometheus:pull'))).toEqual([]);
    expect(granted(cluster, scope('repository:rlmesh/kubectl:pull'))).toEqual(['pull']);
    expect(granted(cluster, scope('repository:rlmesh/prometheus:pull'))).toEqual(['pull']);
  });

  it('a pull credential pulls the runtime and evaluation repositories and nothing else', () => {
    expect(granted(cluster, scope('repository:rlmesh-evaluations/suite-a:pull'))).toEqual(['pull']);
    expect(granted(cluster, scope('repository:rlmesh-test/evaluation:pull'))).toEqual([]);
    expect(granted(cluster, scope('repository:library/busybox:pull'))).toEqual([]);
    expect(granted(cluster, scope('repository:rlmesh-evaluationsx/a:pull'))).toEqual([]);
    expect(granted(join, scope('repository:rlmesh-evaluations/suite-a:pull'))).toEqual([]);
    const policy = policyFrom(undefined, ['rlmesh-test/evaluation']);
    expect(granted(cluster, scope('repository:rlmesh-test/evaluation:pull'), policy)).toEqual(['pull']);
    expect(granted(cluster, scope('repository:rlmesh-test/evaluation-other:pull'), policy)).toEqual([]);
    expect(granted(cluster, scope('repository:rlmesh-evaluations/suite-a:pull'), policy)).toEqual([]);
  });

  it('anonymous clients pull the public repositories alone: the charts by default, others only when listed', () => {
    expect(granted(anonymous, scope('repository:rlmesh/charts/rlmesh-runtime:pull'))).toEqual(['pull']);
    expect(granted(anonymous, scope('repository:rlmesh-test/evaluation:pull,push'))).toEqual([]);
    expect(granted(anonymous, scope('repository:rlmesh-evaluations/suite-a:pull'))).toEqual([]);
    expect(granted(anonymous, scope('repository:library/busybox:pull'))).toEqual([]);
    const policy = policyFrom(['rlmesh/charts/', 'rlmesh-test/pause'], undefined);
    expect(granted(anonymous, scope('repository:rlmesh-test/pause:pull,push'), policy)).toEqual(['pull']);
    expect(granted(anonymous, scope('repository:rlmesh-test/coredns:pull'), policy)).toEqual([]);
    expect(granted(join, scope('repository:rlmesh-test/pause:pull'), policy)).toEqual(['pull']);
  });

  it('only the publisher pushes or lists', () => {
    expect(granted(cluster, scope('repository:rlmesh/rlmesh-runtime:pull,push'))).toEqual(['pull']);
    expect(granted(join, scope('repository:rlmesh/charts/rlmesh-runtime:push'))).toEqual([]);
    expect(granted(cluster, scope('repository:rlmesh-evaluations/a:push'))).toEqual([]);
    expect(granted(cluster, scope('registry:catalog:*'))).toEqual([]);
    expect(granted({ kind: 'publisher' }, scope('repository:rlmesh/rlmesh-runtime:pull,push'))).toEqual(['pull', 'push']);
    expect(granted({ kind: 'publisher' }, scope('registry:catalog:*'))).toEqual(['*']);
  });

  it('refuses a policy that would make the runtime images public, or a malformed entry', () => {
    expect(() => policyFrom(['rlmesh/'], undefined)).toThrow(/would make the runtime images public/);
    expect(() => policyFrom(['rlmesh/kubectl'], undefined)).toThrow(/would make the runtime images public/);
    expect(() => policyFrom(undefined, ['Not A Repo'])).toThrow(/--evaluation-repository "Not A Repo" is not a repository name/);
    expect(policyFrom(undefined, undefined)).toEqual({ publicRepositories: ['rlmesh/charts/'], evaluationRepositories: ['rlmesh-evaluations/'] });
  });

  it('a token lists only what was granted', () => {
    expect(accessFor(join, [scope('repository:rlmesh/rlmesh-runtime:pull'), scope('repository:rlmesh/prometheus:pull')])).toEqual([
      { type: 'repository', name: 'rlmesh/rlmesh-runtime', actions: ['pull'] },
    ]);
  });
});
