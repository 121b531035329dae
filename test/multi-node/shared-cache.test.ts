// The spec's multi-node setup on three real nodes: storage.className set to a
// ReadWriteMany class (the local cluster's shared-rwx, a folder every node
// mounts as NFS clients mount an export) and
// artifactCache.storage.sharedPvc.accessModes [ReadWriteMany]. The cache
// filler, on one node, fetches an artifact once through the egress proxy;
// 30 evaluations that need it run on all three nodes and each reads the same
// bytes from the shared cache. The HTTPS server counts one download.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NET } from '../cluster/real-node.ts';
import { startPublicServer, type PublicServer } from '../e2e/public-server.ts';
import {
  NS, RUNS, Runtime, cleanSlate, controlPlane, evaluationImage, localFlags, releasedChart, smallEvaluation, submit, waitConnected, waitFinished, type Chart,
} from '../e2e/harness.ts';
import { helm, kubectl } from '../support/cluster.ts';
import { MULTI_NODE_NAMES, SHARED_CLASS } from '../support/multi-node.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { tempDir } from '../support/temp.ts';
import { until } from '../support/until.ts';

const EVALUATIONS = 30;

let chart: Chart;
let cp: ControlPlane;
let image = '';
let publicServer: PublicServer;
let clusterId = '';
const rt = new Runtime();

type Pod = { metadata: { name: string; labels?: Record<string, string> }; spec: { nodeName?: string } };
const podsOf = (ns: string, selector: string): Pod[] => (JSON.parse(kubectl(['-n', ns, 'get', 'pods', '-l', selector, '-o', 'json']).stdout) as { items: Pod[] }).items;
const nodesOf = (pods: Pod[]): string[] => pods.map((p) => p.spec.nodeName ?? '(unscheduled)').sort();

beforeAll(async () => {
  cleanSlate();
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  publicServer = await startPublicServer();
  const created = await api<{ clusterId: string; joinToken: string }>(cp, 'POST', '/v1/clusters', { name: 'multi-node' });
  clusterId = created.body.clusterId;
  // the artifact's server is the tests' "public" HTTPS server: its name allow-listed, its benchmarking range let through, its CA trusted
  const bundle = join(tempDir('rlmesh-ca-'), 'bundle.pem');
  writeFileSync(bundle, `${readFileSync(cp.caFile, 'utf8').trim()}\n${publicServer.ca.trim()}\n`);
  helm(['install', 'rlmesh', chart.ref, '--version', chart.version, '-n', NS, '--create-namespace', '--set', `joinToken=${created.body.joinToken}`,
    // the spec's two values for several nodes
    '--set', `storage.className=${SHARED_CLASS}`, '--set', 'artifactCache.storage.sharedPvc.accessModes={ReadWriteMany}',
    '--set', `egress.extraDomains={${publicServer.hosts[0]}}`, '--set', `egress.allowRanges={${NET.publicAddress}/32}`,
    ...localFlags(cp), '--set-file', `controlPlane.caBundle=${bundle}`]);
  await waitConnected(cp, clusterId);
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  await publicServer?.close();
  cleanSlate();
});

describe('the spec\'s multi-node install: a ReadWriteMany artifact cache', () => {
  it('the cache is one ReadWriteMany volume of the RWX class, and the chart\'s replicas spread over the nodes', async () => {
    const pvc = JSON.parse(kubectl(['-n', RUNS, 'get', 'pvc', 'rlmesh-artifact-cache', '-o', 'json']).stdout) as { spec: { storageClassName: string; accessModes: string[] }; status: { phase: string } };
    expect(pvc.spec).toMatchObject({ storageClassName: SHARED_CLASS, accessModes: ['ReadWriteMany'] });
    expect(pvc.status.phase).toBe('Bound');
    // the cache object, kept on uninstall, describes this install's volume (an earlier install's may have said ReadWriteOnce)
    await until('the RLMeshCache to describe the ReadWriteMany volume', () => {
      const cache = JSON.parse(kubectl(['get', 'rlmeshcache', 'default', '-o', 'json']).stdout) as { spec: { accessModes: string[] } };
      return cache.spec.accessModes.join() === 'ReadWriteMany' ? true : undefined;
    }, { timeoutMs: 60_000 });
    // the agent's spool follows storage.className unless agent.spool.storageClassName names another class
    expect(kubectl(['-n', NS, 'get', 'pvc', 'rlmesh-agent-spool', '-o', 'jsonpath={.spec.storageClassName}']).stdout).toBe(SHARED_CLASS);
    // two replicas each, spread by the chart's topologySpreadConstraints: never both on one node
    for (const w of ['controller', 'egress'] as const) {
      const nodes = nodesOf(rt.pods(w) as Pod[]);
      console.log(`${w} replicas on ${nodes.join(', ')}`);
      expect(nodes).toHaveLength(2);
      expect(new Set(nodes).size, `${w} replicas on ${nodes.join(', ')}`).toBe(2);
    }
  });

  it(`${EVALUATIONS} evaluations on all three nodes read one artifact the filler downloaded once`, async () => {
    const [host] = publicServer.hosts;
    const artifact = { name: 'public-ca', sha256: publicServer.caSha256, sizeBytes: String(Buffer.byteLength(publicServer.ca)), source: { httpsUrl: `https://${host}/ca.pem` } };
    const ids = await Promise.all(
      Array.from({ length: EVALUATIONS }, () => submit(cp, clusterId, { ...smallEvaluation(image, { TEST_ARTIFACT: '/artifacts/public-ca', TEST_DURATION: '1s' }), artifacts: [artifact] })),
    );
    const finished = await Promise.all(ids.map((id) => waitFinished(cp, id, 300)));
    expect(finished.map((e) => e.phase)).toEqual(ids.map(() => 'Succeeded'));

    // where they ran, as the platform was told (each update names the pod's node) and as the pods say
    const reported = finished.map((e) => e.updates.find((u) => u.node)?.node);
    const pods = podsOf(RUNS, 'rlmesh.dev/evaluation').filter((p) => ids.some((id) => p.metadata.name.includes(id)));
    expect(pods).toHaveLength(EVALUATIONS);
    const perNode = Object.fromEntries(MULTI_NODE_NAMES.map((n) => [n, nodesOf(pods).filter((x) => x === n).length]));
    console.log(`evaluations per node: ${JSON.stringify(perNode)}`);
    for (const n of MULTI_NODE_NAMES) expect(perNode[n], `evaluations on ${n}`).toBeGreaterThan(0);
    expect([...new Set(reported)].sort()).toEqual([...MULTI_NODE_NAMES]);

    // every pod read the artifact's bytes from the cache
    for (const p of pods) {
      const lines = kubectl(['-n', RUNS, 'logs', p.metadata.name]).stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.find((l) => l.step === 'artifact'), `${p.metadata.name} on ${p.spec.nodeName}`).toMatchObject({ sha256: publicServer.caSha256 });
    }
    // one download in all, by the filler on its one node
    const filler = rt.pod('filler') as Pod;
    console.log(`filler on ${filler.spec.nodeName}; downloads: ${publicServer.requests.length}`);
    expect(publicServer.requests.map((r) => r.path)).toEqual(['/ca.pem']);
  });
});
