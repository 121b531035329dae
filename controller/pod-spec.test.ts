import { describe, expect, it } from 'vitest';
import type { RLMeshEvaluation } from '../lib/crds/types.ts';
import { clusterPlacementSchema } from '../lib/evaluation-placement.ts';
import { buildEvaluationPod, cacheNodeOf, labelValueFor, needsCacheNode, podNameFor, type PodSettings } from './pod-spec.ts';
import { POD_USERS } from '../lib/fixed-names.ts';
import { NONROOT } from '../scripts/image/debian-base.ts';

const digest = 'a'.repeat(64);
const ev = (over: Partial<RLMeshEvaluation['spec']> = {}, annotations: Record<string, string> = {}): RLMeshEvaluation => ({
  apiVersion: 'rlmesh.dev/v1alpha1',
  kind: 'RLMeshEvaluation',
  metadata: { name: 'eval-1', namespace: 'rlmesh-runs', uid: 'uid-1', annotations },
  spec: {
    evaluationId: 'ev_123',
    image: 'registry.rlmesh.dev/env/chess:1',
    command: ['python', '-m', 'env'],
    args: ['--episodes', '4'],
    env: [
      { name: 'SEED', value: '7' },
      { name: 'HTTPS_PROXY', value: 'http://evil:1' },
    ],
    resources: { cpu: '2', memory: '4Gi', gpu: { count: 2, vendor: 'nvidia' } },
    artifacts: [{ name: 'policy.pt', sha256: digest, sizeBytes: 10, source: { httpsUrlSecretRef: { name: 'ev-sources', key: 'url.policy.pt' } } }],
    deadlineSeconds: 600,
    cancelled: false,
    ...over,
  },
});
const settings = (accessModes: string[] = ['ReadWriteOnce'], nodeName: string | null = 'node-a'): PodSettings => ({
  namespace: 'rlmesh-runs',
  pullSecret: 'rlmesh-registry-pull',
  proxyUrl: 'http://rlmesh-egress-proxy.rlmesh-system.svc:3128',
  cache: { pvcName: 'rlmesh-artifact-cache', accessModes, ...(nodeName ? { nodeName } : {}) },
});

describe('buildEvaluationPod', () => {
  it("carries the operator's pull Secrets after the platform's, each once", () => {
    const pod = buildEvaluationPod(ev(), { ...settings(), extraPullSecrets: ['corp-pull', 'rlmesh-registry-pull', 'ghcr-pull'] });
    expect(pod.spec!.imagePullSecrets).toEqual([{ name: 'rlmesh-registry-pull' }, { name: 'corp-pull' }, { name: 'ghcr-pull' }]);
  });
  it("carries the chart's pull Secrets (a mirror's login) when its network-ready container runs the runtime image, and only then", () => {
    const gate = { image: 'mirror.corp/rlmesh/rlmesh-runtime@sha256:' + digest, forbidden: '10.96.0.1:443', allowed: 'proxy:3128', graceSeconds: 60 };
    const withGate = buildEvaluationPod(ev(), { ...settings(), networkGate: gate, extraPullSecrets: ['corp-pull'], runtimePullSecrets: ['mirror-pull', 'corp-pull'] });
    expect(withGate.spec!.imagePullSecrets).toEqual([{ name: 'rlmesh-registry-pull' }, { name: 'corp-pull' }, { name: 'mirror-pull' }]);
    expect(withGate.spec!.initContainers!.map((c) => c.image)).toEqual([gate.image]);
    const noGate = buildEvaluationPod(ev(), { ...settings(), runtimePullSecrets: ['mirror-pull'] });
    expect(noGate.spec!.imagePullSecrets).toEqual([{ name: 'rlmesh-registry-pull' }]);
  });
  it('builds a restricted pod with no token, the pull Secret, proxy env, GPUs, deadline, owner and labels', () => {
    const pod = buildEvaluationPod(ev(), settings());
    const spec = pod.spec!;
    const c = spec.containers[0]!;
    expect(pod.metadata!.name).toBe('rle-eval-1');
    expect(pod.metadata!.labels).toMatchObject({ 'rlmesh.dev/evaluation': 'eval-1', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-controller' });
    expect(pod.metadata!.annotations).toEqual({ 'rlmesh.dev/evaluation-id': 'ev_123' });
    expect(pod.metadata!.ownerReferences).toEqual([
      { apiVersion: 'rlmesh.dev/v1alpha1', kind: 'RLMeshEvaluation', name: 'eval-1', uid: 'uid-1', controller: true, blockOwnerDeletion: false },
    ]);
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.restartPolicy).toBe('Never');
    expect(spec.imagePullSecrets).toEqual([{ name: 'rlmesh-registry-pull' }]);
    expect(spec.activeDeadlineSeconds).toBe(600);
    expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(c.securityContext).toEqual({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(c.command).toEqual(['python', '-m', 'env']);
    expect(c.args).toEqual(['--episodes', '4']);
    expect(c.resources).toEqual({
      requests: { cpu: '2', memory: '4Gi', 'nvidia.com/gpu': '2' },
      limits: { cpu: '2', memory: '4Gi', 'nvidia.com/gpu': '2' },
    });
    const env = Object.fromEntries(c.env!.map((e) => [e.name, e.value]));
    expect(env.HTTPS_PROXY).toBe('http://rlmesh-egress-proxy.rlmesh-system.svc:3128');
    expect(env.HTTP_PROXY).toBe('http://rlmesh-egress-proxy.rlmesh-system.svc:3128');
    expect(env.NO_PROXY).toBe('localhost,127.0.0.1,::1');
    expect(env.https_proxy).toBe(env.HTTPS_PROXY);
    expect(env.SEED).toBe('7');
    // the evaluation cannot point its own proxy variables elsewhere
    expect(c.env!.filter((e) => e.name === 'HTTPS_PROXY')).toHaveLength(1);
    expect(c.volumeMounts).toEqual([{ name: 'artifact-cache', mountPath: '/artifacts/policy.pt', subPath: `sha256/${digest}`, readOnly: true }]);
    expect(spec.volumes).toEqual([{ name: 'artifact-cache', persistentVolumeClaim: { claimName: 'rlmesh-artifact-cache', readOnly: true } }]);
  });

  it("reads secret environment values from the evaluation's own Secret by reference, never as values, and never another Secret", () => {
    const pod = buildEvaluationPod(ev({ secretEnv: { secretName: 'rlmesh-registry-pull', names: ['API_KEY', 'HTTPS_PROXY'] } }), settings());
    const env = pod.spec!.containers[0]!.env!;
    expect(env.filter((e) => e.valueFrom)).toEqual([{ name: 'API_KEY', valueFrom: { secretKeyRef: { name: 'eval-1-env', key: 'API_KEY' } } }]);
    expect(env.filter((e) => e.name === 'HTTPS_PROXY')).toEqual([{ name: 'HTTPS_PROXY', value: 'http://rlmesh-egress-proxy.rlmesh-system.svc:3128' }]);
    expect(pod.spec!.automountServiceAccountToken).toBe(false);
    expect(buildEvaluationPod(ev(), settings()).spec!.containers[0]!.env!.some((e) => e.valueFrom)).toBe(false);
  });

  it("copies none of the evaluation's annotations onto the pod, whatever their prefix", () => {
    // the product honours no test annotation: the local cluster's kwok is steered
    // from the test side (test/cluster/kwok-stages.yaml), never through the pod spec
    const annotations = { 'rlmesh.dev/test-exit-code': '3', 'rlmesh.dev/test-duration': '60s', 'rlmesh.dev/evaluation-id': 'ev_forged', other: 'x' };
    const pod = buildEvaluationPod(ev({}, annotations), settings());
    expect(pod.metadata!.annotations).toEqual({ 'rlmesh.dev/evaluation-id': 'ev_123' });
    expect(pod.metadata!.labels).not.toHaveProperty('other');
    expect(JSON.stringify(pod)).not.toContain('rlmesh.dev/test-');
  });

  it('with a network gate, holds the evaluation in a restricted network-ready init container running the probe program', () => {
    const gate = { image: 'registry.rlmesh.dev/rlmesh/rlmesh-runtime@sha256:' + 'a'.repeat(64), forbidden: '10.96.0.1:443', allowed: 'rlmesh-egress-proxy.rlmesh-system.svc:3128', graceSeconds: 60 };
    const pod = buildEvaluationPod(ev(), { ...settings(), networkGate: gate });
    expect(pod.spec!.initContainers).toEqual([
      expect.objectContaining({
        name: 'network-ready',
        image: gate.image,
        imagePullPolicy: 'IfNotPresent',
        command: ['/usr/local/bin/node', '/app/lib/preflight/netprobe.js', '10.96.0.1:443', 'rlmesh-egress-proxy.rlmesh-system.svc:3128', '60'],
        securityContext: expect.objectContaining({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } }),
      }),
    ]);
    expect(buildEvaluationPod(ev(), settings()).spec!.initContainers).toBeUndefined();
  });
  it('always pulls the evaluation image: the registry and the pull Secret decide, not what a node already holds', () => {
    expect(buildEvaluationPod(ev(), settings()).spec!.containers[0]!.imagePullPolicy).toBe('Always');
  });
  it('requests amd.com/gpu for AMD', () => {
    const pod = buildEvaluationPod(ev({ resources: { gpu: { count: 1, vendor: 'amd' } } }), settings());
    expect(pod.spec!.containers[0]!.resources!.limits).toEqual({ 'amd.com/gpu': '1' });
  });

  const platform = [
    { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
    { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
  ];
  const requiredTerms = (pod: ReturnType<typeof buildEvaluationPod>) => pod.spec!.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;

  it('pins to the volume node with a ReadWriteOnce cache, in the same term as linux/amd64, and not with ReadWriteMany', () => {
    const rwo = buildEvaluationPod(ev(), settings(['ReadWriteOnce'], 'node-a'));
    // one term: the node's name AND the platform (two terms would be ORed, and let the pod off the volume's node)
    expect(requiredTerms(rwo)).toEqual([{ matchExpressions: platform, matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-a'] }] }]);
    expect(cacheNodeOf(ev(), settings(['ReadWriteOnce'], 'node-a'))).toBe('node-a');
    const rwx = buildEvaluationPod(ev(), settings(['ReadWriteMany'], 'node-a'));
    expect(requiredTerms(rwx)).toEqual([{ matchExpressions: platform }]);
    expect(cacheNodeOf(ev(), settings(['ReadWriteMany'], 'node-a'))).toBeUndefined();
    const noArtifacts = buildEvaluationPod(ev({ artifacts: [] }), settings(['ReadWriteOnce'], 'node-a'));
    expect(requiredTerms(noArtifacts)).toEqual([{ matchExpressions: platform }]);
    expect(noArtifacts.spec!.volumes).toEqual([]);
  });

  it('requires a linux/amd64 node, whatever else it runs on: the network-ready gate runs the amd64-only runtime image', () => {
    const gate = { image: 'registry.rlmesh.dev/rlmesh/rlmesh-runtime:0.1.0', forbidden: '10.96.0.1:443', allowed: 'proxy:3128', graceSeconds: 60 };
    for (const pod of [buildEvaluationPod(ev(), { ...settings(['ReadWriteMany']), networkGate: gate }), buildEvaluationPod(ev({ artifacts: [] }), settings())]) {
      expect(pod.spec!.affinity!.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution).toBeUndefined();
      expect(requiredTerms(pod)).toEqual([{ matchExpressions: platform }]);
    }
  });

  it("keeps the assignment's nodeSelector beside the platform affinity, which the scheduler ANDs", () => {
    const pod = buildEvaluationPod(ev({ placement: { nodeSelector: { pool: 'gpu', 'nvidia.com/gpu.product': 'H100' } } }), settings(['ReadWriteOnce'], 'node-a'));
    expect(pod.spec!.nodeSelector).toEqual({ pool: 'gpu', 'nvidia.com/gpu.product': 'H100' });
    expect(requiredTerms(pod)).toEqual([{ matchExpressions: platform, matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-a'] }] }]);
  });

  it("gives the pod the operator's policy: nodeSelector ANDed with the platform's, each required term with linux/amd64 and the cache node, and the rest as set", () => {
    const placement = clusterPlacementSchema.parse({
      nodeSelector: { pool: 'evals' },
      tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'evals', effect: 'NoSchedule' }],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }, { matchExpressions: [{ key: 'zone', operator: 'In', values: ['b'] }], matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['bad'] }] }],
          },
          preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 10, preference: { matchExpressions: [{ key: 'ssd', operator: 'Exists' }] } }],
        },
        podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 5, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { team: 'x' } } } }] },
      },
      priorityClassName: 'evaluations',
      runtimeClassName: 'gvisor',
      podLabels: { 'example.com/cost-center': 'rl', 'rlmesh.dev/evaluation': 'spoofed' },
      podAnnotations: { 'example.com/owner': 'platform-team' },
    });
    const pod = buildEvaluationPod(ev({ placement: { nodeSelector: { 'gpu.product': 'h100' } } }), { ...settings(), placement });
    const spec = pod.spec!;
    expect(spec.nodeSelector).toEqual({ 'gpu.product': 'h100', pool: 'evals' });
    expect(spec.tolerations).toEqual([{ key: 'dedicated', operator: 'Equal', value: 'evals', effect: 'NoSchedule' }]);
    expect(spec.priorityClassName).toBe('evaluations');
    expect(spec.runtimeClassName).toBe('gvisor');
    const platform = [
      { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
      { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
    ];
    const pinned = { key: 'metadata.name', operator: 'In', values: ['node-a'] };
    expect(spec.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms).toEqual([
      { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }, ...platform], matchFields: [pinned] },
      { matchExpressions: [{ key: 'zone', operator: 'In', values: ['b'] }, ...platform], matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['bad'] }, pinned] },
    ]);
    expect(spec.affinity!.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution).toHaveLength(1);
    expect(spec.affinity!.podAntiAffinity).toEqual(placement.affinity.podAntiAffinity);
    // the runtime's own labels win over the operator's (the chart refuses such keys anyway)
    expect(pod.metadata!.labels).toMatchObject({ 'example.com/cost-center': 'rl', 'rlmesh.dev/evaluation': 'eval-1' });
    expect(pod.metadata!.annotations).toEqual({ 'example.com/owner': 'platform-team', 'rlmesh.dev/evaluation-id': 'ev_123' });
  });

  it("carries the chart's commonLabels beneath evaluations.podLabels, and the runtime's own labels over both", () => {
    const placement = clusterPlacementSchema.parse({ podLabels: { team: 'evals' } });
    const without = buildEvaluationPod(ev(), { ...settings(), placement }).metadata!.labels;
    const pod = buildEvaluationPod(ev(), { ...settings(), placement, commonLabels: { team: 'ml', 'example.com/cost-center': 'c1', 'app.kubernetes.io/managed-by': 'spoofed' } });
    expect(pod.metadata!.labels).toEqual({ ...without, 'example.com/cost-center': 'c1' });
    expect(pod.metadata!.labels).toMatchObject({ team: 'evals', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-controller' });
  });

  it('without a policy the pod carries no priority or runtime class and only the platform term', () => {
    const spec = buildEvaluationPod(ev({ artifacts: [] }), settings()).spec!;
    expect(spec.priorityClassName).toBeUndefined();
    expect(spec.runtimeClassName).toBeUndefined();
    expect(spec.tolerations).toBeUndefined();
    expect(spec.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms).toHaveLength(1);
  });

  it('waits for the cache node only with a ReadWriteOnce cache and artifacts', () => {
    expect(needsCacheNode(ev(), settings(['ReadWriteOnce'], null))).toBe(true);
    expect(needsCacheNode(ev(), settings(['ReadWriteMany'], null))).toBe(false);
    expect(needsCacheNode(ev({ artifacts: [] }), settings(['ReadWriteOnce'], null))).toBe(false);
  });

  it('copies placement hints', () => {
    const pod = buildEvaluationPod(
      ev({ placement: { nodeSelector: { pool: 'gpu' }, tolerations: [{ key: 'gpu', operator: 'Exists', effect: 'NoSchedule' }] } }),
      settings(),
    );
    expect(pod.spec!.nodeSelector).toEqual({ pool: 'gpu' });
    expect(pod.spec!.tolerations).toEqual([{ key: 'gpu', operator: 'Exists', effect: 'NoSchedule' }]);
  });

  it('keeps names and label values within their limits', () => {
    const long = 'e'.repeat(80);
    expect(podNameFor(long).length).toBeLessThanOrEqual(63);
    expect(podNameFor(long)).not.toBe(podNameFor(`${long}x`));
    expect(labelValueFor(long).length).toBeLessThanOrEqual(63);
  });
});

describe('the user an evaluation pod runs as', () => {
  it('is 64000:64000, which no runtime component (65532, the runtime image\'s user) runs as; under arbitraryUid (OpenShift restricted-v2) none, for the SCC to assign', () => {
    expect(POD_USERS.evaluation.uid).not.toBe(POD_USERS.runtime.uid);
    expect(POD_USERS.evaluation.gid).not.toBe(POD_USERS.runtime.gid);
    expect(NONROOT.uid).toBe(POD_USERS.runtime.uid);
    const pod = buildEvaluationPod(ev(), settings());
    expect(pod.spec!.securityContext).toEqual({ runAsNonRoot: true, runAsUser: 64000, runAsGroup: 64000, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.spec!.containers.map((c) => [c.securityContext?.runAsUser, c.securityContext?.runAsGroup])).toEqual([[undefined, undefined]]);
    const sc = buildEvaluationPod(ev(), { ...settings(), arbitraryUid: true }).spec!.securityContext!;
    expect(sc.runAsNonRoot).toBe(true);
    expect(sc.runAsUser).toBeUndefined();
    expect(sc.runAsGroup).toBeUndefined();
    expect(sc.fsGroup).toBeUndefined();
  });
});

describe('evaluations.hostUsers', () => {
  it('hostUsers: false when decided (lib/user-namespaces.ts), and the field unset otherwise', () => {
    expect(buildEvaluationPod(ev(), { ...settings(), hostUsers: false }).spec!.hostUsers).toBe(false);
    expect('hostUsers' in buildEvaluationPod(ev(), settings()).spec!).toBe(false);
  });
});
