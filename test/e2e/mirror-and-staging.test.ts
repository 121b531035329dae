// Installs where the images do not come from the platform's registry, on the real node.
// A mirror: a second registry (test/support/private-registry.ts) that asks for a login holds a
// copy of the released images made with `skopeo copy --preserve-digests`; installed with
// global.imageRegistry and the mirror's pull Secret in imagePullSecrets (created beforehand in
// rlmesh-system and in rlmesh-runs, the latter made adoptable by helm as docs/chart/mirror-and-air-gapped.md says),
// every pod (the chart's, the CRD hook's on upgrade, the cache filler and the NetworkPolicy probe
// the controller creates) pulls from it, by the released digests, and an evaluation runs (its
// network-ready container is the mirrored runtime image).
// A staging cell: a control plane whose registry is registry.staging.rlmesh-e2e.test (another
// name of the local registry, whose token service judges that control plane's credentials). An
// install that keeps the production registry is refused by the agent before it spends the
// token; `helm upgrade --reuse-values --set controlPlane.registryHost=…` then joins with the same
// token, every image and both pull Secrets are for the staging host, and an evaluation from it runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addRegistryHost, NET, realNodes } from '../cluster/real-node.ts';
import { clusterInfo, kubectl, registryAuthFile, run } from '../support/cluster.ts';
import { startPrivateRegistry, type PrivateRegistry } from '../support/private-registry.ts';
import { releaseInfo } from '../support/release.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { NS, PLUMBING, RUNS, cleanSlate, clusterRow, controlPlane, evaluationImage, localValues, notReady, quoted, releasedChart, runPrinted, smallEvaluation, submit, upgradeReusing, waitConnected, waitFinished, type Chart } from './harness.ts';

const MIRROR_HOST = 'mirror.rlmesh-e2e.test';
const MIRROR_PATH = 'rlmesh-proxy';
const MIRROR_SECRET = 'corp-mirror-pull';
const STAGING_REGISTRY = 'registry.staging.rlmesh-e2e.test';

type Pod = { metadata: { name: string; deletionTimestamp?: string }; spec: { containers: { image: string }[]; initContainers?: { image: string }[]; imagePullSecrets?: { name: string }[] }; status: { containerStatuses?: { imageID: string }[] } };
type Event = { reason: string; message: string; lastTimestamp?: string; eventTime?: string };

/** The pods of `ns` that are not on their way out (an upgrade's old ReplicaSet may still be terminating). */
const podsOf = (ns: string): Pod[] => (JSON.parse(kubectl(['-n', ns, 'get', 'pods', '-o', 'json']).stdout) as { items: Pod[] }).items.filter((p) => !p.metadata.deletionTimestamp);
const imagesOf = (p: Pod): string[] => [...(p.spec.initContainers ?? []), ...p.spec.containers].map((c) => c.image);
/** What the kubelet said it pulled or started pulling, in both namespaces: `Pulling image "…"`. */
const pulledImages = (since: number): string[] =>
  [NS, RUNS].flatMap((ns) =>
    (JSON.parse(kubectl(['-n', ns, 'get', 'events', '-o', 'json']).stdout) as { items: Event[] }).items
      .filter((e) => (e.reason === 'Pulling' || e.reason === 'Pulled') && Date.parse(e.lastTimestamp ?? e.eventTime ?? '') >= since)
      .map((e) => /image "([^"]+)"/.exec(e.message)?.[1] ?? `unparsed: ${e.message}`),
  );

/** Removes image names from every real node's containerd (their content stays while other names use it). */
function forgetImages(refs: string[]): void {
  for (const node of realNodes()) run('/usr/bin/ctr', ['--address', node.containerdSocket, '-n', 'k8s.io', 'images', 'rm', ...refs]);
}

let chart: Chart;
let cp: ControlPlane | undefined;
let mirror: PrivateRegistry | undefined;
const unroute: (() => void)[] = [];

beforeAll(() => {
  chart = releasedChart();
  cleanSlate();
});

afterAll(async () => {
  await cp?.stop();
  await mirror?.stop();
  cleanSlate();
  for (const remove of unroute) remove();
});

describe('a mirror: global.imageRegistry', () => {
  it('every pod of the chart, the CRD hook and the controller pulls the released digests from the mirror', async () => {
    // a registry on the host's bridge that asks for a login, as a corporate mirror is to the cluster; its access log says who pulled what
    mirror = await startPrivateRegistry(NET.hostAddress);
    const address = mirror.address;
    const release = releaseInfo();
    // the mirror's copy: the same repositories under its path, digests preserved (what a Harbor proxy project or an air-gap copy holds)
    for (const name of ['rlmesh-runtime', 'kubectl']) {
      const image = release.images[name]!;
      const r = run('skopeo', ['copy', '--quiet', '--preserve-digests', '--src-authfile', registryAuthFile(), '--src-tls-verify=false', '--dest-tls-verify=false',
        '--dest-creds', `${mirror.creds.username}:${mirror.creds.password}`, `docker://${image.ref}`, `docker://${address}/${MIRROR_PATH}/${image.repository}:${image.tag}`]);
      expect(r.status, r.stderr).toBe(0);
    }
    unroute.push(addRegistryHost(MIRROR_HOST, `http://${address}`));
    const runtime = `${MIRROR_HOST}/${MIRROR_PATH}/${release.images['rlmesh-runtime']!.repository}@${release.images['rlmesh-runtime']!.digest}`;
    const kubectlImage = `${MIRROR_HOST}/${MIRROR_PATH}/${release.images.kubectl!.repository}@${release.images.kubectl!.digest}`;
    // a node that ran this test before holds the mirrored names: forget them, so the kubelet pulls
    forgetImages([runtime, kubectlImage]);
    const since = Date.now() - 1000;
    cp = await controlPlane(chart);
    const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'mirror' });
    // the mirror's login, before the install, in both namespaces (the commands of docs/chart/mirror-and-air-gapped.md)
    kubectl(['create', 'namespace', NS], { allowFail: true });
    kubectl(['create', 'namespace', RUNS]);
    kubectl(['label', 'namespace', RUNS, 'app.kubernetes.io/managed-by=Helm']);
    kubectl(['annotate', 'namespace', RUNS, 'meta.helm.sh/release-name=rlmesh', `meta.helm.sh/release-namespace=${NS}`]);
    for (const ns of [NS, RUNS])
      kubectl(['-n', ns, 'create', 'secret', 'docker-registry', MIRROR_SECRET, `--docker-server=${MIRROR_HOST}`, `--docker-username=${mirror.creds.username}`, `--docker-password=${mirror.creds.password}`]);
    runPrinted(`${created.body.installCommand} ${quoted([...localValues(cp), '--set', `global.imageRegistry=${MIRROR_HOST}/${MIRROR_PATH}`, '--set', `imagePullSecrets[0].name=${MIRROR_SECRET}`, ...PLUMBING])}`);
    await waitConnected(cp, created.body.clusterId);
    // an upgrade runs the CRD hook (kubectl) from the mirror too
    upgradeReusing(chart, ['--wait', '--timeout', '5m']);
    await waitConnected(cp, created.body.clusterId);

    const pods = [...podsOf(NS), ...podsOf(RUNS)];
    for (const p of pods) for (const image of imagesOf(p)) expect(image, p.metadata.name).toBe(runtime);
    expect(pods.map((p) => p.metadata.name)).toEqual(expect.arrayContaining([expect.stringMatching(/^rlmesh-cluster-agent-/), expect.stringMatching(/^rlmesh-artifact-cache-filler-/)]));
    // the controller's NetworkPolicy probe ran (the fence is confirmed only by it) with the mirrored image
    const probe = await until('the NetworkPolicy probe passing', () => {
      const r = JSON.parse(kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-network-policy-probe', '-o', 'jsonpath={.data.result\\.json}'], { allowFail: true }).stdout || '{}') as { verdict?: string };
      return r.verdict === 'pass' ? r : undefined;
    }, { timeoutMs: 120_000, intervalMs: 2000 });
    expect(probe.verdict).toBe('pass');
    // the kubelet pulled nothing but the mirror's images: the runtime, and kubectl for the upgrade's hook
    const pulled = new Set(pulledImages(since));
    expect(pulled.size).toBeGreaterThan(0);
    for (const image of pulled) expect([runtime, kubectlImage], image).toContain(image);
    expect(pulled).toContain(kubectlImage);
    // and the nodes' containerd asked the mirror for them: manifests by digest, under its path (HEAD to resolve; GET as
    // well when a node lacks the content, which it may already hold under the platform's name)
    const access = mirror.log();
    for (const name of ['rlmesh-runtime', 'kubectl'])
      expect(access).toMatch(new RegExp(`"(HEAD|GET) /v2/${MIRROR_PATH}/rlmesh/${name}/manifests/${release.images[name]!.digest}[?"].*"containerd/`));

    // an evaluation: its own image is the platform's, its network-ready container the mirrored runtime, pulled with the mirror's login
    forgetImages([runtime]);
    const id = await submit(cp, created.body.clusterId, smallEvaluation(await evaluationImage()));
    const pod = await until('the evaluation pod', () => podsOf(RUNS).find((p) => p.metadata.name.startsWith('rle-')), { timeoutMs: 120_000, intervalMs: 1000 });
    expect((pod.spec.initContainers ?? []).map((c) => c.image)).toEqual([runtime]);
    expect(pod.spec.imagePullSecrets?.map((s) => s.name)).toContain(MIRROR_SECRET);
    const done = await waitFinished(cp, id, 240);
    expect(done.phase, JSON.stringify(done.updates)).toBe('Succeeded');
  }, 900_000);
});

describe('a staging cell: controlPlane.registryHost', () => {
  it('refuses the production registry before spending the token, then joins with the same token and pulls everything from the staging host', async () => {
    // the local registry (on the host's bridge) under the staging name
    await cp?.stop();
    cleanSlate();
    unroute.push(addRegistryHost(STAGING_REGISTRY, `http://${clusterInfo().registry}`));
    const release = releaseInfo();
    forgetImages([`${STAGING_REGISTRY}/${release.images['rlmesh-runtime']!.repository}@${release.images['rlmesh-runtime']!.digest}`]);
    cp = await controlPlane(chart, undefined, ['--registry-host', STAGING_REGISTRY]);
    const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'staging' });
    const clusterId = created.body.clusterId;

    // the staging API with the default (production) registry: the agent says why and keeps the token
    runPrinted(`${created.body.installCommand} ${quoted([...localValues(cp), '--plain-http'])}`);
    const refusal = await until('the agent refusing the registry', () => {
      const logs = kubectl(['-n', NS, 'logs', 'deploy/rlmesh-cluster-agent', '--tail=200'], { allowFail: true }).stdout;
      return logs.split('\n').find((l) => l.includes('registry_host_mismatch'));
    }, { timeoutMs: 240_000, intervalMs: 2000, context: notReady });
    expect(refusal).toContain(`registry is ${STAGING_REGISTRY}, but the chart was installed with controlPlane.registryHost=registry.rlmesh.dev`);
    expect(refusal).toContain(`set controlPlane.registryHost=${STAGING_REGISTRY}`);
    // the control plane never saw a join: the token is unspent
    expect((await clusterRow(cp, clusterId)).status).toBe('Pending');

    // the fix the line names, with the same (unspent) token
    upgradeReusing(chart, ['--set', `controlPlane.registryHost=${STAGING_REGISTRY}`, '--wait', '--timeout', '6m']);
    await waitConnected(cp, clusterId, 120);
    for (const p of [...podsOf(NS), ...podsOf(RUNS)]) for (const image of imagesOf(p)) expect(image, p.metadata.name).toMatch(new RegExp(`^${STAGING_REGISTRY.replace(/\./g, '\\.')}/rlmesh/rlmesh-runtime@sha256:`));
    const hostsOf = (ns: string, name: string) =>
      Object.keys((JSON.parse(Buffer.from((JSON.parse(kubectl(['-n', ns, 'get', 'secret', name, '-o', 'json']).stdout) as { data: Record<string, string> }).data['.dockerconfigjson']!, 'base64').toString('utf8')) as { auths: object }).auths);
    for (const ns of [NS, RUNS]) {
      expect(hostsOf(ns, 'rlmesh-registry-join'), ns).toEqual([STAGING_REGISTRY]);
      expect(hostsOf(ns, 'rlmesh-registry-pull'), ns).toEqual([STAGING_REGISTRY]);
    }
    // an evaluation image of the staging registry, pulled with the cluster's own credential
    const image = (await evaluationImage()).replace(/^registry\.rlmesh\.dev\//, `${STAGING_REGISTRY}/`);
    const id = await submit(cp, clusterId, smallEvaluation(image));
    const done = await waitFinished(cp, id, 240);
    expect(done.phase, JSON.stringify(done.updates)).toBe('Succeeded');
  }, 900_000);
});
