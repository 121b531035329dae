import { describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { defaultProbeTargets, podOutcome, probePod, PROBE_LABELS, runNetworkPolicyProbe } from './network-policy-probe.ts';
import { clusterPlacementSchema } from '../lib/evaluation-placement.ts';

describe('NetworkPolicy probe pod', () => {
  it('targets this controller metrics port (forbidden) and the egress proxy (allowed)', () => {
    expect(defaultProbeTargets('http://10.96.0.20:3128', 9090, '10.244.1.7')).toEqual({ forbidden: '10.244.1.7:9090', allowed: '10.96.0.20:3128' });
    // an IPv6-only cluster: the pod's address bracketed for the probe's host:port, the ClusterIP already is in the URL
    expect(defaultProbeTargets('http://[fd00:10:96::20]:3128', 9090, 'fd00:10:244::7')).toEqual({ forbidden: '[fd00:10:244::7]:9090', allowed: '[fd00:10:96::20]:3128' });
  });
  it('is a restricted pod without a ServiceAccount token running the small probe command', () => {
    const pod = probePod({ runsNamespace: 'rlmesh-runs', image: 'img', pullSecrets: ['pull', 'join'], targets: { forbidden: 'a:1', allowed: 'b:2' } });
    expect(pod.spec).toMatchObject({
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      activeDeadlineSeconds: 60,
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      imagePullSecrets: [{ name: 'pull' }, { name: 'join' }],
    });
    expect(pod.spec?.containers[0]).toMatchObject({
      command: ['/usr/local/bin/node', '/app/lib/preflight/netprobe.js', 'a:1', 'b:2', '15'],
      securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
    });
    // it runs the runtime image, built for linux/amd64 only
    expect(pod.spec?.nodeSelector).toBeUndefined();
    expect(pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms).toEqual([
      { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }, { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] }] },
    ]);
    expect(pod.metadata?.labels?.['app.kubernetes.io/managed-by']).toBeUndefined();
    expect(pod.metadata?.annotations).toBeUndefined();
  });
  it('reads the exit code and termination message, or why the pod did not run', () => {
    expect(podOutcome({ status: { containerStatuses: [{ name: 'probe', image: '', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 10, message: 'forbidden a:1: connected\n' } } }] } })).toEqual({
      kind: 'exited',
      exitCode: 10,
      message: 'forbidden a:1: connected',
    });
    expect(podOutcome({ status: { phase: 'Failed', reason: 'DeadlineExceeded' } })).toEqual({ kind: 'not-run', reason: 'DeadlineExceeded' });
    expect(podOutcome({ status: { phase: 'Running' } })).toBeUndefined();
  });
});

describe('the probe pod and the chart knobs (runtime config pods)', () => {
  const base = { runsNamespace: 'rlmesh-runs', image: 'img', pullSecrets: ['pull'], targets: { forbidden: 'a:1', allowed: 'b:2' } };
  it('carries commonLabels, podLabels and podAnnotations; its own labels win', () => {
    const plain = probePod(base);
    const pod = probePod({ ...base, pods: { arbitraryUid: false, commonLabels: { team: 'ml' }, podLabels: { cost: 'c1' }, podAnnotations: { 'example.com/a': 'b' } } });
    expect(pod.metadata!.labels).toEqual({ team: 'ml', cost: 'c1', ...plain.metadata!.labels });
    expect(pod.metadata!.annotations).toEqual({ 'example.com/a': 'b' });
    expect(pod.spec!.securityContext).toMatchObject({ runAsUser: 64000, runAsGroup: 64000 });
  });
  it('runs where evaluations do: the operator\'s node selector, tolerations and required node terms, with linux/amd64', () => {
    const placement = clusterPlacementSchema.parse({
      nodeSelector: { pool: 'evaluations' },
      tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'evaluations', effect: 'NoSchedule' }],
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }] } } },
    });
    const spec = probePod({ ...base, placement }).spec!;
    expect(spec.nodeSelector).toEqual({ pool: 'evaluations' });
    expect(spec.tolerations).toEqual([{ key: 'dedicated', operator: 'Equal', value: 'evaluations', effect: 'NoSchedule' }]);
    expect(spec.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms).toEqual([
      { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }, { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }, { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] }] },
    ]);
    const plain = probePod(base).spec!;
    expect(plain.nodeSelector).toBeUndefined();
    expect(plain.tolerations).toBeUndefined();
  });
  it('stores its result in a ConfigMap carrying commonLabels beneath its own labels', async () => {
    const written: k8s.V1ConfigMap[] = [];
    const core = {
      replaceNamespacedConfigMap: async ({ body }: { body: k8s.V1ConfigMap }) => void written.push(body),
    };
    const apps = { listDaemonSetForAllNamespaces: async () => ({ items: [] }) };
    const kc = { makeApiClient: (api: unknown) => (api === k8s.CoreV1Api ? core : apps) } as unknown as k8s.KubeConfig;
    const commonLabels = { team: 'ml', 'app.kubernetes.io/name': 'spoofed' };
    // no image: the probe does not run, and the result says so
    await runNetworkPolicyProbe({ ...base, image: '', kc, namespace: 'rlmesh-system', pods: { arbitraryUid: false, commonLabels, podLabels: {}, podAnnotations: {} }, log: pino({ level: 'silent' }) });
    expect(written.map((cm) => cm.metadata?.labels)).toEqual([{ team: 'ml', ...PROBE_LABELS }]);
  });
  it("carries the chart's imagePullSecrets (a mirror's login) after the cluster's, each once", () => {
    const pod = probePod({ ...base, pullSecrets: ['pull', 'join'], pods: { arbitraryUid: false, commonLabels: {}, podLabels: {}, podAnnotations: {}, imagePullSecrets: [{ name: 'mirror-pull' }, { name: 'pull' }] } });
    expect(pod.spec!.imagePullSecrets).toEqual([{ name: 'pull' }, { name: 'join' }, { name: 'mirror-pull' }]);
  });
  it('under arbitraryUid sets no user or group', () => {
    const sc = probePod({ ...base, pods: { arbitraryUid: true, commonLabels: {}, podLabels: {}, podAnnotations: {} } }).spec!.securityContext!;
    expect(sc.runAsUser).toBeUndefined();
    expect(sc.runAsGroup).toBeUndefined();
    expect(sc.runAsNonRoot).toBe(true);
  });
});
