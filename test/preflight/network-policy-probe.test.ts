// The NetworkPolicy probe's orchestration and verdicts on the real local
// cluster, run with the controller's rights (test/preflight/rbac.yaml) in a
// runs namespace that enforces restricted Pod Security. kwok runs no
// containers, so each test picks what the probe pod's netprobe.ts "finds": a
// mutating admission webhook the test serves gives the probe pod the
// TEST_EXIT_CODE / TEST_DURATION environment that kwok plays
// (test/support/kwok-outcome.ts) and sends it to a kwok node; the controller's
// pod spec knows nothing of it. netprobe.ts itself is tested on loopback in
// lib/preflight/probes.test.ts, and the probe pod runs for real, against
// enforced policies, in the end-to-end suite (test/e2e/spec.test.ts).
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runNetworkPolicyProbe, startNetworkPolicyProbeLoop, PROBE_LABELS, PROBE_NAME, type ProbeOptions } from '../../controller/network-policy-probe.ts';
import { checkNetworkPolicy, PROBE_CONFIGMAP } from '../../lib/preflight/checks/network-policy.ts';
import { adminKubeConfig, kubectl } from '../support/cluster.ts';
import { outcomeEnv, startOutcomeWebhook, type Outcome, type OutcomeWebhook } from '../support/kwok-outcome.ts';
import { agentKubeConfig, apply, context, controllerKubeConfig, NS, RUNS, setUpNamespaces, tearDownNamespaces } from './support.ts';
import { until } from '../support/until.ts';

const targets = { forbidden: '10.244.0.99:9090', allowed: 'rlmesh-egress-proxy.rlmesh-pf-system.svc:3128' };
let opts: ProbeOptions;
let webhook: OutcomeWebhook;

/** Runs the probe with the controller's code; kwok ends its pod with `outcome`, as netprobe.ts would exit. */
const probe = (outcome: Outcome, extra: Partial<ProbeOptions> = {}) => {
  webhook.set(outcome);
  return runNetworkPolicyProbe({ ...opts, ...extra });
};

beforeAll(async () => {
  setUpNamespaces();
  webhook = await startOutcomeWebhook({ namespace: RUNS, labels: { 'app.kubernetes.io/name': PROBE_LABELS['app.kubernetes.io/name'] } });
  opts = {
    kc: await controllerKubeConfig(),
    namespace: NS,
    runsNamespace: RUNS,
    image: 'registry.rlmesh.dev/rlmesh/runtime:preflight-test',
    pullSecrets: ['rlmesh-registry-pull'],
    targets,
    log: pino({ level: 'silent' }),
    pollMs: 200,
    timeoutMs: 30_000,
  };
});

afterAll(async () => {
  await webhook?.close();
  kubectl(['delete', 'daemonset', 'kube-flannel-ds-rlmesh-pf', '-n', 'kube-system', '--ignore-not-found']);
  tearDownNamespaces();
});

describe('NetworkPolicy probe', () => {
  it('reports "NetworkPolicy is enforced" on exit 0; the pod passed restricted Pod Security; the agent reads the result', async () => {
    const r = await probe({ exitCode: 0 });
    expect(r.verdict).toBe('pass');
    expect(r.found).toMatch(/^NetworkPolicy is enforced: from rlmesh-runs, 10\.244\.0\.99:9090 was blocked and rlmesh-egress-proxy\.rlmesh-pf-system\.svc:3128 was reachable/);

    const pods = await adminKubeConfig().makeApiClient(k8s.CoreV1Api).listNamespacedPod({ namespace: RUNS, labelSelector: `app.kubernetes.io/name=${PROBE_NAME}` });
    expect(pods.items).toHaveLength(1);
    const pod = pods.items[0]!;
    expect(pod.status?.phase).toBe('Succeeded');
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    expect(pod.spec?.containers[0]?.command).toEqual(['/usr/local/bin/node', '/app/lib/preflight/netprobe.js', targets.forbidden, targets.allowed, '15']);
    // the outcome came from the test's webhook, not from the controller's pod spec
    expect(pod.spec?.containers[0]?.env).toEqual(outcomeEnv({ exitCode: 0 }));
    expect(webhook.admitted.some((n) => n.startsWith(`${PROBE_NAME}-`))).toBe(true);
    expect(pod.spec?.containers[0]?.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });

    const cm = JSON.parse(kubectl(['get', 'configmap', PROBE_CONFIGMAP, '-n', NS, '-o', 'jsonpath={.data.result\\.json}']).stdout) as { verdict: string; at: string };
    expect(cm.verdict).toBe('pass');
    const seen = await checkNetworkPolicy(context({}, 'agent', await agentKubeConfig()));
    expect(seen.verdict).toBe('pass');
    expect(seen.found).toContain(`(probed at ${cm.at})`);
  });

  it('fails naming Flannel when the forbidden target was reachable; replaces the previous probe pod', async () => {
    apply(`
apiVersion: apps/v1
kind: DaemonSet
metadata: { name: kube-flannel-ds-rlmesh-pf, namespace: kube-system }
spec:
  selector: { matchLabels: { app: rlmesh-pf-flannel } }
  template:
    metadata: { labels: { app: rlmesh-pf-flannel } }
    spec:
      nodeSelector: { rlmesh.dev/preflight-test: no-such-node }
      containers: [{ name: flannel, image: docker.io/flannel/flannel:v0.26.0 }]
`);
    const r = await probe({ exitCode: 10 });
    expect(r.verdict).toBe('fail');
    expect(r.found).toBe('NetworkPolicy is not enforced: a pod in rlmesh-runs reached 10.244.0.99:9090, which the policies forbid; the CNI is Flannel');
    expect(r.fix).toBe('Flannel does not enforce NetworkPolicy: install Calico (or Canal) or Cilium, or evaluation pods can bypass the egress proxy.');
    const pods = kubectl(['get', 'pods', '-n', RUNS, '-l', `app.kubernetes.io/name=${PROBE_NAME}`, '-o', 'name']).stdout.trim().split('\n');
    expect(pods).toHaveLength(1);
    kubectl(['delete', 'daemonset', 'kube-flannel-ds-rlmesh-pf', '-n', 'kube-system']);
    expect((await checkNetworkPolicy(context({}, 'agent', await agentKubeConfig()))).verdict).toBe('fail');
  });

  it('fails when the allowed egress proxy was unreachable', async () => {
    const r = await probe({ exitCode: 11 });
    expect(r.verdict).toBe('fail');
    expect(r.found).toMatch(/^a pod in rlmesh-runs could not reach the egress proxy rlmesh-egress-proxy\.rlmesh-pf-system\.svc:3128, which the policies allow/);
  });

  it('warns when the pod does not finish in time, or no probe image is configured', async () => {
    const stuck = await probe({ exitCode: 0, duration: '60s' }, { timeoutMs: 2000 });
    expect(stuck.verdict).toBe('warn');
    expect(stuck.found).toMatch(/^the probe pod in rlmesh-runs did not run: pod rlmesh-pf-runs\/rlmesh-network-policy-probe-\w+: it did not finish within 2 s/);
    const noImage = await probe({ exitCode: 0 }, { image: '' });
    expect(noImage.found).toContain('no probe image is configured (runtime config preflight.networkPolicyProbe.image)');
  });

  it('the agent warns when the probe is switched off', async () => {
    const r = await checkNetworkPolicy(context({ networkPolicyProbe: false }, 'agent', await agentKubeConfig()));
    expect(r).toMatchObject({ verdict: 'warn', fix: 'Set preflight.networkPolicyProbe.enabled=true, or verify by hand that your CNI enforces NetworkPolicy.' });
  });

  it('the loop probes at once and stops', async () => {
    kubectl(['delete', 'configmap', PROBE_CONFIGMAP, '-n', NS]);
    webhook.set({ exitCode: 0 });
    const stop = startNetworkPolicyProbeLoop({ ...opts, intervalMs: 3600_000 });
    try {
      const verdict = await until('the loop to store a result', () => {
        const r = kubectl(['get', 'configmap', PROBE_CONFIGMAP, '-n', NS, '-o', 'jsonpath={.data.summary}'], { allowFail: true });
        return r.status === 0 && r.stdout ? r.stdout : undefined;
      });
      expect(verdict).toMatch(/^pass: NetworkPolicy is enforced/);
    } finally {
      stop();
    }
  });
});
