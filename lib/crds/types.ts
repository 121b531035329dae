// The custom resources of group rlmesh.dev, as zod schemas: the single source of
// truth. scripts/generators/crds.ts turns them into the CRD YAML (crds/ and the
// chart's crds/), so every description here is what `kubectl explain` prints.
// The agent creates RLMeshEvaluation objects; the controller reconciles them
// into pods and keeps the RLMeshCache filled and within bounds.
import { z } from 'zod';
import { NAMES } from '../fixed-names.ts';

export const GROUP = 'rlmesh.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export const EVALUATION = { kind: 'RLMeshEvaluation', plural: 'rlmeshevaluations', singular: 'rlmeshevaluation', shortNames: ['rle'] } as const;
export const CACHE = { kind: 'RLMeshCache', plural: 'rlmeshcaches', singular: 'rlmeshcache', shortNames: ['rlc'] } as const;

// Kubernetes' own resource.Quantity grammar, so a bad value is refused at admission.
const QUANTITY = /^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/;
const SHA256 = /^[a-f0-9]{64}$/;
// An artifact name becomes a file name under /artifacts, so it is one path segment.
const ARTIFACT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const quantity = (what: string) =>
  z.string().regex(QUANTITY, { message: `${what} must be a Kubernetes quantity such as 500m, 2 or 4Gi` });

export const gpuVendorSchema = z.enum(['nvidia', 'amd']);
export type GpuVendor = z.infer<typeof gpuVendorSchema>;

export const envVarSchema = z
  .object({
    name: z.string().min(1).describe('Name of the environment variable in the evaluation container.'),
    value: z.string().default('').describe('Value of the environment variable.'),
  })
  .strict()
  .describe('One environment variable set in the evaluation container.');

export const secretRefSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .describe(
        'Name of the evaluation\'s entry (<evaluation>-sources) in the artifact-sources Secrets (rlmesh-artifact-sources-*) the agent writes in the evaluation\'s namespace and removes once it has finished, with keys accessKeyId, secretAccessKey and (for temporary credentials) sessionToken. The kubelet projects those Secrets into the cache filler, which holds no Secret rights.',
      ),
  })
  .strict()
  .describe('Reference to the entry holding the temporary S3 credentials the assignment carried; credentials are never stored in the evaluation itself.');

export const urlSecretRefSchema = z
  .object({
    name: z.string().min(1).describe('Name of the evaluation\'s entry (<evaluation>-sources) in the artifact-sources Secrets (rlmesh-artifact-sources-*) the agent writes in the evaluation\'s namespace, which the kubelet projects into the cache filler.'),
    key: z
      .string()
      .regex(/^[-._a-zA-Z0-9]+$/, { message: 'key must be a Secret key: letters, digits, ".", "_" or "-"' })
      .describe('Key in that entry whose value is the presigned https:// URL.'),
  })
  .strict()
  .describe('Reference to the key holding the presigned HTTPS URL the assignment carried. A presigned URL is a credential, so it is never stored in the evaluation itself.');

/** An environment variable name that is also a Secret key (the pod reads it with secretKeyRef under its own name). */
export const SECRET_ENV_NAME = /^[A-Za-z_.-][A-Za-z0-9_.-]*$/;

/** The Secret of an evaluation's secret environment values: written by the agent, read for its pod by the kubelet alone. */
export const envSecretName = (evaluationName: string): string => `${evaluationName}${NAMES.envSecretSuffix}`;

export const secretEnvSchema = z
  .object({
    secretName: z
      .string()
      .min(1)
      .describe(
        `Name of the Secret in the evaluation's namespace that holds the values: the evaluation's own, <evaluation name>${NAMES.envSecretSuffix}, written by the agent and owned by the evaluation (deleted with it). Any other name is refused.`,
      ),
    names: z
      .array(z.string().regex(SECRET_ENV_NAME, { message: 'a secret environment variable name must be letters, digits, "_", "-" or "." and not start with a digit' }))
      .min(1)
      .describe('Names of the environment variables set from that Secret; each is also the key of its value there.'),
  })
  .strict()
  .describe('Environment variables whose values are secrets: the values are never in the evaluation, only in its own Secret, which the kubelet reads for the pod.');

export const s3SourceSchema = z
  .object({
    endpoint: z
      .string()
      .regex(/^https:\/\/[^/?#@\s]+\/?$/, { message: 'endpoint must be an https:// URL of a host (and port), with no path, query or user info' })
      .optional()
      .describe('S3 endpoint URL (https://host[:port]); empty means the AWS endpoint for the region. Fetched through the egress proxy, like every artifact.'),
    region: z.string().default('us-east-1').describe('Region of the bucket.'),
    bucket: z.string().min(1).describe('Bucket holding the artifact.'),
    key: z.string().min(1).describe('Object key of the artifact.'),
    credentialsSecretRef: secretRefSchema.optional(),
  })
  .strict()
  .describe('An S3 (or S3-compatible) object, read with the per-assignment temporary credentials.');

export const artifactSourceSchema = z
  .object({
    httpsUrlSecretRef: urlSecretRefSchema.optional(),
    s3: s3SourceSchema.optional(),
  })
  .strict()
  .refine((s) => (s.httpsUrlSecretRef === undefined) !== (s.s3 === undefined), { message: 'set exactly one of httpsUrlSecretRef and s3' })
  .meta({
    description: 'Where the controller fetches the artifact from: exactly one of httpsUrlSecretRef and s3.',
    'x-kubernetes-validations': [{ rule: 'has(self.httpsUrlSecretRef) != has(self.s3)', message: 'set exactly one of httpsUrlSecretRef and s3' }],
  });

export const artifactSchema = z
  .object({
    name: z
      .string()
      .regex(ARTIFACT_NAME, { message: 'artifact name must be one path segment of letters, digits, ".", "_" or "-"' })
      .describe('Name of the artifact; the evaluation container finds it at /artifacts/<name>.'),
    sha256: z
      .string()
      .regex(SHA256, { message: 'sha256 must be 64 lowercase hex characters' })
      .describe('SHA-256 digest of the artifact (64 lowercase hex characters); the cache stores it under sha256/<digest> and refuses content that does not match.'),
    sizeBytes: z.number().int().min(0).describe('Exact size of the artifact in bytes; a download of any other size is refused.'),
    source: artifactSourceSchema,
  })
  .strict()
  .describe('A file the evaluation reads, fetched once into the shared artifact cache and mounted read-only.');

export const gpuSchema = z
  .object({
    count: z.number().int().min(0).default(0).describe('Number of GPUs the evaluation container requests.'),
    vendor: gpuVendorSchema.default('nvidia').describe('GPU vendor: nvidia requests nvidia.com/gpu, amd requests amd.com/gpu.'),
  })
  .strict()
  .describe('GPUs the evaluation needs.');

export const resourcesSchema = z
  .object({
    cpu: quantity('cpu').optional().describe('CPU the evaluation container requests and is limited to, as a Kubernetes quantity (e.g. 2 or 500m).'),
    memory: quantity('memory').optional().describe('Memory the evaluation container requests and is limited to, as a Kubernetes quantity (e.g. 8Gi).'),
    gpu: gpuSchema.optional(),
  })
  .strict()
  .describe('Compute resources of the evaluation container.');

export const tolerationSchema = z
  .object({
    key: z.string().optional().describe('Taint key the toleration applies to; empty with operator Exists matches every taint.'),
    operator: z.enum(['Exists', 'Equal']).optional().describe('Exists or Equal (default Equal).'),
    value: z.string().optional().describe('Taint value the toleration matches with operator Equal.'),
    effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional().describe('Taint effect to match; empty matches all effects.'),
    tolerationSeconds: z.number().int().optional().describe('For NoExecute: how long the pod stays bound after the taint appears.'),
  })
  .strict()
  .describe('A toleration copied onto the evaluation pod.');

export const placementSchema = z
  .object({
    nodeSelector: z.record(z.string(), z.string()).optional().describe('Node labels the evaluation pod must land on (merged with the cache node pinning for a ReadWriteOnce cache).'),
    tolerations: z.array(tolerationSchema).optional().describe('Tolerations for tainted nodes (for example dedicated GPU nodes).'),
  })
  .strict()
  .describe('Placement hints for the evaluation pod.');

export const evaluationSpecSchema = z
  .object({
    evaluationId: z.string().min(1).describe('The control plane\'s id of the evaluation; status updates are reported under this id.'),
    image: z.string().min(1).describe('Container image of the evaluation, pulled with the cluster\'s pull Secret.'),
    command: z.array(z.string()).optional().describe('Entrypoint of the evaluation container; empty uses the image\'s.'),
    args: z.array(z.string()).optional().describe('Arguments of the evaluation container.'),
    env: z.array(envVarSchema).optional().describe('Environment variables of the evaluation container (proxy variables are set by the controller).'),
    secretEnv: secretEnvSchema.optional(),
    resources: resourcesSchema.optional(),
    artifacts: z.array(artifactSchema).optional().meta({
      description: 'Artifacts the evaluation reads, mounted read-only at /artifacts/<name>.',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['name'],
    }),
    deadlineSeconds: z
      .number()
      .int()
      .min(1)
      .describe(
        'Wall-clock limit of the evaluation pod in seconds (its activeDeadlineSeconds, counted from when the kubelet accepts the pod); when it passes the pod is stopped and the evaluation fails with reason DeadlineExceeded. The wait before a container runs is bounded by the chart value evaluations.startDeadlineSeconds (reason StartDeadlineExceeded).',
      ),
    placement: placementSchema.optional(),
    cancelled: z.boolean().default(false).describe('Set to true to cancel: the controller stops the pod and the phase becomes Cancelled.'),
  })
  .strict()
  .describe('What to run: the evaluation container, its artifacts, resources and deadline.');

/** Rules on the whole RLMeshEvaluation (CEL sees metadata.name only from the root). */
export const evaluationRules = [
  {
    rule: `!has(self.spec.secretEnv) || self.spec.secretEnv.secretName == self.metadata.name + '${NAMES.envSecretSuffix}'`,
    message: `spec.secretEnv.secretName must be the evaluation's own Secret, <evaluation name>${NAMES.envSecretSuffix}: an evaluation reads no other Secret`,
  },
] as const;

export const PHASES = ['Pending', 'Fetching', 'Waiting', 'Running', 'Succeeded', 'Failed', 'Cancelled'] as const;
export const phaseSchema = z.enum(PHASES);
export type Phase = z.infer<typeof phaseSchema>;
export const FINISHED_PHASES: readonly Phase[] = ['Succeeded', 'Failed', 'Cancelled'];
export const isFinished = (phase: Phase | undefined): boolean => phase !== undefined && FINISHED_PHASES.includes(phase);

export const conditionSchema = z
  .object({
    type: z.string().min(1).describe('Type of condition: ArtifactsReady (every artifact is in the cache), Scheduled (the pod has a node; False with the reason it is waiting), Completed (the evaluation finished; the reason says how).'),
    status: z.enum(['True', 'False', 'Unknown']).describe('True, False or Unknown.'),
    reason: z.string().min(1).describe('One-word CamelCase reason for the last transition, e.g. Unschedulable, QuotaExceeded, DigestMismatch.'),
    message: z.string().default('').describe('Human-readable details, in the cluster\'s own words where the cluster refused something.'),
    lastTransitionTime: z.string().describe('When the condition last changed status (RFC 3339).'),
    observedGeneration: z.number().int().optional().describe('The metadata.generation the condition was computed from.'),
  })
  .strict()
  .describe('An observation of one aspect of the evaluation.');
export type Condition = z.infer<typeof conditionSchema>;

export const artifactFetchSchema = z
  .object({
    state: z.enum(['Fetching', 'Ready', 'Failed']).describe('Fetching while the cache fills, Ready when every artifact is in the cache, Failed when one cannot be fetched.'),
    reason: z.string().optional().describe('CamelCase reason: Cached, Fetching, DigestMismatch, SizeMismatch, SourceUnreachable, TooLarge, CredentialsMissing.'),
    message: z.string().optional().describe('Details, e.g. the expected and actual digests or the source\'s error.'),
    updatedAt: z.string().optional().describe('When the cache last changed this state (RFC 3339).'),
  })
  .strict()
  .describe('State of the evaluation\'s artifacts in the shared cache, written by the cache filler.');

export const evaluationStatusSchema = z
  .object({
    phase: phaseSchema.optional().describe('Pending, Fetching (artifacts being cached), Waiting (nothing can run it yet; see conditions), Running, Succeeded, Failed or Cancelled.'),
    conditions: z.array(conditionSchema).optional().meta({
      description: 'Latest observations, with reasons; a Waiting evaluation says why here.',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    }),
    artifacts: artifactFetchSchema.optional(),
    podName: z.string().optional().describe('Name of the evaluation pod in the runs namespace.'),
    nodeName: z.string().optional().describe('Node the evaluation pod was scheduled to.'),
    startTime: z.string().optional().describe('When the evaluation pod started running (RFC 3339).'),
    finishTime: z.string().optional().describe('When the evaluation finished (RFC 3339).'),
    exitCode: z.number().int().optional().describe('Exit code of the evaluation container.'),
    reason: z.string().optional().describe('CamelCase reason for the current phase.'),
    message: z.string().optional().describe('Human-readable explanation of the current phase.'),
    observedGeneration: z.number().int().optional().describe('The metadata.generation the controller last acted on.'),
    reportedAt: z.string().optional().describe('When the agent reported the finished evaluation to the control plane (RFC 3339); finished evaluations are garbage-collected a while after this.'),
  })
  .strict()
  .describe('What the controller observed; written through the status subresource.');

export type EvaluationSpec = z.infer<typeof evaluationSpecSchema>;
export type EvaluationStatus = z.infer<typeof evaluationStatusSchema>;
export type Artifact = z.infer<typeof artifactSchema>;

export type ObjectMeta = {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string | Date;
  deletionTimestamp?: string | Date;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
};

export type RLMeshEvaluation = {
  apiVersion: typeof API_VERSION;
  kind: 'RLMeshEvaluation';
  metadata: ObjectMeta;
  spec: EvaluationSpec;
  status?: EvaluationStatus;
};

export const ACCESS_MODES = ['ReadWriteOnce', 'ReadWriteMany', 'ReadOnlyMany', 'ReadWriteOncePod'] as const;

export const cacheSpecSchema = z
  .object({
    pvcName: z.string().default(NAMES.artifactCachePvc).describe('Name of the PersistentVolumeClaim that holds the cache.'),
    namespace: z.string().default(NAMES.runsNamespace).describe('Namespace of the PVC, which is the namespace evaluation pods run in.'),
    accessModes: z
      .array(z.enum(ACCESS_MODES))
      .default(['ReadWriteOnce'])
      .describe('Access modes of the PVC: with ReadWriteOnce evaluation pods are pinned to the node holding the volume; with ReadWriteMany they run anywhere.'),
    highWaterMarkPercent: z
      .number()
      .int()
      .min(1)
      .max(100)
      .default(90)
      .describe('When the cache fills above this percentage of its capacity, least recently used artifacts are evicted.'),
    lowWaterMarkPercent: z
      .number()
      .int()
      .min(0)
      .max(99)
      .default(75)
      .describe('Eviction stops once the cache is at or below this percentage of its capacity.'),
    capacityBytes: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Capacity of the cache in bytes; empty means the size of the mounted volume.'),
  })
  .strict()
  .meta({
    description: 'The shared artifact cache: which PVC and its bounds.',
    'x-kubernetes-validations': [
      { rule: 'self.lowWaterMarkPercent < self.highWaterMarkPercent', message: 'lowWaterMarkPercent must be below highWaterMarkPercent' },
    ],
  });

export const cacheStatusSchema = z
  .object({
    phase: z.enum(['Pending', 'Ready', 'Full', 'Failed']).optional().describe('Pending until the filler has the volume, Ready, Full (above the high-water mark and nothing evictable), Failed (volume unusable; see message).'),
    capacity: z.string().optional().describe('Capacity, human-readable (e.g. 100Gi).'),
    used: z.string().optional().describe('Bytes used, human-readable (e.g. 12.5Gi).'),
    capacityBytes: z.number().int().optional().describe('Capacity of the cache in bytes.'),
    usedBytes: z.number().int().optional().describe('Bytes used by cached artifacts.'),
    entries: z.number().int().optional().describe('Number of artifacts in the cache.'),
    hits: z.number().int().optional().describe('Artifact requests served from the cache since the filler started.'),
    misses: z.number().int().optional().describe('Artifact requests that needed a download since the filler started.'),
    hitRatio: z.string().optional().describe('hits / (hits + misses), e.g. 0.93.'),
    lastEviction: z
      .object({
        time: z.string().describe('When the eviction ran (RFC 3339).'),
        evicted: z.number().int().describe('Artifacts removed.'),
        freedBytes: z.number().int().describe('Bytes freed.'),
      })
      .strict()
      .optional()
      .describe('The last eviction run.'),
    nodeName: z.string().optional().describe('Node holding the volume (where the filler runs); with ReadWriteOnce every evaluation pod that mounts the cache is pinned to it.'),
    message: z.string().optional().describe('Details about the phase.'),
    updatedAt: z.string().optional().describe('When the filler last wrote this status (RFC 3339).'),
  })
  .strict()
  .describe('What the cache filler observed; written through the status subresource.');

export type CacheSpec = z.infer<typeof cacheSpecSchema>;
export type CacheStatus = z.infer<typeof cacheStatusSchema>;
export type RLMeshCache = {
  apiVersion: typeof API_VERSION;
  kind: 'RLMeshCache';
  metadata: ObjectMeta;
  spec: CacheSpec;
  status?: CacheStatus;
};
