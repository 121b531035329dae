// Which registry an evaluation image comes from, and whether this cluster runs
// images from it: the platform's registry (controlPlane.registryHost) and the
// ones the operator lists (evaluations.extraRegistries). Anything else (a public
// image, one already on a node, one of the customer's own private registries
// that the nodes can pull from) is refused before an RLMeshEvaluation exists,
// and so is a reference the kubelet would refuse as InvalidImageName.
import { isBareImageId, parseImageReference, referenceString } from './image-reference.ts';

export type ImageAdmission = { image: string } | { reason: 'InvalidImageName' | 'ImageNotAllowed'; refusal: string };

/** A registry host as compared: DNS is case-insensitive and index.docker.io is Docker Hub's old name. The port stays. */
export function registryKey(host: string): string {
  const h = host.toLowerCase();
  return h === 'index.docker.io' ? 'docker.io' : h;
}

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
export function admitImage(image: string, registries: readonly string[]): ImageAdmission {
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
  const registry = registryKey(ref.domain);
  if (registries.some((r) => registryKey(r) === registry)) return { image: referenceString(ref) };
  const hostByCase = !(ref.domain.includes('.') || ref.domain.includes(':') || ref.domain === 'localhost');
  return {
    reason: 'ImageNotAllowed',
    refusal: `image ${image} comes from ${registry}${hostByCase ? ' (a first component with an upper-case letter names a registry host, as container runtimes read it)' : ''}, and this cluster runs evaluation images only from ${registries.join(', ')}: ask the platform to use its registry, or add ${registry} to the chart value evaluations.extraRegistries`,
  };
}

/** The image as JSON (whitespace visible), cut short so a huge value cannot swamp the message. */
function quoted(image: string): string {
  const max = 200;
  return JSON.stringify(image.length > max ? `${image.slice(0, max)}…` : image);
}
