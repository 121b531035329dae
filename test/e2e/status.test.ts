// rlmesh status against a real install on the real node: every check ✓ on a
// healthy one, and each fault a user meets shown as ✗ with what to do: the
// control plane away (the agent disconnected, its spool filling), the
// NetworkPolicy probe failing, a wrong pull Secret, a control plane that refuses
// the agent's version. The CLI runs as a user
// runs it: `node cli/main.ts status` with the cluster's admin kubeconfig; and
// `helm test`, whose hook pod runs the same checks in the cluster with the
// chart's rlmesh-status roles, exit 0 when healthy and non-zero on a ✗.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { helm, kubectl, run, serviceAccountKubeconfig } from '../support/cluster.ts';
import { controlPlaneMainOfVersion } from '../support/control-plane-of-version.ts';
import { api, ROOT, startControlPlane, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { dockerConfigJson } from '../../lib/credential-secret.ts';
import type { StatusReport } from '../../lib/status/run.ts';
import { parseVersion, SUPPORTED_MINORS_BEHIND } from '../../lib/version-skew.ts';
import {
  LAB_HOST_USERS, NS, RUNS, Runtime, cleanSlate, cliPath, controlPlane, controlPlaneListen, evaluationImage, forgetRuntimeImage, releasedChart, runInstallCommand, smallEvaluation, submit,
  upgradeReusing, waitConnected, waitFinished, type Chart,
} from './harness.ts';

let chart: Chart;
let cp: ControlPlane;
let clusterId = '';
let image = '';
const rt = new Runtime();

type Status = { code: number; report: StatusReport; table: string };

/** rlmesh status with the admin kube context, or with `kubeconfig`. */
function status(kubeconfig?: string): Status {
  const as = kubeconfig ? ['--kubeconfig', kubeconfig] : [];
  const json = run('node', [cliPath, 'status', ...as, '-o', 'json']);
  const table = run('node', [cliPath, 'status', ...as]).stdout;
  return { code: json.status, report: JSON.parse(json.stdout) as StatusReport, table };
}

// who runs rlmesh status with the chart's least-privilege roles (statusRole.subjects)
const READER = { namespace: 'default', name: 'rlmesh-status-reader' };
const check = (s: Status, id: string) => s.report.checks.find((c) => c.id === id)!;

/** helm test of the release, with the hook pod's log (its rlmesh status table). */
function helmTest(): { status: number; out: string } {
  const r = helm(['test', 'rlmesh', '-n', NS, '--logs', '--timeout', '3m'], { allowFail: true });
  return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
}

/** Runs rlmesh status until `id` has `verdict`; returns that run. */
async function statusUntil(id: string, verdict: 'pass' | 'warn' | 'fail', timeoutMs = 120_000): Promise<Status> {
  return until(`rlmesh status: ${id} ${verdict}`, () => {
    const s = status();
    return check(s, id)?.verdict === verdict ? s : undefined;
  }, { timeoutMs, intervalMs: 2000 });
}

beforeAll(async () => {
  cleanSlate();
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'status' });
  clusterId = created.body.clusterId;
  // a small spool, so that the control plane away fills it with a handful of evaluations
  // the API's addresses from helm's lookup (the metrics ports admit them: rlmesh status reads the proxy's refusals through the API server); the lab node's users accepted (LAB_HOST_USERS)
  kubectl(['-n', READER.namespace, 'create', 'serviceaccount', READER.name], { allowFail: true });
  const reader = JSON.stringify([{ kind: 'ServiceAccount', ...READER }]);
  runInstallCommand(cp, `${created.body.installCommand} --set agent.spool.size=16Ki ${LAB_HOST_USERS.join(' ')} --set-json 'statusRole.subjects=${reader}'`);
  await waitConnected(cp, clusterId);
}, 400_000);

afterAll(async () => {
  kubectl(['-n', READER.namespace, 'delete', 'serviceaccount', READER.name, '--ignore-not-found'], { allowFail: true });
  await cp?.stop();
  cleanSlate();
});

describe('rlmesh status', () => {
  it('a healthy install: every check ✓ and exit 0; the agent names its cluster; the proxy\'s recent refusals; no secret in the output', async () => {
    expect((await waitFinished(cp, await submit(cp, clusterId, smallEvaluation(image)))).phase).toBe('Succeeded');
    // an evaluation that asks the egress proxy for a host outside its allow-list (the harness's public name)
    const refused = await submit(cp, clusterId, smallEvaluation(image, { TEST_PROBE_URL: 'https://other.public.test/probe', TEST_DURATION: '1s' }));
    expect((await waitFinished(cp, refused)).phase).toBe('Succeeded');
    // the probe and the preflight run shortly after the start: wait for their first results
    const s = await until('every check to pass', () => {
      const r = status();
      return r.report.checks.every((c) => c.verdict === 'pass') ? r : undefined;
    }, { timeoutMs: 180_000, intervalMs: 3000 }).catch(() => status());
    console.log(`healthy:\n${s.table}`);
    expect(s.report.checks.filter((c) => c.verdict !== 'pass')).toEqual([]);
    expect(s.code).toBe(0);
    // preflight reached both of the platform's endpoints from the agent pod, over TLS its CA bundle trusts
    const preflight = JSON.parse(kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-preflight', '-o', 'jsonpath={.data.report\\.json}']).stdout) as { checks: { id: string; found: string }[] };
    expect(preflight.checks.find((c) => c.id === 'outbound-443')?.found).toMatch(/^from the agent pod: controlplane\.rlmesh\.test:443 TLS ok in \d+ ms; registry\.rlmesh\.dev:443 TLS ok in \d+ ms$/);
    expect(s.table).toMatch(/^✓ release /m);
    expect(check(s, 'agent').found).toMatch(new RegExp(`cluster ${clusterId} connected since .*last heard from the control plane`));
    expect(check(s, 'credentials').found).toMatch(/written by the join/);
    expect(check(s, 'evaluations').found).toMatch(/Succeeded 2/);
    expect(check(s, 'egress-proxy').found).toMatch(/^\d+\/\d+ ready; [1-9]\d* refused in the last 10 min, the last \d+(s|m) ago; [1-9]\d* of \d+ decisions refused since its pods started \(not-allowed [1-9]/);
    expect(s.report.checks.map((c) => c.id)).toEqual(['release', 'agent', 'credentials', 'preflight', 'network-policy', 'api-server-addresses', 'controller-leader', 'egress-proxy', 'cache', 'evaluations', 'spool']);
    // the credentials' values never appear
    const control = Buffer.from(kubectl(['-n', NS, 'get', 'secret', 'rlmesh-cluster-control', '-o', 'jsonpath={.data.control}']).stdout, 'base64').toString();
    expect(control).toMatch(/^rlm_cc_/);
    expect(s.table + JSON.stringify(s.report)).not.toContain(control);
    expect(s.table).not.toMatch(/rlm_(cc|rp|rs)_/);
  }, 400_000);

  it("with the chart's least-privilege roles, which may not read a Secret: every check ✓, the credentials from the metadata the agent publishes", async () => {
    const kc = await serviceAccountKubeconfig(READER.namespace, READER.name);
    for (const ns of [NS, RUNS]) {
      for (const verb of ['get', 'list', 'watch']) {
        expect(kubectl(['--kubeconfig', kc, 'auth', 'can-i', verb, 'secrets', '-n', ns], { allowFail: true }).stdout.trim(), `${verb} secrets -n ${ns}`).toBe('no');
      }
    }
    expect(kubectl(['--kubeconfig', kc, 'auth', 'can-i', 'get', 'secrets/rlmesh-cluster-control', '-n', NS], { allowFail: true }).stdout.trim()).toBe('no');
    const s = await until('every check to pass as the reader', () => {
      const r = status(kc);
      return r.report.checks.every((c) => c.verdict === 'pass') ? r : undefined;
    }, { timeoutMs: 120_000, intervalMs: 3000 }).catch(() => status(kc));
    console.log(`as ${READER.namespace}:${READER.name}:\n${s.table}`);
    expect(s.report.checks.filter((c) => c.verdict !== 'pass')).toEqual([]);
    expect(s.code).toBe(0);
    expect(check(s, 'credentials').found).toMatch(/^control Secret rlmesh-cluster-control written by the join, written .* ago, in use by the agent since .*; pull Secret rlmesh-registry-pull in rlmesh-system and rlmesh-runs \(as the agent published their metadata\)$/);
    expect(check(s, 'egress-proxy').found).toMatch(/refused in the last 10 min/);
  }, 200_000);

  it('helm test: the hook pod runs rlmesh status in the cluster as rlmesh-status-test, every check ✓, exit 0', () => {
    const r = helmTest();
    console.log(`helm test, healthy:\n${r.out}`);
    expect(r.status).toBe(0);
    expect(r.out).toMatch(/TEST SUITE:\s+rlmesh-status-test[\s\S]*Phase:\s+Succeeded/);
    for (const id of ['release', 'agent', 'credentials', 'preflight', 'network-policy', 'api-server-addresses', 'controller-leader', 'egress-proxy', 'cache', 'evaluations', 'spool']) expect(r.out).toMatch(new RegExp(`^✓ ${id} `, 'm'));
    expect(r.out).not.toMatch(/^✗ /m);
    const pod = JSON.parse(kubectl(['-n', NS, 'get', 'pod', 'rlmesh-status-test', '-o', 'json']).stdout) as { spec: { serviceAccountName: string; containers: { image: string }[] } };
    expect(pod.spec.serviceAccountName).toBe('rlmesh-status-test');
    const agentImage = kubectl(['-n', NS, 'get', 'deployment', 'rlmesh-cluster-agent', '-o', 'jsonpath={.spec.template.spec.containers[0].image}']).stdout;
    expect(pod.spec.containers[0]!.image).toBe(agentImage);
  }, 240_000);

  it('the control plane away: ✗ agent (not connected, since when, what to do), then ✗ spool as it fills; back: ✓ and drained', async () => {
    const ids = await Promise.all(Array.from({ length: 20 }, () => submit(cp, clusterId, smallEvaluation(image, { TEST_DURATION: '20s' }))));
    await until('the evaluations in the cluster', () => (kubectl(['-n', RUNS, 'get', 'rle', '-o', 'name']).stdout.split('\n').filter((l) => ids.some((id) => l.endsWith(id))).length === ids.length ? true : undefined), { timeoutMs: 60_000 });
    await cp.stop();
    const away = await statusUntil('agent', 'fail', 90_000);
    console.log(`control plane away:\n${away.table}`);
    expect(away.code).toBe(1);
    expect(check(away, 'agent').found).toMatch(new RegExp(`cluster ${clusterId} not connected since .*session (backoff|connecting)`));
    expect(check(away, 'agent').fix).toMatch(/check that the control plane is up/);
    expect(away.table).toMatch(/^✗ agent .*\n\s+→ The agent cannot hold a session/m);
    // helm test fails on the same ✗, its log naming it
    const failing = helmTest();
    console.log(`helm test, control plane away:\n${failing.out}`);
    expect(failing.status).not.toBe(0);
    expect(failing.out).toMatch(/Phase:\s+Failed/);
    expect(failing.out).toMatch(/^✗ agent /m);
    // the evaluations finish meanwhile; their updates wait in the spool
    const full = await statusUntil('spool', 'fail', 180_000);
    console.log(`spool filling:\n${full.table}`);
    expect(check(full, 'spool').found).toMatch(/not yet acknowledged.*(nearly full|full, new updates wait); the agent has no session/);
    expect(check(full, 'spool').fix).toMatch(/Restore the session/);

    cp = await controlPlane(chart, cp.dataDir);
    await waitConnected(cp, clusterId);
    const back = await statusUntil('spool', 'pass', 180_000);
    expect(check(back, 'agent').verdict).toBe('pass');
    for (const id of ids) await waitFinished(cp, id, 180);
  }, 600_000);

  it('the NetworkPolicy probe failing: ✗ network-policy, evaluations wait; policies back: ✓', async () => {
    kubectl(['-n', RUNS, 'delete', 'networkpolicies', '--all']);
    kubectl(['-n', NS, 'delete', 'networkpolicies', '--all']);
    await rt.restart('controller');
    const s = await statusUntil('network-policy', 'fail', 180_000);
    console.log(`probe failing:\n${s.table}`);
    expect(s.code).toBe(1);
    expect(check(s, 'network-policy').found).toMatch(/evaluations wait as NetworkPolicyNotEnforced/);
    expect(check(s, 'network-policy').fix).toMatch(/runWithoutNetworkPolicyEnforcement=true/);
    // the upgrade puts the policies back; the controller probes again within a minute
    upgradeReusing(chart, ['--wait', '--timeout', '6m']);
    await statusUntil('network-policy', 'pass', 180_000);
  }, 600_000);

  it('a wrong pull Secret: ✗ credentials naming the pod the registry refused and the Secret to fix; restored: ✓', async () => {
    const good = JSON.parse(kubectl(['-n', RUNS, 'get', 'secret', 'rlmesh-registry-pull', '-o', 'json']).stdout) as { data: Record<string, string> };
    const config = JSON.parse(Buffer.from(good.data['.dockerconfigjson']!, 'base64').toString('utf8')) as { auths: Record<string, { username: string; password: string }> };
    const [host, entry] = Object.entries(config.auths)[0]!;
    const wrongPassword = `rlm_rp_${'y'.repeat(40)}`;
    const patch = (c: unknown) => kubectl(['-n', RUNS, 'patch', 'secret', 'rlmesh-registry-pull', '--type', 'merge', '-p', JSON.stringify({ data: { '.dockerconfigjson': Buffer.from(typeof c === 'string' ? c : JSON.stringify(c)).toString('base64') } })]);
    patch(dockerConfigJson(host, entry.username, wrongPassword));
    try {
      forgetRuntimeImage();
      kubectl(['-n', RUNS, 'delete', 'pod', rt.pod('filler').metadata.name, '--wait=false']);
      const s = await statusUntil('credentials', 'fail', 180_000);
      console.log(`wrong pull Secret:\n${s.table}`);
      expect(s.code).toBe(1);
      expect(check(s, 'credentials').found).toMatch(/the registry refuses it: pod rlmesh-runs\/rlmesh-artifact-cache-filler-\S+ (ImagePullBackOff|ErrImagePull): .*401/);
      expect(check(s, 'credentials').fix).toMatch(/Secret rlmesh-runs\/rlmesh-registry-pull/);
      expect(s.table + JSON.stringify(s.report)).not.toContain(wrongPassword);
      expect(s.table).not.toContain(entry.password);
    } finally {
      patch(config);
    }
    await rt.ready('filler', 360);
    await statusUntil('credentials', 'pass', 60_000);
  }, 600_000);
  it('a control plane that no longer accepts this agent\'s version: ✗ agent with the control plane\'s one line and what to do; the accepting release back: ✓', async () => {
    const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    const ours = parseVersion(version)!;
    // the platform upgraded one minor version past the window of agents it accepts
    const newer = `${ours.major}.${ours.minor + SUPPORTED_MINORS_BEHIND + 1}.0`;
    await cp.stop();
    cp = await startControlPlane({ dataDir: cp.dataDir, main: controlPlaneMainOfVersion(newer), ...controlPlaneListen(chart) });
    const s = await until('rlmesh status: the agent refused for its version', () => {
      const r = status();
      return /refuses agent/.test(check(r, 'agent').found) ? r : undefined;
    }, { timeoutMs: 120_000, intervalMs: 2000 });
    console.log(`agent version refused:\n${s.table}`);
    expect(s.code).toBe(1);
    expect(check(s, 'agent').verdict).toBe('fail');
    expect(check(s, 'agent').found).toBe(
      `cluster ${clusterId}: the control plane (controlplane.rlmesh.test) refuses agent ${version} (control plane ${newer}): agent ${version} refused: it is ${SUPPORTED_MINORS_BEHIND + 1} minor versions older than the control plane, ` +
        `and this control plane runs ${newer} and accepts agents ${ours.major}.${ours.minor + 1} to ${ours.major}.${ours.minor + SUPPORTED_MINORS_BEHIND + 1} (the same major version, at most ${SUPPORTED_MINORS_BEHIND} minor versions older, never newer); ` +
        `upgrade the chart (helm upgrade rlmesh <chart> --version ${ours.major}.${ours.minor + SUPPORTED_MINORS_BEHIND}.x --reuse-values, then on to ${ours.major}.${ours.minor + SUPPORTED_MINORS_BEHIND + 1}), in steps of at most ${SUPPORTED_MINORS_BEHIND} minor versions`,
    );
    expect(check(s, 'agent').fix).toMatch(/^Upgrade the chart to a release the control plane accepts/);
    // the control plane said the same in its log, in one line (its logger writes asynchronously)
    const said = `session refused: agent ${version} refused: it is ${SUPPORTED_MINORS_BEHIND + 1} minor versions older`;
    await until('the refusal in the control plane\'s log', () => readFileSync(cp.logFile, 'utf8').includes(said) || undefined, { timeoutMs: 15_000 })
      .catch(() => expect(readFileSync(cp.logFile, 'utf8').split('\n').slice(-30).join('\n')).toContain(said));

    // the control plane of this release again: the agent's next rare retry connects
    await cp.stop();
    cp = await controlPlane(chart, cp.dataDir);
    await statusUntil('agent', 'pass', 120_000);
  }, 400_000);
});
