// The operator's pull Secrets for private registries (chart value
// evaluations.imagePullSecrets), each for the repository prefixes it names: a
// pod gets only those its image lies under, so the platform, which chooses the
// images, cannot have the kubelet present a credential for anything else. The
// controller names them and never reads them (no pod of the product may read
// the operator's registry logins): the kubelet does, and `rlmesh preflight`,
// with the installer's rights, checks that they exist and are dockerconfigjson.
import { matchingPrefix, qualifiedRepository } from '../lib/image-prefix.ts';

/** A pull Secret of evaluations.imagePullSecrets and the repository prefixes it is for. */
export type MappedPullSecret = { name: string; registries: readonly string[] };

/** The names of the Secrets `image` (a fully qualified reference, as the agent writes spec.image) lies under, in their order. */
export function pullSecretsFor(image: string, secrets: readonly MappedPullSecret[]): string[] {
  const repo = qualifiedRepository(image);
  if (!repo) return [];
  return secrets.filter((s) => matchingPrefix(repo.domain, repo.path, s.registries) !== undefined).map((s) => s.name);
}
