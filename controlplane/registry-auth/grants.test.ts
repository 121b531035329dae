import { describe, expect, it } from 'vitest';
import { accessFor, granted, parseScope, type Identity } from './grants.ts';

const scope = (s: string) => parseScope(s)!;
const cluster: Identity = { kind: 'cluster', clusterId: 'c_1' };
const join: Identity = { kind: 'join', clusterId: 'c_1' };

describe('registry grants', () => {
  it('parses type:name:actions, names with slashes, and refuses malformed scopes', () => {
    expect(parseScope('repository:rlmesh/charts/rlmesh-runtime:pull,push')).toEqual({ type: 'repository', name: 'rlmesh/charts/rlmesh-runtime', actions: ['pull', 'push'] });
    expect(parseScope('repository:rlmesh')).toBeUndefined();
    expect(parseScope(':x:pull')).toBeUndefined();
    expect(parseScope('repository::pull')).toBeUndefined();
  });

  it('the runtime images need a pull credential or, for the runtime image alone, a join token', () => {
    expect(granted({ kind: 'anonymous' }, scope('repository:rlmesh/rlmesh-runtime:pull'))).toEqual([]);
    expect(granted(join, scope('repository:rlmesh/rlmesh-runtime:pull'))).toEqual(['pull']);
    expect(granted(join, scope('repository:rlmesh/kubectl:pull'))).toEqual([]);
    expect(granted(cluster, scope('repository:rlmesh/kubectl:pull'))).toEqual(['pull']);
    expect(granted(cluster, scope('repository:rlmesh/prometheus:pull'))).toEqual(['pull']);
  });

  it('charts and images outside rlmesh/ are public; only the publisher pushes or lists', () => {
    expect(granted({ kind: 'anonymous' }, scope('repository:rlmesh/charts/rlmesh-runtime:pull'))).toEqual(['pull']);
    expect(granted({ kind: 'anonymous' }, scope('repository:rlmesh-test/evaluation:pull,push'))).toEqual(['pull']);
    expect(granted(cluster, scope('repository:rlmesh/rlmesh-runtime:pull,push'))).toEqual(['pull']);
    expect(granted(join, scope('repository:rlmesh/charts/rlmesh-runtime:push'))).toEqual([]);
    expect(granted(cluster, scope('registry:catalog:*'))).toEqual([]);
    expect(granted({ kind: 'publisher' }, scope('repository:rlmesh/rlmesh-runtime:pull,push'))).toEqual(['pull', 'push']);
    expect(granted({ kind: 'publisher' }, scope('registry:catalog:*'))).toEqual(['*']);
  });

  it('a token lists only what was granted', () => {
    expect(accessFor(join, [scope('repository:rlmesh/rlmesh-runtime:pull'), scope('repository:rlmesh/kubectl:pull')])).toEqual([
      { type: 'repository', name: 'rlmesh/rlmesh-runtime', actions: ['pull'] },
    ]);
  });
});
