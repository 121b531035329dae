// Which registry an evaluation image comes from, and whether this cluster runs
// images from it: the platform's registry (controlPlane.registryHost, all of it)
// and the repository prefixes the operator lists (evaluations.extraRegistries,
// lib/image-prefix.ts). Anything else (a public image, one already on a node,
// another repository of the customer's own registries that the nodes or a pull
// Secret can reach) is refused before an RLMeshEvaluation exists, and so is a
// reference the kubelet would refuse as InvalidImageName.
import { matchingPrefix, normalPrefix, registryKey } from '../lib/image-prefix.ts';
import { isBareImageId, parseImageReference, referenceString } from './image-reference.ts';

export type ImageAdmission = { image: string } | { reason: 'InvalidImageName' | 'ImageNotAllowed'; refusal: string };

/** The registry an image reference pulls from, as the kubelet and container runtimes read it, or undefined when they would refuse it. */
export function imageRegistry(image: string): string | undefined {
  const ref = parseImageReference(image);
  return 'problem' in ref ? undefined : registryKey(ref.domain);
}

/**
 * The reference an evaluation runs, or why it may not run here. It runs the
 * fully qualified form (`docker.io/library/busybox` for `busybox`): the kubelet
 * and containerd read both alike, but CRI-O resolves a short name through the
 * node's unqualified-search-registries, which could pull it from a registry
 * other than the one checked here.
 */
export function admitImage(image: string, prefixes: readonly string[]): ImageAdmission {
  if (image.trim() === '') return { reason: 'InvalidImageName', refusal: 'the assignment names no image' };
  if (isBareImageId(image)) {
    return {
      reason: 'InvalidImageName',
      refusal: `image ${quoted(image)} is a bare image ID, which a container runtime may resolve to whatever image the node already holds, so no evaluation was created: ask the platform to send a repository reference pinned by digest, such as registry.example.com/team/env@sha256:<64 hex digits>`,
    };
  }
  const ref = parseImageReference(image);
  if ('problem' in ref) {
    return {
      reason: 'InvalidImageName',
      refusal: `image ${quoted(image)} is not a valid image reference: ${ref.problem}. The kubelet would refuse it too (InvalidImageName), so no evaluation was created: ask the platform to send a reference such as registry.example.com/team/env:1.0 or registry.example.com/team/env@sha256:<64 hex digits>, its repository path in lower case`,
    };
  }
  if (matchingPrefix(ref.domain, ref.path, prefixes) !== undefined) return { image: referenceString(ref) };
  const registry = registryKey(ref.domain);
  const hostByCase = !(ref.domain.includes('.') || ref.domain.includes(':') || ref.domain === 'localhost');
  const repository = `${registry}/${ref.path}`;
  const parent = repository.slice(0, repository.lastIndexOf('/') + 1);
  return {
    reason: 'ImageNotAllowed',
    refusal: `image ${image} is the repository ${repository}${hostByCase ? ' (a first component with an upper-case letter names a registry host, as container runtimes read it)' : ''}, and this cluster runs evaluation images only from under ${prefixes.map(normalPrefix).join(', ')}: ask the platform to use its registry, or, if you trust every repository under it, add the prefix ${parent} to the chart value evaluations.extraRegistries`,
  };
}

/** The image as JSON (whitespace visible), cut short so a huge value cannot swamp the message. */
function quoted(image: string): string {
  const max = 200;
  return JSON.stringify(image.length > max ? `${image.slice(0, max)}…` : image);
}
