// Isolation defaults for untrusted code, on the real node: an evaluation runs as the
// evaluation user (no runtime component's), with hostUsers as the nodes' kubelets report
// user namespace support (evaluations.hostUsers=auto); with evaluations.hostUsers=false on
// nodes without it, evaluations wait as UserNamespacesUnsupported, preflight fails and the
// platform hears the cluster accepts none; and the real node's kubelet indeed cannot start
// a pod with hostUsers: false where it reports no support (or runs it where it does).
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realNodes } from '../cluster/real-node.ts';
import { POD_USERS } from '../../lib/fixed-names.ts';
import { NO_PLACEMENT } from '../../lib/evaluation-placement.ts';
import { userNamespaceSupport, type UserNamespaceSupport } from '../../lib/user-namespaces.ts';
import { kubectl } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { NS, PLUMBING, RUNS, cleanSlate, controlPlane, evaluation, evaluationImage, localValues, quoted, releasedChart, runPrinted, smallEvaluation, submit, upgradeReusing, waitConnected, waitFinished, type Chart } from './harness.ts';

let chart: Chart;
let cp: ControlPlane;
let image = '';
let clusterId = '';
let support: UserNamespaceSupport;

type Check = { id: string; verdict: string; found: string; fix: string };
const preflightCheck = (id: string): Check | undefined => {
  const r = kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-preflight', '-o', 'jsonpath={.data.report\\.json}'], { allowFail: true });
  if (r.status !== 0 || !r.stdout) return undefined;
  return (JSON.parse(r.stdout) as { checks: Check[] }).checks.find((c) => c.id === id);
};
const podOf = (id: string): V1Pod | undefined =>
  (JSON.parse(kubectl(['-n', RUNS, 'get', 'pods', '-o', 'json']).stdout) as { items: V1Pod[] }).items.find((p) => p.metadata?.annotations?.['rlmesh.dev/evaluation-id'] === id);

beforeAll(async () => {
  cleanSlate();
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'isolation' });
  clusterId = created.body.clusterId;
  runPrinted(`${created.body.installCommand} ${quoted([...localValues(cp), ...PLUMBING])}`);
  await waitConnected(cp, clusterId);
  // what the nodes' kubelets say, judged as the controller judges it (default policy, default runtime handler)
  const nodes = (JSON.parse(kubectl(['get', 'nodes', '-o', 'json']).stdout) as { items: V1Node[] }).items;
  support = userNamespaceSupport(nodes, NO_PLACEMENT, { name: '' });
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  cleanSlate();
});

describe('evaluation pods on the real node', () => {
  it('run as the evaluation user, which no runtime component uses, with hostUsers as the nodes report user namespace support', async () => {
    const id = await submit(cp, clusterId, smallEvaluation(image, { TEST_DURATION: '20s' }));
    const pod = await until('the evaluation pod running', () => {
      const p = podOf(id);
      return p?.status?.phase === 'Running' ? p : undefined;
    }, { timeoutMs: 180_000, intervalMs: 1000 });
    expect(realNodes().map((n) => n.name)).toContain(pod.spec!.nodeName);
    expect(pod.spec!.securityContext).toMatchObject({ runAsUser: POD_USERS.evaluation.uid, runAsGroup: POD_USERS.evaluation.gid });
    expect(pod.spec!.hostUsers).toBe(support.supported ? false : undefined);
    // the process itself reports its uid (the test image's start line)
    const start = await until('the start line', () => kubectl(['-n', RUNS, 'logs', pod.metadata!.name!, '-c', 'evaluation'], { allowFail: true }).stdout.split('\n')
      .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.step === 'start'), { timeoutMs: 60_000 });
    expect(start.uid).toBe(POD_USERS.evaluation.uid);
    // no pod of the runtime runs as that user
    const runtimePods = (JSON.parse(kubectl(['-n', NS, 'get', 'pods', '-o', 'json']).stdout) as { items: V1Pod[] }).items;
    expect(runtimePods.length).toBeGreaterThan(0);
    for (const p of runtimePods) expect(p.spec!.securityContext!.runAsUser, p.metadata!.name).toBe(POD_USERS.runtime.uid);
    const done = await waitFinished(cp, id, 180);
    expect(done.phase, JSON.stringify(done.updates)).toBe('Succeeded');
    // preflight says what was decided: pass with user namespaces, warn without
    const check = await until('the user-namespaces check', () => preflightCheck('user-namespaces'), { timeoutMs: 60_000 });
    expect(check.verdict).toBe(support.supported ? 'pass' : 'warn');
    expect(check.found).toContain(support.found);
  });

  it('evaluations.hostUsers=false: user namespaces or nothing; where a node lacks them evaluations wait, preflight fails and the platform hears why', async () => {
    upgradeReusing(chart, ['--set', 'evaluations.hostUsers=false', '--wait', '--timeout', '5m']);
    await waitConnected(cp, clusterId);
    const id = await submit(cp, clusterId, smallEvaluation(image));
    if (support.supported) {
      const pod = await until('the evaluation pod', () => podOf(id), { timeoutMs: 120_000 });
      expect(pod.spec!.hostUsers).toBe(false);
      expect((await waitFinished(cp, id, 180)).phase).toBe('Succeeded');
      return;
    }
    const ev = await until('the evaluation waiting as UserNamespacesUnsupported', () => {
      const r = kubectl(['-n', RUNS, 'get', 'rlmeshevaluations', '-o', 'json']).stdout;
      return (JSON.parse(r) as { items: { spec: { evaluationId: string }; status?: { reason?: string; message?: string; phase?: string } }[] }).items
        .find((e) => e.spec.evaluationId === id && e.status?.reason === 'UserNamespacesUnsupported');
    }, { timeoutMs: 120_000, intervalMs: 1000 });
    expect(ev.status!.phase).toBe('Waiting');
    expect(ev.status!.message).toContain(`evaluations.hostUsers=false asks for user namespaces, but ${support.found}; no evaluation pod starts until they do`);
    expect(podOf(id)).toBeUndefined();
    const update = await until('the platform to hear it', async () => (await evaluation(cp, id)).updates.find((u) => (u.message ?? '').includes('evaluations.hostUsers=false')), { timeoutMs: 60_000 });
    expect(update.phase).toBe('Waiting');
    const check = await until('the failing user-namespaces check', () => {
      const c = preflightCheck('user-namespaces');
      return c?.verdict === 'fail' ? c : undefined;
    }, { timeoutMs: 120_000 });
    expect(check.found).toContain(support.found);
    expect(check.fix).toContain('containerd 2.0+');
    const row = await until('the cluster listed as accepting no evaluations', async () => {
      const r = await api<{ clusters: { id: string; acceptsEvaluations: boolean | null; evaluationsBlockedReason?: string }[] }>(cp, 'GET', '/v1/clusters');
      const c = r.body.clusters.find((x) => x.id === clusterId);
      return c?.acceptsEvaluations === false ? c : undefined;
    }, { timeoutMs: 120_000 });
    expect(row.evaluationsBlockedReason).toContain('evaluations wait as UserNamespacesUnsupported');
    await api(cp, 'POST', `/v1/evaluations/${id}/cancel`, { reason: 'e2e: no user namespaces here' });
  });

  it('the real node\'s kubelet runs a pod with hostUsers: false exactly where it reports user namespace support', async () => {
    const node = realNodes()[0]!.name;
    const name = 'isolation-host-users';
    kubectl(['-n', RUNS, 'delete', 'pod', name, '--ignore-not-found', '--wait=true']);
    kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: RUNS },
        spec: {
          nodeName: node,
          hostUsers: false,
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          imagePullSecrets: [{ name: 'rlmesh-registry-pull' }],
          securityContext: { runAsNonRoot: true, runAsUser: POD_USERS.evaluation.uid, runAsGroup: POD_USERS.evaluation.gid, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [{ name: 'c', image, env: [{ name: 'TEST_DURATION', value: '1s' }], resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '50m', memory: '64Mi' } }, securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
        },
      }),
    });
    try {
      // the API server kept the field (UserNamespacesSupport on); the kubelet decides the rest
      expect(kubectl(['-n', RUNS, 'get', 'pod', name, '-o', 'jsonpath={.spec.hostUsers}']).stdout).toBe('false');
      if (support.supported) {
        await until('the pod to succeed', () => kubectl(['-n', RUNS, 'get', 'pod', name, '-o', 'jsonpath={.status.phase}']).stdout === 'Succeeded' || undefined, { timeoutMs: 120_000 });
        return;
      }
      const why = await until('the kubelet to refuse it', () => {
        const events = kubectl(['-n', RUNS, 'get', 'events', '--field-selector', `involvedObject.name=${name}`, '-o', 'jsonpath={range .items[*]}{.reason}: {.message}{"\\n"}{end}']).stdout;
        const status = kubectl(['-n', RUNS, 'get', 'pod', name, '-o', 'jsonpath={.status.phase} {.status.reason} {.status.message}']).stdout;
        const line = [...events.split('\n'), status].find((l) => /user ?namespace|userns|idmap/i.test(l));
        return line;
      }, { timeoutMs: 120_000, intervalMs: 1000 });
      console.log(`the real node ${node} refuses hostUsers: false: ${why}`);
      expect(kubectl(['-n', RUNS, 'get', 'pod', name, '-o', 'jsonpath={.status.phase}']).stdout).not.toBe('Succeeded');
    } finally {
      kubectl(['-n', RUNS, 'delete', 'pod', name, '--ignore-not-found', '--wait=false']);
    }
  });
});
