// An upgrade across releases, as a user runs it: the previous release of this
// repository (a pinned earlier commit, built and released by the test under a
// version of its own, test/support/previous-release.ts) is installed with the
// printed install command and runs evaluations; while they run, the spec's
// `helm upgrade … --reuse-values` moves it to the current release. Every
// evaluation finishes with no update lost or held twice (counted as the faults
// suite counts them), the CRDs are the current chart's and were applied by the
// pre-upgrade hook, and the new agent is the current version, accepted by the
// control plane's version skew policy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { PREVIOUS_VERSION, previousRelease } from '../support/previous-release.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { chartUpgrade } from '../../lib/version-skew.ts';
import {
  CONTROL_PLANE_ADDRESSES, NS, PLUMBING, RUNS, Runtime, cleanSlate, controlPlane, evaluation, evaluationImage, localValues, lostAndDuplicated, quoted, releasedChart, runPrinted, smallEvaluation,
  submit, upgradeReusing, waitConnected, waitFinished, type Chart,
} from './harness.ts';

const CRDS = ['rlmeshevaluations.rlmesh.dev', 'rlmeshcaches.rlmesh.dev'];
let previous: Chart;
let current: Chart;
let cp: ControlPlane;
let clusterId = '';
let image = '';
const rt = new Runtime();
const figures: string[] = [];

type Crd = { metadata: { labels?: Record<string, string>; managedFields?: { manager: string; operation: string }[] } };
const crd = (name: string): Crd => JSON.parse(kubectl(['get', 'crd', name, '-o', 'json', '--show-managed-fields']).stdout) as Crd;
const agentVersion = async (): Promise<string | null> =>
  (await api<{ clusters: { id: string; agentVersion: string | null }[] }>(cp, 'GET', '/v1/clusters')).body.clusters.find((c) => c.id === clusterId)?.agentVersion ?? null;

beforeAll(async () => {
  cleanSlate();
  // uninstall keeps the CRDs, which an earlier suite's upgrade may have moved: the previous release installs its own
  kubectl(['delete', 'crd', ...CRDS, '--ignore-not-found', '--wait', '--timeout=120s']);
  const t0 = Date.now();
  const prev = previousRelease();
  figures.push(`previous release ${prev.version} (${prev.revision.slice(0, 12)}): ${prev.built ? 'built and released' : 'reused from the local registry'} in ${prev.seconds.toFixed(1)} s`);
  previous = prev.charts['rlmesh-runtime']!;
  current = releasedChart();
  // the control plane is the current one (a platform upgrades first); its install command names the previous chart
  cp = await controlPlane(previous);
  image = await evaluationImage();
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'upgrade' });
  clusterId = created.body.clusterId;
  // the previous chart has no controlPlane.addresses (its agent had 443 to every address): the upgrade adds it
  runPrinted(`${created.body.installCommand} ${quoted([...localValues(cp, { controlPlaneAddresses: false }), ...PLUMBING])}`);
  await waitConnected(cp, clusterId);
  figures.push(`installed ${previous.version} and connected in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}, 600_000);

afterAll(async () => {
  console.log(`\nupgrade figures:\n  ${figures.join('\n  ')}`);
  await cp?.stop();
  cleanSlate();
});

describe('upgrade from the previous release while evaluations run', () => {
  it('the previous release runs: its agent announces its version, the CRDs are its own', async () => {
    expect(chartUpgrade(previous.version, current.version).verdict, 'the policy allows this upgrade').toBe('supported');
    expect(await agentVersion()).toBe(PREVIOUS_VERSION);
    const chartLabel = kubectl(['-n', NS, 'get', 'deployment', 'rlmesh-cluster-agent', '-o', 'jsonpath={.metadata.labels.helm\\.sh/chart}']).stdout;
    expect(chartLabel).toBe(`rlmesh-runtime-${previous.version}`);
    // installed by helm from the previous chart's crds/, which carry no version label yet
    for (const name of CRDS) {
      const c = crd(name);
      expect(c.metadata.labels?.['app.kubernetes.io/version'], `${name} before the upgrade`).toBeUndefined();
      expect(c.metadata.managedFields?.map((f) => f.manager), name).not.toContain('rlmesh-crd-upgrade');
    }
  });

  it('helm upgrade --reuse-values mid-run: nothing lost or duplicated, the CRDs moved through the hook, the new agent is accepted', async () => {
    // some finish before the upgrade, some run through it, some start on the new release
    const durations = ['2s', '5s', '10s', '20s', '30s'];
    const ids = await Promise.all(Array.from({ length: 15 }, (_, i) => submit(cp, clusterId, smallEvaluation(image, { TEST_DURATION: durations[i % durations.length]! }))));
    await until('some evaluations to run', async () => {
      const phases = await Promise.all(ids.map(async (id) => (await evaluation(cp, id)).phase));
      return phases.filter((p) => p === 'Running').length >= 3 ? true : undefined;
    }, { timeoutMs: 120_000, intervalMs: 250 });

    const t0 = Date.now();
    // as an operator of a control plane at a private address upgrades: naming it, or the agent's 443 leads to public addresses only
    upgradeReusing(current, [...CONTROL_PLANE_ADDRESSES, '--wait', '--timeout', '6m']);
    figures.push(`helm upgrade --reuse-values ${previous.version} → ${current.version}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await rt.ready('agent');
    await waitConnected(cp, clusterId, 120);
    expect(await until('the new agent to say hello', async () => ((await agentVersion()) === current.version ? true : undefined), { timeoutMs: 60_000 })).toBe(true);
    const after = await Promise.all(Array.from({ length: 5 }, () => submit(cp, clusterId, smallEvaluation(image))));

    // the CRDs: the current chart's, applied by the pre-upgrade hook's kubectl (helm never updates crds/)
    for (const name of CRDS) {
      const c = crd(name);
      expect(c.metadata.labels?.['app.kubernetes.io/version'], name).toBe(current.version);
      expect(c.metadata.managedFields?.find((f) => f.manager === 'rlmesh-crd-upgrade'), `${name} applied by the hook`).toMatchObject({ operation: 'Apply' });
    }
    // the hook cleaned up after itself
    expect(kubectl(['-n', NS, 'get', 'jobs,configmaps', '-o', 'name']).stdout).not.toContain('rlmesh-crd-upgrade');

    // the control plane judged the new agent supported, and the agent says so in its log
    const connected = rt.log('agent').split('\n').filter((l) => l.includes('"session connected"')).map((l) => JSON.parse(l) as { controlPlaneVersion?: string; agentVersion?: string });
    expect(connected.at(-1)).toMatchObject({ agentVersion: current.version });

    let lost = 0;
    let duplicated = 0;
    const accounts: string[] = [];
    for (const id of [...ids, ...after]) {
      const e = await waitFinished(cp, id, 240);
      const inCluster = JSON.parse(kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', id, '-o', 'json']).stdout) as { status: { phase: string; message?: string; startTime?: string } };
      expect(e.phase, `${id}: ${inCluster.status.message}`).toBe('Succeeded');
      const r = lostAndDuplicated(e, inCluster.status.phase, inCluster.status.startTime !== undefined);
      lost += r.lost;
      duplicated += r.duplicated;
      if (r.lost || r.duplicated) accounts.push(`${id}: ${JSON.stringify(e.updates)}`);
    }
    figures.push(`upgrade mid-run: ${ids.length + after.length} evaluations, updates lost ${lost}, duplicated ${duplicated}`);
    expect({ lost, duplicated }, accounts.join('\n')).toEqual({ lost: 0, duplicated: 0 });
  }, 900_000);
});
