// Assignments from the session become RLMeshEvaluation objects in the runs
// namespace, created idempotently (the control plane resends an assignment
// until an update for it arrives). What an assignment carries to reach its
// artifacts (S3 credentials, presigned URLs) goes into the evaluation's entry of
// the artifact-sources Secrets (agent/artifact-sources.ts), never into the
// evaluation itself; its secret environment values into a Secret owned by the
// evaluation (its pod reads that one through the kubelet, so it holds nothing
// else). Neither is spooled or logged: they go from the session straight into
// the Secrets.
// Cancellations set spec.cancelled; the controller stops the pod. An image from
// a registry this cluster does not run, or a reference the kubelet would refuse,
// is refused before anything is created; an admitted one is written fully qualified.
// So is a placement that conflicts with the operator's policy for evaluation pods
// (lib/evaluation-placement.ts): the platform can only narrow it. And so is
// every new assignment while the cluster drains (the platform's drain or the
// operator's): only a redelivery of an evaluation the cluster already holds
// goes through.
import { createHash } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_VERSION, envSecretName, EVALUATION, GROUP, SECRET_ENV_NAME, VERSION, type EvaluationSpec, type RLMeshEvaluation } from '../lib/crds/types.ts';
import { ARTIFACT_SOURCES_SECRETS, NAMES } from '../lib/fixed-names.ts';
import type { Assignment, Cancellation } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { isConflict, isNotFound, isRbacDenial } from '../lib/kube-errors.ts';
import { admitImage } from './evaluation-image.ts';
import { errorMessage, statusCode } from '../lib/error-fields.ts';
import { placementConflict, type ClusterPlacement } from '../lib/evaluation-placement.ts';
import { withCommonLabels } from '../lib/common-labels.ts';
import { sourcesSecretFor, type ArtifactSources } from './artifact-sources.ts';

export const EVALUATION_ID_ANNOTATION = 'rlmesh.dev/evaluation-id';

/** The object name for an evaluation id: the id itself when it is a valid name, else a stable hash. */
export function evaluationName(id: string): string {
  if (/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(id)) return id;
  const slug = id.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40);
  return `${slug ? `${slug}-` : 'ev-'}${createHash('sha256').update(id).digest('hex').slice(0, 12)}`;
}

/** The evaluation's entry in the artifact-sources Secrets, holding its artifact sources' credentials. */
export const sourcesSecretName = (evalName: string) => `${evalName.slice(0, 230)}${NAMES.sourcesSecretSuffix}`;
/** The key of an artifact's presigned URL in that entry. */
export const urlKey = (artifactName: string) => `url.${artifactName}`;

// set by the controller: an assignment may not set them, in env or secretEnv
const RESERVED_ENV = /^(HTTPS?_PROXY|NO_PROXY|https?_proxy|no_proxy|RLMESH_.*)$/;

/** Why the assignment's secret environment cannot be set as it stands, or undefined. */
export function secretEnvProblem(a: Pick<Assignment, 'env' | 'secretEnv'>): string | undefined {
  for (const name of Object.keys(a.secretEnv)) {
    if (!SECRET_ENV_NAME.test(name)) {
      return `secret environment variable ${JSON.stringify(name)} is not a name the cluster can hold as a Secret key: use letters, digits, "_", "-" and ".", not starting with a digit`;
    }
    if (name in a.env) return `environment variable ${name} is both in env and in secretEnv: send it once, in secretEnv if its value is a secret`;
    if (RESERVED_ENV.test(name)) return `secret environment variable ${name} is set by the cluster (the egress proxy variables and RLMESH_*): use another name`;
  }
  return undefined;
}

const LABELS = { 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent' };

/** `image`: the reference admitImage admitted for the assignment; `commonLabels`: the chart's (runtime config pods.commonLabels). */
export function evaluationFromAssignment(
  a: Assignment,
  image: string,
  namespace: string,
  commonLabels?: Readonly<Record<string, string>>,
): { evaluation: RLMeshEvaluation; sources: Record<string, string>; secretEnv: Record<string, string> } {
  const name = evaluationName(a.evaluationId);
  // the S3 credentials are the assignment's (one set for all its objects), the URLs one per artifact
  const sources: Record<string, string> = {};
  const spec: EvaluationSpec = {
    evaluationId: a.evaluationId,
    image,
    ...(a.command.length ? { command: a.command } : {}),
    ...(a.args.length ? { args: a.args } : {}),
    ...(Object.keys(a.env).length ? { env: Object.entries(a.env).map(([k, v]) => ({ name: k, value: v })) } : {}),
    // only the names: the values go into the evaluation's own Secret
    ...(Object.keys(a.secretEnv).length ? { secretEnv: { secretName: envSecretName(name), names: Object.keys(a.secretEnv).sort() } } : {}),
    resources: {
      ...(a.cpu ? { cpu: a.cpu } : {}),
      ...(a.memory ? { memory: a.memory } : {}),
      ...(a.gpuCount > 0 ? { gpu: { count: a.gpuCount, vendor: a.gpuVendor === 'amd' ? 'amd' : 'nvidia' } } : {}),
    },
    ...(a.artifacts.length
      ? {
          artifacts: a.artifacts.map((art) => {
            const src = art.source?.source;
            if (src?.case === 's3') {
              const o = src.value;
              if (o.accessKeyId && !sources.accessKeyId) {
                Object.assign(sources, { accessKeyId: o.accessKeyId, secretAccessKey: o.secretAccessKey, ...(o.sessionToken ? { sessionToken: o.sessionToken } : {}) });
              }
              return {
                name: art.name,
                sha256: art.sha256,
                sizeBytes: Number(art.sizeBytes),
                source: {
                  s3: {
                    ...(o.endpoint ? { endpoint: o.endpoint } : {}),
                    region: o.region || 'us-east-1',
                    bucket: o.bucket,
                    key: o.key,
                    ...(o.accessKeyId ? { credentialsSecretRef: { name: sourcesSecretName(name) } } : {}),
                  },
                },
              };
            }
            sources[urlKey(art.name)] = src?.case === 'httpsUrl' ? src.value : '';
            return { name: art.name, sha256: art.sha256, sizeBytes: Number(art.sizeBytes), source: { httpsUrlSecretRef: { name: sourcesSecretName(name), key: urlKey(art.name) } } };
          }),
        }
      : {}),
    // the CRD requires a deadline; an assignment without one gets a day
    deadlineSeconds: Number(a.deadlineSeconds) > 0 ? Number(a.deadlineSeconds) : 86_400,
    ...(Object.keys(a.nodeSelector).length ? { placement: { nodeSelector: { ...a.nodeSelector } } } : {}),
    cancelled: false,
  };
  return {
    evaluation: {
      apiVersion: API_VERSION,
      kind: EVALUATION.kind,
      metadata: {
        name,
        namespace,
        labels: withCommonLabels(LABELS, commonLabels),
        annotations: { [EVALUATION_ID_ANNOTATION]: a.evaluationId },
      },
      spec,
    },
    sources,
    secretEnv: { ...a.secretEnv },
  };
}

/** Why a drained cluster refuses a new assignment: ClusterDraining (the platform's drain) or OperatorDrain (rlmesh drain). */
export type DrainRefusal = { reason: 'ClusterDraining' | 'OperatorDrain'; message: string };

export type AssignmentsOptions = {
  kc: k8s.KubeConfig;
  namespace: string;
  /** where evaluation images may come from: registry hosts (the whole registry) and repository prefixes (lib/image-prefix.ts) */
  imageRegistries: readonly string[];
  /** the operator's policy for evaluation pods (runtime config evaluations.placement); absent: none */
  placement?: ClusterPlacement;
  /** the chart's commonLabels (runtime config pods.commonLabels), on the evaluations */
  commonLabels?: Readonly<Record<string, string>>;
  /** where the artifacts' credentials go */
  sources: ArtifactSources;
  log: Logger;
  /** an outcome with no object behind it (refused at admission, cancelled before creation): report it */
  onOutcome: (evaluationId: string, phase: 'Failed' | 'Cancelled', reason: string, message: string) => void;
};

export class Assignments {
  private readonly custom: k8s.CustomObjectsApi;
  private readonly core: k8s.CoreV1Api;
  private readonly o: AssignmentsOptions;

  constructor(o: AssignmentsOptions) {
    this.o = o;
    this.custom = o.kc.makeApiClient(k8s.CustomObjectsApi);
    this.core = o.kc.makeApiClient(k8s.CoreV1Api);
  }

  /**
   * `drained`: asked before anything is created; a refusal it returns (the cluster drains) refuses the
   * assignment unless the evaluation already exists (a redelivery of one accepted before the drain, which runs on).
   */
  async assign(a: Assignment, drained?: () => DrainRefusal | undefined): Promise<void> {
    const { namespace, log } = this.o;
    const refusal = drained?.();
    if (refusal && !(await this.#exists(evaluationName(a.evaluationId)))) {
      log.warn({ evaluationId: a.evaluationId, reason: refusal.reason }, `assignment refused: ${refusal.message}`);
      this.o.onOutcome(a.evaluationId, 'Failed', refusal.reason, refusal.message);
      return;
    }
    const admitted = admitImage(a.image, this.o.imageRegistries);
    if ('refusal' in admitted) {
      log.warn({ evaluationId: a.evaluationId, image: a.image }, `assignment refused: ${admitted.refusal}`);
      this.o.onOutcome(a.evaluationId, 'Failed', admitted.reason, admitted.refusal);
      return;
    }
    const conflict = this.o.placement ? placementConflict(this.o.placement, a.nodeSelector) : undefined;
    if (conflict) {
      log.warn({ evaluationId: a.evaluationId, nodeSelector: a.nodeSelector }, `assignment refused: ${conflict.message}`);
      this.o.onOutcome(a.evaluationId, 'Failed', conflict.reason, conflict.message);
      return;
    }
    const envProblem = secretEnvProblem(a);
    if (envProblem) {
      log.warn({ evaluationId: a.evaluationId, secretEnvNames: Object.keys(a.secretEnv) }, `assignment refused: ${envProblem}`);
      this.o.onOutcome(a.evaluationId, 'Failed', 'InvalidSecretEnv', envProblem);
      return;
    }
    const { evaluation, sources, secretEnv } = evaluationFromAssignment(a, admitted.image, namespace, this.o.commonLabels);
    const name = evaluation.metadata.name;
    // the credentials first, so the cache filler's volume holds them as soon as it can; a redelivery writes them again
    if (Object.keys(sources).length > 0) {
      try {
        await this.o.sources.put(sourcesSecretName(name), sources);
      } catch (err) {
        if (statusCode(err) !== 422) throw err;
        const message = `the artifact credentials of this evaluation do not fit into Secret ${namespace}/${sourcesSecretFor(sourcesSecretName(name))} (${errorMessage(err)}): a Secret holds at most 1 MiB, and the agent spreads the credentials of the evaluations that have not finished over ${ARTIFACT_SOURCES_SECRETS.length} of them; no evaluation was created: let evaluations finish, or have the platform assign fewer with artifacts at once`;
        log.error({ evaluationId: a.evaluationId }, `assignment refused: ${message}`);
        this.o.onOutcome(a.evaluationId, 'Failed', 'ArtifactCredentialsFull', message);
        return;
      }
    }
    let created: RLMeshEvaluation;
    try {
      created = (await this.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: EVALUATION.plural, body: evaluation })) as RLMeshEvaluation;
      log.info({ evaluationId: a.evaluationId, name }, 'assignment accepted: RLMeshEvaluation created');
    } catch (err) {
      if (!isConflict(err)) return this.#refused(a, err);
      log.debug({ evaluationId: a.evaluationId, name }, 'assignment already accepted (redelivery)');
      if (Object.keys(secretEnv).length === 0) return;
      // the agent may have stopped between the evaluation and its secret environment: the redelivery writes it
      created = (await this.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: EVALUATION.plural, name })) as RLMeshEvaluation;
    }
    if (Object.keys(secretEnv).length === 0) return;
    // owned by the evaluation: deleting it (or the controller's garbage collection of a finished one) deletes it
    try {
      await this.core.createNamespacedSecret({
        namespace,
        body: {
          metadata: {
            name: envSecretName(name),
            namespace,
            labels: withCommonLabels(LABELS, this.o.commonLabels),
            ownerReferences: [{ apiVersion: API_VERSION, kind: EVALUATION.kind, name, uid: created.metadata.uid!, controller: true, blockOwnerDeletion: false }],
          },
          type: 'Opaque',
          stringData: secretEnv,
        },
      });
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }

  async #exists(name: string): Promise<boolean> {
    try {
      await this.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.o.namespace, plural: EVALUATION.plural, name });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /** Reports an evaluation the cluster refused; anything else (an RBAC denial of the agent's own rights included) is retried. */
  #refused(a: Assignment, err: unknown): void {
    const status = statusCode(err);
    if (status === 422 || status === 400 || (status === 403 && !isRbacDenial(err))) {
      const msg = errorMessage(err);
      this.o.log.error({ evaluationId: a.evaluationId, status }, `the cluster refused the evaluation: ${msg}`);
      this.o.onOutcome(a.evaluationId, 'Failed', status === 403 ? 'Forbidden' : 'Invalid', `the cluster refused the RLMeshEvaluation: ${msg}`);
      return;
    }
    throw err;
  }

  async cancel(c: Cancellation): Promise<void> {
    const { namespace, log } = this.o;
    const name = evaluationName(c.evaluationId);
    try {
      await this.custom.patchNamespacedCustomObject(
        { group: GROUP, version: VERSION, namespace, plural: EVALUATION.plural, name, body: { spec: { cancelled: true } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
      log.info({ evaluationId: c.evaluationId, reason: c.reason }, 'cancellation applied: spec.cancelled set');
    } catch (err) {
      if (!isNotFound(err)) throw err;
      log.info({ evaluationId: c.evaluationId }, 'cancellation for an evaluation this cluster does not hold; reporting it Cancelled');
      this.o.onOutcome(c.evaluationId, 'Cancelled', 'CancelledBeforeCreation', c.reason || 'cancelled before the cluster created it');
    }
  }
}
