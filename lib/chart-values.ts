// Zod building blocks both charts' values schemas share (rlmesh-runtime and
// rlmesh-observability): names, quantities, images (by digest when one is set), requests and
// limits, and the scheduling knobs every pod has.
import { z } from 'zod';
import { CHART_QUANTITY } from './quantity.ts';
import { NAMES } from './fixed-names.ts';
import { HOST_LABELS } from './outbound-proxy-values.ts';
import { refuse, type Refusal } from './refusals.ts';

export const K8S_NAME = '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*';

export type Image = { repository: string; tag: string; digest: string };
export type Res = { cpu: string; memory: string };

export const secretName = z
  .string()
  .max(253)
  .regex(new RegExp(`^(${K8S_NAME})?$`), { message: 'must be a Secret name (lowercase DNS subdomain) or empty' });
export const quantity = (what: string) =>
  z.string().regex(CHART_QUANTITY, { message: `must be a Kubernetes quantity such as 100m, 512Mi or 10Gi (${what})` });
export const port = z.number().int().min(1).max(65535);
export const stringMap = (what: string) => z.record(z.string(), z.string()).default({}).describe(what);

/** What an image digest must look like when one is set. */
export const DIGEST = /^sha256:[a-f0-9]{64}$/;
export const DIGEST_MESSAGE = 'must be empty or sha256: followed by 64 lowercase hex digits (the digest your registry reports for the image)';

/**
 * The reference a pod runs: repository@digest when a digest is set (the tag is then
 * ignored, as cert-manager's chart does), repository:tag when not, with defaultTag
 * (the chart's appVersion for the runtime image) standing in for an empty tag.
 * The repository is relocated first (relocatedRepository). The charts' rlmesh.image and obs.image
 * helpers render the same.
 */
export function imageReference(image: Image, defaultTag = '', relocation: ImageRelocation = {}): string {
  const repository = image.repository === '' ? '' : relocatedRepository(image.repository, relocation);
  if (image.digest !== '') {
    if (!DIGEST.test(image.digest)) throw new Error(`image digest ${JSON.stringify(image.digest)} ${DIGEST_MESSAGE}`);
    return `${repository}@${image.digest}`;
  }
  const tag = image.tag || defaultTag;
  if (repository === '' || tag === '') throw new Error(`image ${JSON.stringify(image)} names no repository, or neither a tag nor a digest`);
  return `${repository}:${tag}`;
}

/** global.imageRegistry: empty, or host[:port] with an optional path, as an image reference begins. */
export const IMAGE_REGISTRY = new RegExp(`^(${HOST_LABELS}(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*)?$`);
export const imageRegistrySchema = z
  .string()
  .max(200)
  .regex(IMAGE_REGISTRY, { message: 'must be a registry host, host:port or host/path (mirror.example.com, mirror.example.com:5000, mirror.example.com/rlmesh), without a scheme' })
  .default('')
  .describe(
    `Mirror every image of the chart is pulled from instead of its own registry (an air-gapped copy or a pull-through cache): the repository's path and the digest are kept, so ${NAMES.platformRegistry}/rlmesh/rlmesh-runtime@sha256:… is pulled as <imageRegistry>/rlmesh/rlmesh-runtime@sha256:…. It applies to every pod the chart, the controller (cache filler, NetworkPolicy probe) and preflight create; evaluation images are the platform's and keep their registry. Give the mirror's pull Secret in imagePullSecrets. Empty: each image's own registry.`,
  );

/** Where an image is pulled from instead of the repository it names (the charts' rlmesh.imageRepository and obs.imageRepository render the same). */
export type ImageRelocation = {
  /** global.imageRegistry: a mirror (host[:port][/path]) that every image of the chart is pulled from, digests kept */
  mirror?: string;
  /** controlPlane.registryHost: where the images of the platform's registry (NAMES.platformRegistry) come from, e.g. a staging registry */
  registryHost?: string;
};

/**
 * A repository's registry and path as container runtimes read them: the first component is the
 * registry when it has a dot or a port or is localhost; otherwise the image is Docker Hub's
 * (docker.io, with library/ before a one-component name).
 */
export function splitRepository(repository: string): { registry: string; path: string } {
  const slash = repository.indexOf('/');
  const first = slash < 0 ? '' : repository.slice(0, slash);
  if (first !== '' && (first.includes('.') || first.includes(':') || first === 'localhost')) return { registry: first, path: repository.slice(slash + 1) };
  return { registry: 'docker.io', path: slash < 0 ? `library/${repository}` : repository };
}

/**
 * The repository a pod pulls `repository` from: under the mirror when one is set (its path kept,
 * so a pull-through cache or a copy made with `skopeo copy --all` serves it); else, for an image of
 * the platform's registry, under controlPlane.registryHost; else as named.
 */
export function relocatedRepository(repository: string, r: ImageRelocation): string {
  const { registry, path } = splitRepository(repository);
  if (r.mirror) return `${r.mirror.replace(/\/+$/, '')}/${path}`;
  if (r.registryHost && registry === NAMES.platformRegistry) return `${r.registryHost}/${path}`;
  return repository;
}

/** Every image block (a map with repository, tag and digest) in a values object, by its dotted path. */
export function imageBlocks(values: unknown, path: string[] = []): { path: string; image: Image }[] {
  if (values === null || typeof values !== 'object' || Array.isArray(values)) return [];
  const o = values as Record<string, unknown>;
  if (['repository', 'tag', 'digest'].every((k) => typeof o[k] === 'string')) return [{ path: path.join('.'), image: o as Image }];
  return Object.entries(o).flatMap(([k, v]) => imageBlocks(v, [...path, k]));
}

/**
 * The image rules of both charts (their _validate.tpl apply them with IMAGE_REFUSALS): a digest, when
 * set, is sha256:<64 hex> (values.schema.json checks it too, but `helm install
 * --skip-schema-validation` skips that), and a block without an appVersion stand-in
 * needs a tag or a digest.
 */
export function imageErrors(values: unknown, ownTag: string[]): { path: string; message: string }[] {
  const errors: { path: string; message: string }[] = [];
  for (const { path, image } of imageBlocks(values)) {
    if (image.digest !== '' && !DIGEST.test(image.digest)) errors.push(refuse(IMAGE_REFUSALS.imageDigest, { path, digest: image.digest }));
    if (ownTag.includes(path) && image.tag === '' && image.digest === '') errors.push(refuse(IMAGE_REFUSALS.imageTagMissing, { path }));
  }
  return errors;
}

/** The messages of imageErrors(); both charts' templates include them generated (rlmesh.refusal.*, obs.refusal.*). */
export const IMAGE_REFUSALS = {
  imageDigest: {
    path: '{path}.digest',
    message: '{path}.digest {digest:q} is not an image digest: set sha256: followed by the 64 lowercase hex digits your registry reports for the image, or leave it empty to pull {path}.repository:{path}.tag',
  },
  imageTagMissing: { path: '{path}.tag', message: '{path}.tag and {path}.digest are both empty: set the tag (or the digest) of the image to pull' },
} as const satisfies Record<string, Refusal>;

/**
 * An image block. `d` holds its defaults: no digest (release packaging stamps the
 * digests of the images it pushed, scripts/release/stamp-digests.ts), and a tag
 * unless the chart's appVersion stands in for it (tag ''). An empty repository
 * default means the chart names no image: the user must give one. `pullPolicy` is
 * the block's imagePullPolicy value: fixedPullPolicy (default IfNotPresent) or
 * automaticPullPolicy (default '', chosen by the chart from whether the image is pinned).
 */
export type ImageHelp = { repository?: string; tag?: string; digest?: string };
/** imagePullPolicy as Kubernetes takes it, default IfNotPresent. */
export const fixedPullPolicy = z.enum(['IfNotPresent', 'Always', 'Never']).default('IfNotPresent').describe('Kubernetes imagePullPolicy.');
/**
 * imagePullPolicy, empty for automatic: the chart renders IfNotPresent for an image it
 * pulls by digest and Always for one it pulls by tag (a tag can move; a digest cannot).
 */
export const automaticPullPolicy = z
  .enum(['', 'IfNotPresent', 'Always', 'Never'])
  .default('')
  .describe(
    'Kubernetes imagePullPolicy. Empty (automatic): IfNotPresent when the image is pinned by digest (its own digest, or in a released chart the digest released for its tag), Always when it is pulled by tag (an override by tag, or the unreleased chart of the source repository). Set: used as it is.',
  );
export const imageSchema = <P extends typeof fixedPullPolicy | typeof automaticPullPolicy = typeof fixedPullPolicy>(
  d: Image,
  what: string,
  help: ImageHelp = {},
  pullPolicy: P = fixedPullPolicy as P,
) =>
  z
    .object({
      repository: z
        .string()
        .regex(d.repository === '' ? /^([a-z0-9]([a-z0-9.:_/-]*[a-z0-9])?)?$/ : /^[a-z0-9]([a-z0-9.:_/-]*[a-z0-9])?$/, {
          message: 'must be an image repository (registry host and path) without tag or digest',
        })
        .default(d.repository)
        .describe(help.repository ?? `Image repository of ${what}.`),
      tag: z
        .string()
        .regex(/^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$/, { message: 'must be an image tag (letters, digits, _ . -, at most 128)' })
        .default(d.tag)
        .describe(help.tag ?? (d.tag === '' ? "Image tag, pulled when digest is empty; empty: the chart's appVersion." : 'Image tag, pulled when digest is empty.')),
      digest: z
        .string()
        .regex(/^(sha256:[a-f0-9]{64})?$/, { message: DIGEST_MESSAGE })
        .default(d.digest)
        .describe(
          help.digest ??
            'Image digest (sha256: and 64 hex digits). Set: the image is pulled as repository@digest and the tag is ignored; empty: repository:tag. Empty in the source repository; a released chart carries the digests of the images it was released with.',
        ),
      pullPolicy,
    })
    .strict()
    .default({ ...d, pullPolicy: pullPolicy.parse(undefined) } as never)
    .describe(`Image of ${what}: repository@digest when digest is set, else repository:tag.`);

const cpuMemShape = (d: Res, kind: string) => ({
  cpu: quantity('CPU').default(d.cpu).describe(`CPU ${kind}.`),
  memory: quantity('memory').default(d.memory).describe(`Memory ${kind}.`),
});
const cpuMem = (d: Res, kind: string) => z.object(cpuMemShape(d, kind)).strict().default(d);
export const resourcesSchema = (d: { requests: Res; limits: Res }) =>
  z
    .object({ requests: cpuMem(d.requests, 'request'), limits: cpuMem(d.limits, 'limit') })
    .strict()
    .default(d)
    .describe('Requests and limits; every pod has both.');

/** Requests or limits with ephemeral storage (the container's logs and writable layer, and its pod's emptyDirs). */
export type ResStorage = Res & { 'ephemeral-storage': string };
const cpuMemStorage = (d: ResStorage, kind: string, help: string) =>
  z
    .object({
      ...cpuMemShape(d, kind),
      'ephemeral-storage': quantity('ephemeral storage').default(d['ephemeral-storage']).describe(`Ephemeral-storage ${kind}${help}`),
    })
    .strict()
    .default(d);
/** Requests and limits of CPU, memory and ephemeral storage; `help` ends each ephemeral-storage description. */
export const resourcesWithStorageSchema = (d: { requests: ResStorage; limits: ResStorage }, help: { requests: string; limits: string }) =>
  z
    .object({ requests: cpuMemStorage(d.requests, 'request', help.requests), limits: cpuMemStorage(d.limits, 'limit', help.limits) })
    .strict()
    .default(d)
    .describe('Requests and limits of CPU, memory and ephemeral storage; every container has all three.');

export const tolerationSchema = z
  .object({
    key: z.string().optional(),
    operator: z.enum(['Exists', 'Equal']).optional(),
    value: z.string().optional(),
    effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
    tolerationSeconds: z.number().int().optional(),
  })
  .strict();
export const affinitySchema = z
  .object({
    nodeAffinity: z.record(z.string(), z.unknown()).optional(),
    podAffinity: z.record(z.string(), z.unknown()).optional(),
    podAntiAffinity: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

/** Scheduling and metadata knobs every component has. */
export const podSettings = (what: string, image: Image, resources: { requests: Res; limits: Res }, imageHelp: ImageHelp = {}) => ({
  image: imageSchema(image, what, imageHelp),
  resources: resourcesSchema(resources),
  nodeSelector: stringMap(`Node labels ${what} pods must match.`),
  tolerations: z.array(tolerationSchema).default([]).describe(`Tolerations of ${what} pods.`),
  affinity: affinitySchema.default({}).describe(`Affinity of ${what} pods.`),
  priorityClassName: z.string().default('').describe(`PriorityClass of ${what} pods (empty: none).`),
  podAnnotations: stringMap(`Extra annotations on ${what} pods.`),
});
