// Zod building blocks both charts' values schemas share (rlmesh-runtime and
// rlmesh-observability): names, quantities, digest-pinned images, requests and
// limits, and the scheduling knobs every pod has.
import { z } from 'zod';

export const K8S_NAME = '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*';
const QUANTITY = /^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;

export type Image = { repository: string; tag: string; digest: string };
export type Res = { cpu: string; memory: string };

export const secretName = z
  .string()
  .max(253)
  .regex(new RegExp(`^(${K8S_NAME})?$`), { message: 'must be a Secret name (lowercase DNS subdomain) or empty' });
export const quantity = (what: string) =>
  z.string().regex(QUANTITY, { message: `must be a Kubernetes quantity such as 100m, 512Mi or 10Gi (${what})` });
export const port = z.number().int().min(1).max(65535);
export const stringMap = (what: string) => z.record(z.string(), z.string()).default({}).describe(what);

export const imageSchema = (d: Image, what: string) =>
  z
    .object({
      repository: z
        .string()
        .regex(/^[a-z0-9]([a-z0-9.:_/-]*[a-z0-9])?$/, { message: 'must be an image repository without tag or digest' })
        .default(d.repository)
        .describe(`Image repository of ${what}.`),
      tag: z
        .string()
        .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/)
        .default(d.tag)
        .describe('Version tag, for humans only: the digest decides what runs.'),
      digest: z
        .string()
        .regex(/^sha256:[a-f0-9]{64}$/, { message: 'must be a sha256 digest (sha256:<64 hex>): images are pinned by digest' })
        .default(d.digest)
        .describe('Image digest (sha256:…); the image is always pulled by digest.'),
      pullPolicy: z.enum(['IfNotPresent', 'Always', 'Never']).default('IfNotPresent').describe('Kubernetes imagePullPolicy.'),
    })
    .strict()
    .default({ ...d, pullPolicy: 'IfNotPresent' })
    .describe(`Image of ${what}, pinned by digest.`);

const cpuMem = (d: Res, kind: string) =>
  z
    .object({
      cpu: quantity('CPU').default(d.cpu).describe(`CPU ${kind}.`),
      memory: quantity('memory').default(d.memory).describe(`Memory ${kind}.`),
    })
    .strict()
    .default(d);
export const resourcesSchema = (d: { requests: Res; limits: Res }) =>
  z
    .object({ requests: cpuMem(d.requests, 'request'), limits: cpuMem(d.limits, 'limit') })
    .strict()
    .default(d)
    .describe('Requests and limits; every pod has both.');

const toleration = z
  .object({
    key: z.string().optional(),
    operator: z.enum(['Exists', 'Equal']).optional(),
    value: z.string().optional(),
    effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
    tolerationSeconds: z.number().int().optional(),
  })
  .strict();
const affinity = z
  .object({
    nodeAffinity: z.record(z.string(), z.unknown()).optional(),
    podAffinity: z.record(z.string(), z.unknown()).optional(),
    podAntiAffinity: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

/** Scheduling and metadata knobs every component has. */
export const podSettings = (what: string, image: Image, resources: { requests: Res; limits: Res }) => ({
  image: imageSchema(image, what),
  resources: resourcesSchema(resources),
  nodeSelector: stringMap(`Node labels ${what} pods must match.`),
  tolerations: z.array(toleration).default([]).describe(`Tolerations of ${what} pods.`),
  affinity: affinity.default({}).describe(`Affinity of ${what} pods.`),
  priorityClassName: z.string().default('').describe(`PriorityClass of ${what} pods (empty: none).`),
  podAnnotations: stringMap(`Extra annotations on ${what} pods.`),
});
