// Which registry an evaluation image comes from, and whether this cluster runs
// images from it: the platform's registry (controlPlane.registryHost) and the
// ones the operator lists (evaluations.extraRegistries). Anything else (a public
// image, one already on a node, one of the customer's own private registries
// that the nodes can pull from) is refused before an RLMeshEvaluation exists.

/** The registry host of an image reference, as container runtimes resolve it (no host: Docker Hub). */
export function imageRegistry(image: string): string {
  const slash = image.indexOf('/');
  if (slash < 0) return 'docker.io';
  const first = image.slice(0, slash);
  return first.includes('.') || first.includes(':') || first === 'localhost' ? first.toLowerCase() : 'docker.io';
}

/** Why `image` may not run here, or undefined when its registry is one of `registries`. */
export function imageRefusal(image: string, registries: readonly string[]): string | undefined {
  if (image.trim() === '') return 'the assignment names no image';
  const registry = imageRegistry(image);
  if (registries.includes(registry)) return undefined;
  return `image ${image} comes from ${registry}, and this cluster runs evaluation images only from ${registries.join(', ')}: ask the platform to use its registry, or add ${registry} to the chart value evaluations.extraRegistries`;
}
