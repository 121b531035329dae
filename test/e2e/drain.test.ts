// Drain holds on the cluster's side, on the real node with the released chart:
// the reference control plane runs with --test-ignore-drain, so that it keeps
// sending new evaluations to a draining cluster as a buggy or hostile platform
// would, and the agent itself must refuse them. The platform's drain: refused
// as ClusterDraining. The operator's drain (`rlmesh drain`, without the
// platform): refused as OperatorDrain while an evaluation already running
// finishes, the platform is told, `rlmesh status` shows who drains, since when
// and what runs; `rlmesh drain --undo` and a new evaluation runs. The CLI runs
// as a user runs it: `node cli/main.ts` with the cluster's admin kubeconfig.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl, run } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import type { StatusReport } from '../../lib/status/run.ts';
import { evaluationName } from '../../agent/assignments.ts';
import {
  installNewCluster,
  NS, RUNS, Runtime, cleanSlate, cliPath, controlPlane, evaluation, evaluationImage, releasedChart, smallEvaluation, submit,
  waitFinished, type Chart,
} from './harness.ts';

let chart: Chart;
let cp: ControlPlane;
let clusterId = '';
let image = '';
const rt = new Runtime();

type Update = { phase: string; reason?: string; message?: string };
type Row = { draining: boolean; operatorDraining?: boolean; operatorDrainingSince?: string | null };

const rlmesh = (args: string[]) => run('node', [cliPath, ...args]);
const row = async (): Promise<Row> => (await api<Row>(cp, 'GET', `/v1/clusters/${clusterId}`)).body;
const held = (id: string) => kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', evaluationName(id)], { allowFail: true }).status === 0;
const forgetDrain = () => kubectl(['-n', NS, 'delete', 'configmap', 'rlmesh-operator-drain', '--ignore-not-found'], { allowFail: true });

/** Submits (the control plane sends it though the cluster drains) and returns what the platform holds once it is final. */
async function refusedEvaluation(): Promise<{ id: string; final: Update; text: string }> {
  const id = await submit(cp, clusterId, smallEvaluation(image));
  const e = await waitFinished(cp, id);
  const final = e.updates.at(-1) as Update;
  return { id, final, text: JSON.stringify(e) };
}

beforeAll(async () => {
  cleanSlate();
  forgetDrain();
  chart = releasedChart();
  cp = await controlPlane(chart, undefined, ['--test-ignore-drain']);
  image = await evaluationImage();
  clusterId = await installNewCluster(cp, 'drain');
}, 400_000);

afterAll(async () => {
  await cp?.stop();
  cleanSlate();
  forgetDrain();
});

describe('drain holds on the cluster\'s side', () => {
  it('the platform drains and sends an assignment anyway: the agent refuses it as ClusterDraining and reports it; after resume one runs', async () => {
    expect((await api(cp, 'POST', `/v1/clusters/${clusterId}/drain`)).body).toMatchObject({ draining: true });
    await until('the agent to show the drain', () => (/the platform is draining this cluster/.test(rt.log('agent')) ? true : undefined), { timeoutMs: 60_000 });

    const refused = await refusedEvaluation();
    expect(refused.final).toMatchObject({ phase: 'Failed', reason: 'ClusterDraining' });
    expect(refused.final.message).toMatch(/^refused: the platform drains this cluster \(since .*\) and still sent this new evaluation; .*submit to another cluster, or end the drain on the platform first/);
    expect(held(refused.id)).toBe(false);
    expect(rt.log('agent')).toContain(`"evaluationId":"${refused.id}"`);

    expect((await api(cp, 'POST', `/v1/clusters/${clusterId}/resume`)).body).toMatchObject({ draining: false });
    expect((await waitFinished(cp, await submit(cp, clusterId, smallEvaluation(image)))).phase).toBe('Succeeded');
  }, 300_000);

  it('rlmesh drain: a new assignment is refused as OperatorDrain, the running evaluation finishes, the platform and rlmesh status show it; rlmesh drain --undo and a new one runs', async () => {
    const running = await submit(cp, clusterId, smallEvaluation(image, { TEST_DURATION: '45s' }));
    await until('the evaluation to run', async () => ((await evaluation(cp, running)).updates.some((u) => u.phase === 'Running') ? true : undefined), { timeoutMs: 180_000 });

    const drained = rlmesh(['drain']);
    expect(drained.status, drained.stderr).toBe(0);
    expect(drained.stdout).toMatch(/^drained: ConfigMap rlmesh-system\/rlmesh-operator-drain written at \S+ by \S+; the agent refuses new assignments from now on/m);
    expect(drained.stdout).toContain(`the agent confirmed at`);
    expect(drained.stdout).toContain(`1 evaluation still runs: ${evaluationName(running)}`);
    expect(rlmesh(['drain']).stdout).toMatch(/^already drained by the operator since \S+ \(by \S+\)/m);

    // the platform is told (OperatorDrain on the session) and refuses submissions itself, unless it ignores drains as this one does
    const told = await until('the platform to show the operator\'s drain', async () => ((await row()).operatorDraining ? await row() : undefined), { timeoutMs: 60_000 });
    expect(told.operatorDrainingSince).toMatch(/^\d{4}-/);

    const refused = await refusedEvaluation();
    expect(refused.final).toMatchObject({ phase: 'Failed', reason: 'OperatorDrain' });
    expect(refused.final.message).toMatch(/^refused: the cluster's operator drained this cluster at \S+ \(rlmesh drain, ConfigMap rlmesh-system\/rlmesh-operator-drain\), so it takes no new evaluations while those it holds run to their end; submit to another cluster, or ask the cluster's operator to run rlmesh drain --undo$/);
    expect(held(refused.id)).toBe(false);

    // rlmesh status: who drains, since when, what still runs
    const json = rlmesh(['status', '-o', 'json']);
    const agent = (JSON.parse(json.stdout) as StatusReport).checks.find((c) => c.id === 'agent')!;
    expect(agent.verdict).toBe('warn');
    expect(agent.found).toMatch(new RegExp(`drained by the cluster's operator \\(rlmesh drain\\) since \\S+ \\(\\d+[smhd]\\), by \\S+; 1 evaluation still runs: ${evaluationName(running)}$`));
    expect(agent.fix).toContain('rlmesh drain --undo');
    const table = rlmesh(['status']).stdout;
    console.log(`drained:\n${table}`);
    expect(table).toContain("drained by the cluster's operator (rlmesh drain)");

    // what ran before the drain runs to its end
    expect((await waitFinished(cp, running, 180)).phase).toBe('Succeeded');

    const undone = rlmesh(['drain', '--undo']);
    expect(undone.status, undone.stderr).toBe(0);
    expect(undone.stdout).toMatch(/^drain ended: ConfigMap rlmesh-system\/rlmesh-operator-drain deleted/m);
    expect(undone.stdout).toMatch(/the agent confirmed at \S+: it takes new evaluations again/);
    expect(rlmesh(['drain', '--undo']).stdout).toMatch(/^not drained by the operator .*nothing to undo/m);
    await until('the platform to show the drain ended', async () => ((await row()).operatorDraining === false ? true : undefined), { timeoutMs: 60_000 });
    expect((await waitFinished(cp, await submit(cp, clusterId, smallEvaluation(image)))).phase).toBe('Succeeded');
    expect(rlmesh(['status', '-o', 'json']).stdout).not.toContain("drained by the cluster's operator");
  }, 400_000);
});
