// The operator's pull Secrets for private registries (chart value
// evaluations.imagePullSecrets), each for the repository prefixes it names: a
// pod gets only those its image lies under, so the platform, which chooses the
// images, cannot have the kubelet present a credential for anything else. The
// kubelet pulls without a Secret that is missing or not a dockerconfigjson, and
// the pull then fails as anonymous with no word of the Secret; so before it
// creates a pod, the controller checks the ones that pod gets (it may get
// exactly these Secrets by name), and the evaluation waits with a reason that
// names the Secret and the fix. Only the type is looked at; nothing of the
// Secret's data is kept or logged.
import type { CoreV1Api } from '@kubernetes/client-node';
import { errorMessage, statusCode } from '../lib/error-fields.ts';
import { matchingPrefix, qualifiedRepository } from '../lib/image-prefix.ts';

/** A pull Secret of evaluations.imagePullSecrets and the repository prefixes it is for. */
export type MappedPullSecret = { name: string; registries: readonly string[] };

/** The names of the Secrets `image` (a fully qualified reference, as the agent writes spec.image) lies under, in their order. */
export function pullSecretsFor(image: string, secrets: readonly MappedPullSecret[]): string[] {
  const repo = qualifiedRepository(image);
  if (!repo) return [];
  return secrets.filter((s) => matchingPrefix(repo.domain, repo.path, s.registries) !== undefined).map((s) => s.name);
}

export const PULL_SECRET_REASON = 'PullSecretInvalid';
export const DOCKER_CONFIG_JSON = 'kubernetes.io/dockerconfigjson';
/** How long one answer stands: many waiting evaluations cost one read per Secret, and a fix is seen soon. */
export const PULL_SECRET_RECHECK_MS = 10_000;

export type PullSecretVerdict = { ok: true } | { ok: false; message: string };

const create = (ns: string, name: string) =>
  `kubectl -n ${ns} create secret docker-registry ${name} --docker-server=<registry> --docker-username=<user> --docker-password=<password>`;

/** What is wrong with one Secret, or undefined when the kubelet can pull with it. */
export async function pullSecretProblem(core: CoreV1Api, namespace: string, name: string): Promise<string | undefined> {
  const named = `Secret ${namespace}/${name}, named in the chart value evaluations.imagePullSecrets,`;
  try {
    const secret = await core.readNamespacedSecret({ name, namespace });
    if (secret.type === DOCKER_CONFIG_JSON) return undefined;
    return `${named} is of type ${secret.type ?? 'Opaque'}, not ${DOCKER_CONFIG_JSON}, so the kubelet cannot pull with it and would pull from its registry without credentials: recreate it with ${create(namespace, name)}; the evaluation starts once it is fixed`;
  } catch (err) {
    const code = statusCode(err);
    if (code === 404) {
      return `${named} does not exist, so the kubelet would pull from its registry without credentials: create it with ${create(namespace, name)} (or remove it from evaluations.imagePullSecrets); the evaluation starts once it exists`;
    }
    if (code === 403) {
      return `the controller may not read ${named} (${errorMessage(err)}): the chart's Role grants get on exactly the Secrets listed there; upgrade the release so the Role and the runtime config name the same Secrets`;
    }
    return `the controller cannot check ${named} (${errorMessage(err)}); it tries again`;
  }
}

/** Checks the operator's pull Secrets a pod gets, remembering each answer for PULL_SECRET_RECHECK_MS. */
export class PullSecretCheck {
  readonly #core: CoreV1Api;
  readonly #namespace: string;
  readonly #now: () => number;
  readonly #last = new Map<string, { at: number; problem: Promise<string | undefined> }>();

  constructor(o: { core: CoreV1Api; namespace: string; now?: () => number }) {
    this.#core = o.core;
    this.#namespace = o.namespace;
    this.#now = o.now ?? Date.now;
  }

  async check(names: readonly string[]): Promise<PullSecretVerdict> {
    const problems = (await Promise.all(names.map((n) => this.#problem(n)))).filter((p): p is string => p !== undefined);
    return problems.length === 0 ? { ok: true } : { ok: false, message: problems.join('; ') };
  }

  #problem(name: string): Promise<string | undefined> {
    const now = this.#now();
    const last = this.#last.get(name);
    if (last && now - last.at < PULL_SECRET_RECHECK_MS) return last.problem;
    const problem = pullSecretProblem(this.#core, this.#namespace, name);
    this.#last.set(name, { at: now, problem });
    return problem;
  }
}
