// What each caller of the platform registry may do with a repository.
//
// - The publisher (the release pipeline) may do anything.
// - Public repositories (`--public`, default the charts under rlmesh/charts/)
//   may be pulled by anyone, without credentials.
// - A cluster's pull credential pulls the runtime repositories (rlmesh/…) and
//   the evaluation repositories (`--evaluation-repository`, default the
//   namespace rlmesh-evaluations/): the images the platform runs on clusters.
//   The reference has no per-cluster repository: every cluster may pull every
//   evaluation image the platform publishes, and nothing else.
// - A join token not yet redeemed pulls the runtime image and the CRD hook's
//   kubectl alone, so the agent's pod can start (and an upgrade before the first
//   join can run its hook) before the cluster has any credential of its own.
// - An anonymous client pulls the public repositories and nothing else.
//
// An entry ending in "/" names a namespace (every repository under it); any
// other entry names one repository exactly.

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

export type Policy = {
  /** pulled by anyone, without credentials */
  publicRepositories: string[];
  /** pulled by every cluster's pull credential, beside the runtime repositories */
  evaluationRepositories: string[];
};

export const DEFAULT_POLICY: Policy = { publicRepositories: ['rlmesh/charts/'], evaluationRepositories: ['rlmesh-evaluations/'] };

/** The images a join token may pull: the one the agent's pod runs, and the CRD upgrade hook's. */
export const JOIN_REPOSITORIES = ['rlmesh/rlmesh-runtime', 'rlmesh/kubectl'];

/** Whether `repository` is one of `entries` (an entry ending in "/" is a namespace). */
export const matches = (repository: string, entries: string[]): boolean => entries.some((e) => (e.endsWith('/') ? repository.startsWith(e) : repository === e));

/** The runtime repositories: what the product itself runs (agent, controller, proxy, kubectl hook, Prometheus). */
export const isRuntime = (repository: string): boolean => repository.startsWith('rlmesh/') && !repository.startsWith('rlmesh/charts/');

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
export function granted(who: Identity, scope: Scope, policy: Policy = DEFAULT_POLICY): string[] {
  if (who.kind === 'publisher') return scope.actions;
  if (scope.type !== 'repository') return [];
  const pull = scope.actions.filter((a) => a === 'pull');
  if (matches(scope.name, policy.publicRepositories)) return pull;
  switch (who.kind) {
    case 'cluster':
      return isRuntime(scope.name) || matches(scope.name, policy.evaluationRepositories) ? pull : [];
    case 'join':
      return JOIN_REPOSITORIES.includes(scope.name) ? pull : [];
    case 'anonymous':
      return [];
  }
}

/** The access list a token carries: every requested scope with what is granted of it. */
export function accessFor(who: Identity, scopes: Scope[], policy: Policy = DEFAULT_POLICY): Access[] {
  return scopes.map((s) => ({ ...s, actions: granted(who, s, policy) })).filter((s) => s.actions.length > 0);
}

/** A policy from the token service's flags; refuses an empty or malformed entry, saying what is expected. */
export function policyFrom(publicRepositories: string[] | undefined, evaluationRepositories: string[] | undefined): Policy {
  const check = (flag: string, entries: string[]): string[] => {
    for (const e of entries) {
      if (!/^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*\/?$/.test(e)) {
        throw new Error(`--${flag} ${JSON.stringify(e)} is not a repository name (e.g. rlmesh-test/pause) or a namespace ending in "/" (e.g. rlmesh-evaluations/)`);
      }
      if (flag === 'public' && (isRuntime(e) || e === 'rlmesh/')) throw new Error(`--public ${e} would make the runtime images public; they need a pull credential or a join token`);
    }
    return entries;
  };
  return {
    publicRepositories: check('public', publicRepositories ?? DEFAULT_POLICY.publicRepositories),
    evaluationRepositories: check('evaluation-repository', evaluationRepositories ?? DEFAULT_POLICY.evaluationRepositories),
  };
}
