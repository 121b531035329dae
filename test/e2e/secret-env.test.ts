// An evaluation's secret environment on the real node: the platform sends the
// values as Assignment.secret_env; the agent writes them into the evaluation's
// own Secret <evaluation>-env (owned by the RLMeshEvaluation) and the
// RLMeshEvaluation names only the variables; the controller's pod reads them
// with secretKeyRef, which the kubelet resolves (the pod has no token). The
// container sees the values; the RLMeshEvaluation, the pod spec, the agent's
// spool, the components' logs and the control plane's database files never
// hold them; deleting the evaluation deletes the Secret.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { ROOT, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { installNewCluster, NS, RUNS, Runtime, cleanSlate, controlPlane, evaluationImage, releasedChart, smallEvaluation, submit, waitFinished, type Chart } from './harness.ts';

let chart: Chart;
let cp: ControlPlane;
let image = '';
let clusterId = '';
const rt = new Runtime();

/** Every file under `dir`, as text. */
function filesUnder(dir: string): string {
  return readdirSync(dir).map((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? filesUnder(p) : readFileSync(p).toString('latin1');
  }).join('');
}

beforeAll(async () => {
  cleanSlate();
  // helm install leaves CRDs that exist alone (uninstall keeps them; the upgrade hook reapplies them): this release's, as the hook would
  kubectl(['apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'crds')]);
  kubectl(['wait', '--for=condition=Established', 'crd/rlmeshevaluations.rlmesh.dev', '--timeout=60s']);
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  clusterId = await installNewCluster(cp, 'secret-env');
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  cleanSlate();
});

describe('secret environment values of an evaluation', () => {
  it('reach the container from the evaluation\'s own Secret, are never in the RLMeshEvaluation, its pod spec, the spool, the logs or the control plane\'s files, and go with the evaluation', async () => {
    const value = `sekrit-${randomBytes(12).toString('hex')}`;
    const apiKey = `sekrit-key-${randomBytes(12).toString('hex')}`;
    // the test image prints the path it is told to read (TEST_ARTIFACT): here the secret value itself
    const id = await submit(cp, clusterId, { ...smallEvaluation(image, { TEST_DURATION: '3s' }), secretEnv: { TEST_ARTIFACT: `/nonexistent/${value}`, API_KEY: apiKey } });

    const done = await waitFinished(cp, id, 240);
    expect(done.phase, JSON.stringify(done.updates)).toBe('Succeeded');
    const pod = kubectl(['-n', RUNS, 'get', 'pods', '-l', 'rlmesh.dev/evaluation', '-o', 'name']).stdout.split('\n').find((p) => p.includes(id))!;
    const out = kubectl(['-n', RUNS, 'logs', pod]).stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(out.find((l) => l.step === 'artifact')).toMatchObject({ path: `/nonexistent/${value}` });

    // the RLMeshEvaluation names the variables and its own Secret, and holds no value
    const yaml = kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', id, '-o', 'yaml']).stdout;
    expect(yaml).not.toContain(value);
    expect(yaml).not.toContain(apiKey);
    const obj = JSON.parse(kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', id, '-o', 'json']).stdout) as { metadata: { uid: string }; spec: Record<string, unknown> };
    expect(obj.spec.secretEnv).toEqual({ secretName: `${id}-env`, names: ['API_KEY', 'TEST_ARTIFACT'] });
    // the pod reads them by reference, through the kubelet: no token of its own
    const podJson = kubectl(['-n', RUNS, 'get', pod, '-o', 'json']).stdout;
    expect(podJson).not.toContain(value);
    const podSpec = (JSON.parse(podJson) as { spec: { automountServiceAccountToken: boolean; containers: { name: string; env: { name: string; valueFrom?: unknown }[] }[] } }).spec;
    expect(podSpec.automountServiceAccountToken).toBe(false);
    expect(podSpec.containers.find((c) => c.name === 'evaluation')!.env.filter((e) => e.valueFrom)).toEqual([
      { name: 'API_KEY', valueFrom: { secretKeyRef: { name: `${id}-env`, key: 'API_KEY' } } },
      { name: 'TEST_ARTIFACT', valueFrom: { secretKeyRef: { name: `${id}-env`, key: 'TEST_ARTIFACT' } } },
    ]);
    // the Secret holds them, owned by the evaluation
    const secret = JSON.parse(kubectl(['-n', RUNS, 'get', 'secret', `${id}-env`, '-o', 'json']).stdout) as { data: Record<string, string>; metadata: { ownerReferences?: { kind: string; name: string; uid: string }[] } };
    expect(Buffer.from(secret.data.API_KEY!, 'base64').toString()).toBe(apiKey);
    expect(secret.metadata.ownerReferences).toMatchObject([{ kind: 'RLMeshEvaluation', name: id, uid: obj.metadata.uid }]);

    // nowhere else: the agent's spool (its PVC's folder on the node), the logs of the agent and the controller, the control plane's files
    const spoolPv = kubectl(['-n', NS, 'get', 'pvc', 'rlmesh-agent-spool', '-o', 'jsonpath={.spec.volumeName}']).stdout;
    const spoolDir = kubectl(['get', 'pv', spoolPv, '-o', 'jsonpath={.spec.hostPath.path}']).stdout;
    expect(spoolDir).not.toBe('');
    expect(filesUnder(spoolDir)).toContain(id); // the updates of this evaluation went through it
    const elsewhere = { spool: filesUnder(spoolDir), agent: rt.log('agent'), controller: rt.log('controller'), controlPlane: filesUnder(cp.dataDir) };
    for (const [where, text] of Object.entries(elsewhere)) {
      expect(text, where).not.toContain(value);
      expect(text, where).not.toContain(apiKey);
    }

    // deleting the evaluation deletes its Secret (garbage collection of what it owns)
    kubectl(['-n', RUNS, 'delete', 'rlmeshevaluation', id, '--wait=true']);
    await until('the Secret to go with the evaluation', () => (kubectl(['-n', RUNS, 'get', 'secret', `${id}-env`], { allowFail: true }).status !== 0 ? true : undefined), { timeoutMs: 120_000 });
  });

  it('an RLMeshEvaluation that names another Secret for its secret environment is refused by the API server', () => {
    const ev = {
      apiVersion: 'rlmesh.dev/v1alpha1',
      kind: 'RLMeshEvaluation',
      metadata: { name: 'ev-borrows', namespace: RUNS },
      spec: { evaluationId: 'ev-borrows', image, deadlineSeconds: 60, secretEnv: { secretName: 'rlmesh-registry-pull', names: ['DOCKERCONFIG'] } },
    };
    const r = kubectl(['create', '-f', '-', '--dry-run=server'], { input: JSON.stringify(ev), allowFail: true });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("spec.secretEnv.secretName must be the evaluation's own Secret, <evaluation name>-env");
  });
});
