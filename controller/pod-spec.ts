// The pod an RLMeshEvaluation runs as: restricted Pod Security as the evaluation
// user (lib/fixed-names.ts POD_USERS), in a user namespace when decided so, no
// ServiceAccount token, the pull Secrets (the platform's, then the operator's), the artifact cache mounted read-only
// with each artifact at /artifacts/<name>, proxy variables pointing at the
// egress proxy, secret environment values from the evaluation's own Secret
// (read by the kubelet; the pod has no token), GPU requests, a deadline, an owner reference so deleting
// the evaluation deletes the pod, and a node of the runtime's platform.
import { createHash } from 'node:crypto';
import type { V1Pod, V1Toleration } from '@kubernetes/client-node';
import { API_VERSION, envSecretName, EVALUATION, type RLMeshEvaluation } from '../lib/crds/types.ts';
import { netprobeContainer } from './network-policy-probe.ts';
import { evaluationPodUser } from '../lib/chart-knobs.ts';
import { evaluationAffinity, mergedNodeSelector, NO_PLACEMENT, type ClusterPlacement } from '../lib/evaluation-placement.ts';
import { withCommonLabels } from '../lib/common-labels.ts';

export const MANAGED_BY = 'rlmesh-cluster-controller';
export const LABEL_EVALUATION = 'rlmesh.dev/evaluation';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const ANNOTATION_EVALUATION_ID = 'rlmesh.dev/evaluation-id';
export const CONTAINER_NAME = 'evaluation';
export const ARTIFACTS_DIR = '/artifacts';
export const CACHE_VOLUME = 'artifact-cache';
export const GPU_RESOURCE = { nvidia: 'nvidia.com/gpu', amd: 'amd.com/gpu' } as const;
export const DEFAULT_NO_PROXY = 'localhost,127.0.0.1,::1';
const PROXY_VARS = ['HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY', 'https_proxy', 'http_proxy', 'no_proxy'];

/**
 * The init container that holds an evaluation back until its pod's
 * NetworkPolicies are in force: the forbidden target (the Kubernetes API) is
 * blocked and the egress proxy answers. Set only where the probe found
 * NetworkPolicy enforced; elsewhere it could never pass.
 */
export type NetworkGate = { image: string; forbidden: string; allowed: string; graceSeconds: number };
export const NETWORK_GATE_CONTAINER = 'network-ready';

export type PodSettings = {
  namespace: string;
  networkGate?: NetworkGate;
  pullSecret: string;
  /** the operator's pull Secrets (chart value evaluations.imagePullSecrets) mapped to this pod's image (pullSecretsFor), after the platform's */
  extraPullSecrets?: readonly string[];
  /** the chart's imagePullSecrets (a mirror's login under global.imageRegistry), for the network-ready container's runtime image */
  runtimePullSecrets?: readonly string[];
  proxyUrl: string;
  noProxy?: string;
  /** the operator's policy for evaluation pods (chart values evaluations.nodeSelector, tolerations, …); absent: none */
  placement?: ClusterPlacement;
  /** podSecurity.arbitraryUid: no fixed runAsUser and runAsGroup (OpenShift's SCC assigns them) */
  arbitraryUid?: boolean;
  /** false: the pod runs in a user namespace (evaluations.hostUsers, lib/user-namespaces.ts); absent: the node's users */
  hostUsers?: false;
  /** the chart's commonLabels (runtime config pods.commonLabels), beneath evaluations.podLabels */
  commonLabels?: Readonly<Record<string, string>>;
  cache: {
    pvcName: string;
    accessModes: readonly string[];
    /** Node holding a ReadWriteOnce volume; pods that mount it are pinned there. */
    nodeName?: string;
  };
};

/** A name that fits: `rle-<evaluation>`, shortened with a hash when it would exceed the limit. */
export function boundedName(prefix: string, name: string, max: number): string {
  const full = `${prefix}${name}`;
  if (full.length <= max) return full;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 10);
  return `${full.slice(0, max - 11).replace(/[-.]+$/, '')}-${hash}`;
}

export const podNameFor = (evaluationName: string): string => boundedName('rle-', evaluationName, 63);
export const labelValueFor = (value: string): string => boundedName('', value, 63).replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '') || 'x';

export function cacheIsShared(accessModes: readonly string[]): boolean {
  return accessModes.includes('ReadWriteMany') || accessModes.includes('ReadOnlyMany');
}

/** The node a pod is pinned to because it mounts the ReadWriteOnce cache there; undefined when it is not pinned. */
export function cacheNodeOf(ev: RLMeshEvaluation, s: Pick<PodSettings, 'cache'>): string | undefined {
  return (ev.spec.artifacts?.length ?? 0) > 0 && !cacheIsShared(s.cache.accessModes) ? s.cache.nodeName : undefined;
}

/** True when the pod must wait for the cache's node before it can be created. */
export function needsCacheNode(ev: RLMeshEvaluation, s: PodSettings): boolean {
  return (ev.spec.artifacts?.length ?? 0) > 0 && !cacheIsShared(s.cache.accessModes) && !s.cache.nodeName;
}

export function buildEvaluationPod(ev: RLMeshEvaluation, s: PodSettings): V1Pod {
  const spec = ev.spec;
  const artifacts = spec.artifacts ?? [];
  const proxy = {
    HTTPS_PROXY: s.proxyUrl,
    HTTP_PROXY: s.proxyUrl,
    NO_PROXY: s.noProxy ?? DEFAULT_NO_PROXY,
  };
  const env = [
    ...(spec.env ?? []).filter((e) => !PROXY_VARS.includes(e.name)).map((e) => ({ name: e.name, value: e.value ?? '' })),
    // from the evaluation's own Secret, whatever secretName says (the CRD refuses any other): the kubelet reads it for the pod
    ...(spec.secretEnv?.names ?? [])
      .filter((name) => !PROXY_VARS.includes(name))
      .map((name) => ({ name, valueFrom: { secretKeyRef: { name: envSecretName(ev.metadata.name), key: name } } })),
    ...Object.entries(proxy).flatMap(([name, value]) => [
      { name, value },
      { name: name.toLowerCase(), value },
    ]),
    { name: 'RLMESH_EVALUATION_ID', value: spec.evaluationId },
    { name: 'RLMESH_ARTIFACTS_DIR', value: ARTIFACTS_DIR },
  ];

  const requests: Record<string, string> = {};
  const limits: Record<string, string> = {};
  if (spec.resources?.cpu) requests.cpu = limits.cpu = spec.resources.cpu;
  if (spec.resources?.memory) requests.memory = limits.memory = spec.resources.memory;
  const gpu = spec.resources?.gpu;
  if (gpu && gpu.count > 0) requests[GPU_RESOURCE[gpu.vendor]] = limits[GPU_RESOURCE[gpu.vendor]] = String(gpu.count);

  const pinned = cacheNodeOf(ev, s);
  const policy = s.placement ?? NO_PLACEMENT;
  const nodeSelector = mergedNodeSelector(policy, spec.placement?.nodeSelector);
  // the operator's tolerations; those of an evaluation written in the cluster by hand too (the agent writes none)
  const tolerations = [...(policy.tolerations as V1Toleration[]), ...((spec.placement?.tolerations ?? []) as V1Toleration[])];

  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: podNameFor(ev.metadata.name),
      namespace: s.namespace,
      // the operator's labels and annotations first: the runtime's own keys win (the chart refuses them in evaluations.podLabels
      // and commonLabels), and evaluations.podLabels, for evaluation pods alone, win over commonLabels
      labels: withCommonLabels(
        {
          ...policy.podLabels,
          [LABEL_EVALUATION]: labelValueFor(ev.metadata.name),
          [LABEL_MANAGED_BY]: MANAGED_BY,
          'app.kubernetes.io/name': 'rlmesh-evaluation',
          'app.kubernetes.io/part-of': 'rlmesh-runtime',
        },
        s.commonLabels,
      ),
      annotations: { ...policy.podAnnotations, [ANNOTATION_EVALUATION_ID]: spec.evaluationId },
      ownerReferences: [
        // blockOwnerDeletion stays false: nothing of ours may hold up deleting an
        // evaluation, its namespace or an uninstall
        { apiVersion: API_VERSION, kind: EVALUATION.kind, name: ev.metadata.name, uid: ev.metadata.uid ?? '', controller: true, blockOwnerDeletion: false },
      ],
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      imagePullSecrets: [...new Set([s.pullSecret, ...(s.extraPullSecrets ?? []), ...(s.networkGate ? (s.runtimePullSecrets ?? []) : [])])].map((name) => ({ name })),
      activeDeadlineSeconds: spec.deadlineSeconds,
      ...(s.hostUsers === false ? { hostUsers: false } : {}),
      securityContext: {
        runAsNonRoot: true,
        ...evaluationPodUser(s.arbitraryUid),
        seccompProfile: { type: 'RuntimeDefault' },
      },
      ...(s.networkGate ? { initContainers: [netprobeContainer(NETWORK_GATE_CONTAINER, s.networkGate.image, s.networkGate, s.networkGate.graceSeconds)] } : {}),
      containers: [
        {
          name: CONTAINER_NAME,
          image: spec.image,
          // the registry decides, with the pull Secret, every time: an image already on the node is not enough
          imagePullPolicy: 'Always',
          ...(spec.command?.length ? { command: spec.command } : {}),
          ...(spec.args?.length ? { args: spec.args } : {}),
          env,
          resources: { requests, limits },
          securityContext: {
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'] },
            runAsNonRoot: true,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          volumeMounts: artifacts.map((a) => ({
            name: CACHE_VOLUME,
            mountPath: `${ARTIFACTS_DIR}/${a.name}`,
            subPath: `sha256/${a.sha256}`,
            readOnly: true,
          })),
        },
      ],
      volumes: artifacts.length > 0 ? [{ name: CACHE_VOLUME, persistentVolumeClaim: { claimName: s.cache.pvcName, readOnly: true } }] : [],
      ...(Object.keys(nodeSelector).length ? { nodeSelector } : {}),
      ...(tolerations.length ? { tolerations } : {}),
      ...(policy.priorityClassName ? { priorityClassName: policy.priorityClassName } : {}),
      ...(policy.runtimeClassName ? { runtimeClassName: policy.runtimeClassName } : {}),
      // always the runtime's platform: the network-ready init container runs the runtime image, and those are
      // the only nodes the agent offers the platform (agent/eligible-nodes.ts); ANDed into each of the operator's
      // required node terms, with the cache's node; the nodeSelector (ANDed by the scheduler) narrows it further
      affinity: evaluationAffinity(policy, pinned),
    },
  };
}
