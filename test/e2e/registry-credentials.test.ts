// The registry protects the runtime images the way the platform's does
// (test/cluster/up runs it with token auth, controlplane/registry-auth judges
// credentials by the control plane's store). At install the join token is all
// the cluster has, so it pulls the agent's image; from the join on, the pull
// Secret the agent wrote is what lets the kubelet pull the runtime images, in
// rlmesh-system and in rlmesh-runs; a wrong one is the spec's ImagePullBackOff.
// An evaluation image from the operator's own private registry (a second
// registry with Basic auth, its repository prefix listed in
// evaluations.extraRegistries) is pulled with the operator's pull Secret
// (evaluations.imagePullSecrets, mapped to that prefix); an image of the same
// registry outside the prefix is refused; while the Secret is missing the pull
// fails and the evaluation names the pod's pull Secrets, which no pod of the
// product can read.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterDir, kubectl } from '../support/cluster.ts';
import { registryGet, registryToken } from '../support/registry.ts';
import { releaseInfo } from '../support/release.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { realNodes } from '../cluster/real-node.ts';
import { dockerConfigJson } from '../../lib/credential-secret.ts';
import { NS, RUNS, Runtime, cleanSlate, controlPlane, forgetRuntimeImage, releasedChart, runInstallCommand, smallEvaluation, submit, upgradeReusing, waitConnected, waitFinished, type Workload } from './harness.ts';
import { addRegistryHost, NET } from '../cluster/real-node.ts';
import { startPrivateRegistry } from '../support/private-registry.ts';
import { evaluationLayout } from '../images/evaluation/publish.ts';

let cp: ControlPlane;
let clusterId = '';
let joinToken = '';
let installCommand = '';
const rt = new Runtime();
const runtimeImage = () => releaseInfo().images['rlmesh-runtime']!;
const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const tokenLog = () => join(clusterDir(), 'logs/registry-token.log');

type Grant = { identity: string; clusterId?: string; granted: string[]; msg: string; time: string };
/** What the token service granted and refused since `since` (its log: one line per answer, no secret in it). */
function grantsSince(since: number): Grant[] {
  return readFileSync(tokenLog(), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Grant)
    .filter((g) => Date.parse(g.time) >= since);
}

/** Deletes the workload's pod and waits for its replacement to be ready; returns that pod's events. */
async function replacePod(w: Workload): Promise<{ reason: string; message: string }[]> {
  const old = rt.pod(w);
  const ns = w === 'filler' ? RUNS : NS;
  kubectl(['-n', ns, 'delete', 'pod', old.metadata.name, '--wait=false']);
  await until(`a new ${w} pod`, () => (rt.pods(w).some((p) => p.metadata.uid !== old.metadata.uid) ? true : undefined), { timeoutMs: 60_000 });
  await rt.ready(w);
  return podEvents(ns, rt.pod(w).metadata.name);
}

function podEvents(ns: string, pod: string): { reason: string; message: string }[] {
  return (JSON.parse(kubectl(['-n', ns, 'get', 'events', '--field-selector', `involvedObject.name=${pod}`, '-o', 'json']).stdout) as { items: { reason: string; message: string }[] }).items;
}

beforeAll(async () => {
  cleanSlate();
  cp = await controlPlane(releasedChart());
  const created = await api<{ clusterId: string; joinToken: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'registry-credentials' });
  ({ clusterId, joinToken, installCommand } = created.body);
}, 120_000);

afterAll(async () => {
  await cp?.stop();
  cleanSlate();
});

/** The operator's private registry as image references name it, and its pull Secret in rlmesh-runs. */
const CORP_REGISTRY = 'registry.corp.test';
const CORP_SECRET = 'corp-registry-pull';

type ClusterEvaluation = { spec: { evaluationId: string }; status?: { phase?: string; reason?: string; message?: string; podName?: string } };
const clusterEvaluation = (id: string): ClusterEvaluation | undefined =>
  (JSON.parse(kubectl(['-n', RUNS, 'get', 'rlmeshevaluations', '-o', 'json']).stdout) as { items: ClusterEvaluation[] }).items.find((e) => e.spec.evaluationId === id);

describe('registry credentials', () => {
  it('the runtime images need a credential; the charts and public images do not', async () => {
    const anonymous = await registryToken(`repository:${runtimeImage().repository}:pull`);
    expect(anonymous.access).toEqual([]);
    expect((await registryGet(runtimeImage().repository, `manifests/${runtimeImage().digest}`, { accept: MANIFEST })).status).toBe(401);
    expect((await registryToken('repository:rlmesh/charts/rlmesh-runtime:pull')).access).toEqual([{ type: 'repository', name: 'rlmesh/charts/rlmesh-runtime', actions: ['pull'] }]);
    // an unredeemed join token pulls the agent's image and the CRD hook's kubectl, and nothing else of the platform's
    const join = { username: 'rlmesh-join', password: joinToken };
    expect((await registryGet(runtimeImage().repository, `manifests/${runtimeImage().digest}`, { accept: MANIFEST, creds: join })).status).toBe(200);
    expect((await registryToken('repository:rlmesh/kubectl:pull', join)).access).toEqual([{ type: 'repository', name: 'rlmesh/kubectl', actions: ['pull'] }]);
    expect((await registryToken('repository:rlmesh/prometheus:pull', join)).access).toEqual([]);
    expect((await registryToken('repository:rlmesh/rlmesh-runtime:push', join)).access).toEqual([]);
  });

  it('the join token pulls the agent image at install; after the join, the pull Secret the agent wrote pulls the runtime images into both namespaces', async () => {
    forgetRuntimeImage();
    const installedAt = Date.now();
    runInstallCommand(cp, installCommand);
    await waitConnected(cp, clusterId);
    const atInstall = grantsSince(installedAt).filter((g) => g.granted.includes(`${runtimeImage().repository}:pull`));
    expect(atInstall.map((g) => g.identity), 'the kubelet pulled the runtime image with the join token').toContain('join');
    expect(atInstall.filter((g) => g.identity === 'join').every((g) => g.clusterId === clusterId)).toBe(true);

    // redeemed: the join token pulls nothing any more, and says where the credential is now
    const spent = await registryToken(`repository:${runtimeImage().repository}:pull`, { username: 'rlmesh-join', password: joinToken });
    expect(spent.status).toBe(401);
    expect(spent.message).toMatch(/this join token was redeemed at .*; from the join on, the cluster pulls with its own pull credential: check the pull Secret/);

    for (const w of ['agent', 'filler'] as const) {
      forgetRuntimeImage();
      const since = Date.now();
      const events = await replacePod(w);
      expect(events.map((e) => e.reason), `${w}: ${JSON.stringify(events)}`).toContain('Pulled');
      expect(events.find((e) => e.reason === 'Pulled')!.message).toMatch(/Successfully pulled image/);
      const pulls = grantsSince(since).filter((g) => g.granted.includes(`${runtimeImage().repository}:pull`));
      expect(pulls.map((g) => `${g.identity}:${g.clusterId}`), `${w}'s pull`).toContain(`cluster:${clusterId}`);
    }
  }, 600_000);

  it('a wrong pull Secret: the pod waits in ImagePullBackOff and the kubelet says the registry refused; the right one lets it start', async () => {
    const good = JSON.parse(kubectl(['-n', RUNS, 'get', 'secret', 'rlmesh-registry-pull', '-o', 'json']).stdout) as { data: Record<string, string> };
    const config = JSON.parse(Buffer.from(good.data['.dockerconfigjson']!, 'base64').toString('utf8')) as { auths: Record<string, { username: string; password: string }> };
    const [host, entry] = Object.entries(config.auths)[0]!;
    const wrongPassword = `rlm_rp_${'x'.repeat(40)}`;
    const wrong = JSON.parse(dockerConfigJson(host, entry.username, wrongPassword)) as unknown;
    const patch = (c: unknown) => kubectl(['-n', RUNS, 'patch', 'secret', 'rlmesh-registry-pull', '--type', 'merge', '-p', JSON.stringify({ data: { '.dockerconfigjson': Buffer.from(JSON.stringify(c)).toString('base64') } })]);
    const since = Date.now();
    patch(wrong);
    try {
      forgetRuntimeImage();
      const old = rt.pod('filler');
      kubectl(['-n', RUNS, 'delete', 'pod', old.metadata.name, '--wait=false']);
      const waiting = await until('the filler to wait for its image', () => {
        const p = rt.pods('filler').find((x) => x.metadata.uid !== old.metadata.uid);
        const st = p && (JSON.parse(kubectl(['-n', RUNS, 'get', 'pod', p.metadata.name, '-o', 'json']).stdout) as { status: { containerStatuses?: { state: { waiting?: { reason: string; message?: string } } }[] } }).status;
        const w = st?.containerStatuses?.[0]?.state.waiting;
        return w && /ImagePullBackOff|ErrImagePull/.test(w.reason) ? { pod: p!.metadata.name, ...w } : undefined;
      }, { timeoutMs: 120_000 });
      const failed = podEvents(RUNS, waiting.pod).filter((e) => e.reason === 'Failed').map((e) => e.message).join('\n');
      expect(failed).toMatch(/401 Unauthorized/);
      // the token service's side: the wrong credential refused for what it is, and not written down
      const refusals = grantsSince(since).filter((g) => g.msg.startsWith('refused'));
      expect(refusals.map((g) => g.msg)).toContainEqual(expect.stringContaining('the platform never issued this pull credential'));
      expect(readFileSync(tokenLog(), 'utf8')).not.toContain(wrongPassword);
    } finally {
      patch(config);
    }
    await rt.ready('filler', 360);
  }, 600_000);
  it("a private registry for evaluations: only images under its prefix run, the operator's pull Secret mapped to it pulls them on the real node; while it is missing the pull fails naming it", async () => {
    const corp = await startPrivateRegistry(NET.hostAddress);
    const removeHost = addRegistryHost(CORP_REGISTRY, `http://${corp.address}`);
    try {
      const layout = await evaluationLayout();
      corp.push(layout, 'corp/evaluation');
      // anonymous clients get nothing from it
      expect((await fetch(`http://${corp.address}/v2/corp/evaluation/manifests/${layout.digest}`)).status).toBe(401);
      const prefix = `${CORP_REGISTRY}/corp/`;
      upgradeReusing(releasedChart(), [
        '--set', `evaluations.extraRegistries={${prefix}}`,
        '--set-json', `evaluations.imagePullSecrets=${JSON.stringify([{ name: CORP_SECRET, registries: [prefix] }])}`,
        '--wait', '--timeout', '5m',
      ]);
      await waitConnected(cp, clusterId);

      // the same registry outside the prefix: refused before anything exists
      const outside = await submit(cp, clusterId, smallEvaluation(`${CORP_REGISTRY}/corp-evil/evaluation@${layout.digest}`));
      const refused = await waitFinished(cp, outside, 60);
      expect(refused.phase).toBe('Failed');
      expect(JSON.stringify(refused.updates)).toContain(`is the repository ${CORP_REGISTRY}/corp-evil/evaluation, and this cluster runs evaluation images only from under`);

      const id = await submit(cp, clusterId, smallEvaluation(`${CORP_REGISTRY}/corp/evaluation@${layout.digest}`));
      const failing = await until('the pull to fail without the Secret', () => {
        const st = clusterEvaluation(id)?.status;
        return st?.reason === 'ErrImagePull' || st?.reason === 'ImagePullBackOff' ? st : undefined;
      }, { timeoutMs: 180_000 });
      expect(failing.phase).toBe('Pending');
      expect(failing.message).toContain(`the pod pulls with rlmesh-registry-pull, ${CORP_SECRET} in ${RUNS}`);

      kubectl(['-n', RUNS, 'create', 'secret', 'docker-registry', CORP_SECRET, `--docker-server=${CORP_REGISTRY}`, `--docker-username=${corp.creds.username}`, `--docker-password=${corp.creds.password}`]);
      const done = await waitFinished(cp, id, 240);
      expect(done.phase, JSON.stringify(done.updates)).toBe('Succeeded');
      const podName = clusterEvaluation(id)?.status?.podName ?? '';
      const pod = JSON.parse(kubectl(['-n', RUNS, 'get', 'pod', podName, '-o', 'json']).stdout) as { spec: { imagePullSecrets: { name: string }[]; nodeName: string } };
      expect(pod.spec.imagePullSecrets).toEqual([{ name: 'rlmesh-registry-pull' }, { name: CORP_SECRET }]);
      expect(realNodes().map((n) => n.name)).toContain(pod.spec.nodeName);
      // the evaluation container's pull (the network-ready init container runs the runtime image)
      const pulled = podEvents(RUNS, podName).filter((e) => e.reason === 'Pulled').map((e) => e.message);
      expect(pulled.find((m) => m.includes(CORP_REGISTRY)), pulled.join('\n')).toMatch(/Successfully pulled image "registry\.corp\.test\/corp\/evaluation@sha256:/);
      // the node's containerd fetched the manifest from the private registry with the operator's credentials
      // (the registry logs "authorized request" only for a valid Basic credential; anonymous tries get its 401)
      const authorized = corp.log().split('\n').filter((l) => l.includes('msg="authorized request"') && l.includes('useragent="containerd/') && l.includes(`/v2/corp/evaluation/manifests/${layout.digest}`));
      expect(authorized.length, corp.log().split('\n').slice(-20).join('\n')).toBeGreaterThan(0);
      expect(corp.log()).not.toContain(corp.creds.password);
    } finally {
      kubectl(['-n', RUNS, 'delete', 'secret', CORP_SECRET, '--ignore-not-found']);
      removeHost();
      await corp.stop();
    }
  }, 600_000);
});
