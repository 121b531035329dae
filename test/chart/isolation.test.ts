// Isolation defaults for untrusted code, on the real apiserver: the controller's admission
// policy holds its pods to the operator's placement policy (no nodeName, no toleration but
// evaluations.tolerations', evaluations.nodeSelector and affinity present), to the evaluation
// user and, with evaluations.hostUsers=false, to user namespaces; each refusal names its rule.
// The requests are made with the controller's own minted token as server-side dry runs
// (admission decides, nothing is stored). And rlmesh-runs' LimitRange max and ResourceQuota
// refuse, at the API server, a pod above them.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildEvaluationPod } from '../../controller/pod-spec.ts';
import { defaultProbeTargets, GATE_GRACE_SECONDS, gateTargets, probePod } from '../../controller/network-policy-probe.ts';
import type { RLMeshEvaluation } from '../../lib/crds/types.ts';
import { POD_USERS } from '../../lib/fixed-names.ts';
import { parseQuantity } from '../../lib/quantity.ts';
import { runtimeConfigSchema } from '../../lib/runtime-config.ts';
import { clusterInfo, helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { until } from '../support/until.ts';
import { CHART, HOOK_ON_KWOK, TOKEN, valuesFile } from './chart.ts';

const SYS = 'rlmesh-system';
const RUNS = 'rlmesh-runs';
const POLICY = 'rlmesh-cluster-controller-pods';
const TOLERATION = { key: 'dedicated', operator: 'Equal', value: 'evaluations', effect: 'NoSchedule' };
const ZONE_TERM = { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['zone-a', 'zone-b'] }] };
const CONTROL_PLANE = { key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' };
let controller = '';

beforeAll(async () => {
  const values = valuesFile({
    joinToken: TOKEN,
    evaluations: {
      hostUsers: false,
      nodeSelector: { pool: 'evaluations' },
      tolerations: [TOLERATION],
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [ZONE_TERM] } } },
    },
  });
  helm(['upgrade', '--install', 'rlmesh', CHART, '-n', SYS, '--create-namespace', '-f', values, ...HOOK_ON_KWOK]);
  controller = await serviceAccountKubeconfig(SYS, 'rlmesh-cluster-controller');
}, 300_000);

/** kubectl with `kubeconfig` (the admin's when empty), `input` on stdin; ok and what it printed (stderr on failure). */
function as(kubeconfig: string, args: string[], input?: string): { ok: boolean; out: string } {
  try {
    const kc = kubeconfig ? ['--kubeconfig', kubeconfig] : [];
    const out = execFileSync(join(clusterInfo().bin, 'kubectl'), [...kc, ...args], { encoding: 'utf8', input, env: { ...process.env, KUBECONFIG: clusterInfo().kubeconfig }, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    return { ok: true, out };
  } catch (err) {
    return { ok: false, out: String((err as { stderr?: string }).stderr) };
  }
}

const dryRun = (pod: V1Pod) => as(controller, ['create', '-f', '-', '--dry-run=server'], JSON.stringify(pod));

/** Until the policy (just installed or changed) answers: a refusal that is not RBAC's, or the deadline. */
async function refusedOnce(pod: V1Pod): Promise<{ ok: boolean; out: string }> {
  return until('the admission policy in force', () => {
    const r = dryRun(pod);
    return !r.ok && r.out.includes(POLICY) ? r : undefined;
  }, { timeoutMs: 30_000, intervalMs: 500 });
}

/** The pods the controller builds, with its own code and the release's runtime config (its placement and hostUsers=false). */
function controllerPods(): { evaluation: V1Pod; probe: V1Pod } {
  const config = runtimeConfigSchema.parse(JSON.parse(kubectl(['-n', RUNS, 'get', 'configmap', 'rlmesh-runtime-config', '-o', 'jsonpath={.data.config\\.json}']).stdout));
  const image = config.preflight!.networkPolicyProbe.image;
  const placement = config.evaluations!.placement!;
  expect(config.evaluations!.hostUsers).toBe(false);
  const proxyUrl = 'http://10.96.0.10:3128';
  const ev: RLMeshEvaluation = {
    apiVersion: 'rlmesh.dev/v1alpha1',
    kind: 'RLMeshEvaluation',
    metadata: { name: 'isolation-test', namespace: RUNS, uid: '00000000-0000-4000-8000-000000000002' },
    spec: { evaluationId: 'ev_isolation_test', image: `${config.controlPlane.registryHost}/envs/test:1`, deadlineSeconds: 60, cancelled: false },
  };
  const gate = gateTargets(proxyUrl, { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' })!;
  const evaluation = buildEvaluationPod(ev, {
    namespace: RUNS,
    pullSecret: config.credentials.pullSecret,
    proxyUrl,
    networkGate: { image, ...gate, graceSeconds: GATE_GRACE_SECONDS },
    placement,
    hostUsers: false,
    cache: { pvcName: config.artifactCache.pvcName, accessModes: ['ReadWriteOnce'], nodeName: 'kwok-node-0' },
  });
  const probe = probePod({ runsNamespace: RUNS, image, pullSecrets: [config.credentials.pullSecret], targets: defaultProbeTargets(proxyUrl, config.ports.metrics, '10.244.0.9'), placement });
  return { evaluation, probe };
}

function altered(pod: V1Pod, change: (spec: V1Pod['spec'] & object) => void): V1Pod {
  const copy = structuredClone(pod);
  change(copy.spec!);
  return copy;
}

describe("the controller's pods stay inside the operator's placement policy (ValidatingAdmissionPolicy rlmesh-cluster-controller-pods)", () => {
  it('refuses a control-plane toleration, nodeName, a missing nodeSelector or affinity term, naming the rule; the pods as the controller builds them pass', async () => {
    const { evaluation, probe } = controllerPods();
    const controlPlane = await refusedOnce(altered(evaluation, (s) => { s.tolerations = [...(s.tolerations ?? []), CONTROL_PLANE]; }));
    expect(controlPlane.out).toContain("may give pods only the tolerations of evaluations.tolerations (and the API server defaults for not-ready and unreachable nodes), not node-role.kubernetes.io/control-plane|Exists||NoSchedule| (key|operator|value|effect|seconds)");
    const refusals: [string, V1Pod, string][] = [
      ['a toleration of every taint', altered(evaluation, (s) => { s.tolerations = [{ operator: 'Exists' }]; }), 'not |Exists|||'],
      ['the operator\'s toleration widened to NoExecute', altered(evaluation, (s) => { s.tolerations = [{ ...TOLERATION, effect: 'NoExecute' }]; }), 'not dedicated|Equal|evaluations|NoExecute|'],
      ['nodeName', altered(evaluation, (s) => { s.nodeName = 'control-plane-0'; }), 'may not set the nodeName of a pod (control-plane-0): it skips the scheduler'],
      ['no nodeSelector', altered(evaluation, (s) => { delete s.nodeSelector; }), "must carry evaluations.nodeSelector {pool:evaluations}"],
      ['another pool', altered(evaluation, (s) => { s.nodeSelector = { pool: 'system' }; }), 'must carry evaluations.nodeSelector'],
      ['no required node affinity', altered(evaluation, (s) => { s.affinity = {}; }), 'must have required node affinity whose every term holds kubernetes.io/os In linux and kubernetes.io/arch In amd64 and all requirements of one of evaluations.affinity\'s required node terms'],
      ['a term without the operator\'s zones', altered(evaluation, (s) => {
        s.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms.push({ matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }, { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] }] });
      }), 'must have required node affinity'],
      ['the runtime components\' user', altered(evaluation, (s) => { s.securityContext!.runAsUser = POD_USERS.runtime.uid; }), `must run as the evaluation user ${POD_USERS.evaluation.uid}:${POD_USERS.evaluation.gid}`],
      ['a container as the runtime components\' user', altered(evaluation, (s) => { s.containers[0]!.securityContext!.runAsUser = POD_USERS.runtime.uid; }), 'must run as the evaluation user'],
      ['their group as a supplemental group', altered(evaluation, (s) => { s.securityContext!.supplementalGroups = [POD_USERS.runtime.gid]; }), 'must run as the evaluation user'],
      ['the node\'s users (evaluations.hostUsers=false)', altered(evaluation, (s) => { delete s.hostUsers; }), 'must set hostUsers: false (evaluations.hostUsers=false)'],
    ];
    for (const [what, pod, message] of refusals) {
      const r = dryRun(pod);
      expect(r.ok, what).toBe(false);
      expect(r.out, what).toContain(POLICY);
      expect(r.out, what).toContain(message);
    }
    // the API server's own not-ready/unreachable tolerations are added to every pod and pass
    const defaults = altered(evaluation, (s) => { s.tolerations = [...(s.tolerations ?? []), { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }]; });
    expect(dryRun(defaults).ok).toBe(true);
    const own = dryRun(evaluation);
    expect(own.ok, `the evaluation pod: ${own.out}`).toBe(true);
    // the admitted pod is what the controller built: hostUsers false, the evaluation user
    const admitted = JSON.parse(as(controller, ['create', '-f', '-', '--dry-run=server', '-o', 'json'], JSON.stringify(evaluation)).out) as V1Pod;
    expect(admitted.spec!.hostUsers).toBe(false);
    expect(admitted.spec!.securityContext).toMatchObject({ runAsUser: POD_USERS.evaluation.uid, runAsGroup: POD_USERS.evaluation.gid });
    const probed = dryRun(probe);
    expect(probed.ok, `the probe pod: ${probed.out}`).toBe(true);
  });
});

describe("rlmesh-runs' LimitRange max and ResourceQuota, at the API server", () => {
  const pod = (name: string, resources: Record<string, string>): string => JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: RUNS },
    spec: {
      securityContext: { runAsNonRoot: true, runAsUser: POD_USERS.evaluation.uid, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{ name: 'c', image: 'registry.rlmesh.dev/envs/test:1', resources: { requests: resources, limits: resources }, securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
    },
  });

  it('the defaults: a max per container and a quota on CPU, memory and both GPU kinds', () => {
    const lr = JSON.parse(kubectl(['-n', RUNS, 'get', 'limitrange', 'rlmesh-runs-defaults', '-o', 'json']).stdout) as { spec: { limits: { max?: Record<string, string> }[] } };
    expect(lr.spec.limits[0]!.max).toEqual({ cpu: '32', memory: '256Gi', 'ephemeral-storage': '200Gi' });
    const quota = JSON.parse(kubectl(['-n', RUNS, 'get', 'resourcequota', 'rlmesh-runs', '-o', 'json']).stdout) as { spec: { hard: Record<string, string> } };
    // as the API server writes quantities back (1000 pods is 1k)
    expect(Object.fromEntries(Object.entries(quota.spec.hard).map(([k, q]) => [k, parseQuantity(q)]))).toEqual({
      pods: 1000, 'requests.cpu': 256, 'requests.memory': 2 ** 40, 'limits.memory': 2 ** 40, 'requests.nvidia.com/gpu': 16, 'requests.amd.com/gpu': 16,
    });
  });

  it('refuses a pod above the max, and one above the GPU quota; nothing is created', async () => {
    // the quota's status is filled by the quota controller; until then it refuses every pod for another reason
    await until('the quota controller to fill in status.hard', () => kubectl(['-n', RUNS, 'get', 'resourcequota', 'rlmesh-runs', '-o', 'jsonpath={.status.hard.pods}']).stdout !== '' || undefined, { timeoutMs: 60_000 });
    const cpu = as('', ['create', '-f', '-'], pod('isolation-above-max', { cpu: '64', memory: '1Gi', 'ephemeral-storage': '1Gi' }));
    expect(cpu.ok).toBe(false);
    expect(cpu.out).toContain('maximum cpu usage per Container is 32, but limit is 64');
    const memory = as('', ['create', '-f', '-'], pod('isolation-above-max', { cpu: '1', memory: '512Gi', 'ephemeral-storage': '1Gi' }));
    expect(memory.ok).toBe(false);
    expect(memory.out).toContain('maximum memory usage per Container is 256Gi, but limit is 512Gi');
    const gpus = as('', ['create', '-f', '-'], pod('isolation-above-quota', { cpu: '1', memory: '1Gi', 'ephemeral-storage': '1Gi', 'nvidia.com/gpu': '17' }));
    expect(gpus.ok).toBe(false);
    expect(gpus.out).toMatch(/exceeded quota: rlmesh-runs, requested: requests\.nvidia\.com\/gpu=17, used: requests\.nvidia\.com\/gpu=0, limited: requests\.nvidia\.com\/gpu=16/);
    expect(kubectl(['-n', RUNS, 'get', 'pods', 'isolation-above-max', 'isolation-above-quota', '--ignore-not-found', '-o', 'name']).stdout.trim()).toBe('');
  });
});
