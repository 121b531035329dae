// What each caller of the platform registry may do with a repository. The
// platform protects its own images (everything under rlmesh/) except the charts,
// which are public: a cluster pulls them with its pull credential, and a join
// token pulls the runtime image alone, so the agent's pod can start before the
// cluster has any credential of its own. Images outside rlmesh/ (the tests'
// evaluation, pause and CoreDNS images) stand for public images and need none.

export type Identity =
  | { kind: 'anonymous' }
  /** the release pipeline: pushes */
  | { kind: 'publisher' }
  /** a cluster's pull credential (user name = cluster id) */
  | { kind: 'cluster'; clusterId: string }
  /** a join token not yet redeemed */
  | { kind: 'join'; clusterId: string };

export type Scope = { type: string; name: string; actions: string[] };
export type Access = Scope;

/** The image a join token may pull: the one the agent's pod runs. */
export const JOIN_REPOSITORIES = ['rlmesh/rlmesh-runtime'];

export const isProtected = (repository: string): boolean => repository.startsWith('rlmesh/') && !repository.startsWith('rlmesh/charts/');

/** `repository:rlmesh/rlmesh-runtime:pull,push` → its parts; undefined for a malformed scope. */
export function parseScope(s: string): Scope | undefined {
  const first = s.indexOf(':');
  const last = s.lastIndexOf(':');
  if (first <= 0 || last === first) return undefined;
  const name = s.slice(first + 1, last);
  const actions = s.slice(last + 1).split(',').filter(Boolean);
  return name ? { type: s.slice(0, first), name, actions } : undefined;
}

/** The actions of `scope` that `who` is granted; empty when none. */
export function granted(who: Identity, scope: Scope): string[] {
  if (who.kind === 'publisher') return scope.actions;
  if (scope.type !== 'repository') return [];
  const pull = scope.actions.filter((a) => a === 'pull');
  switch (who.kind) {
    case 'cluster':
      return pull;
    case 'join':
      return !isProtected(scope.name) || JOIN_REPOSITORIES.includes(scope.name) ? pull : [];
    case 'anonymous':
      return isProtected(scope.name) ? [] : pull;
  }
}

/** The access list a token carries: every requested scope with what is granted of it. */
export function accessFor(who: Identity, scopes: Scope[]): Access[] {
  return scopes.map((s) => ({ ...s, actions: granted(who, s) })).filter((s) => s.actions.length > 0);
}
