// Artifacts come through the egress proxy, on real pods on the real node: an
// S3 server in the customer's network (versitygw over HTTPS on the harness's
// private address 10.213.0.1, named s3.private.test for pods) is refused by the
// proxy's address rules even though its name is allow-listed, and the
// evaluation's status carries the refusal; once egress.allowRanges names its
// address (the in-cluster route the chart documents), the same artifact comes
// through the proxy into the cache and the evaluation reads it from there. The
// S3 server's CA (with the control plane's) comes from a ConfigMap of the
// operator's (controlPlane.caBundleFrom), as trust-manager would write it.
// Then the same objects from an S3 server inside the cluster (a versitygw pod
// behind a Service, as a customer's MinIO): its Service address is one of the
// cluster's own ranges the agent publishes for the proxy, refused as such,
// until egress.allowRanges names its Service address and its pod's address,
// which the proxy (it dials the Service) and the proxy's NetworkPolicy (it sees
// the pod after the Service's DNAT) honour together.
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setClusterHosts } from '../cluster/addons.ts';
import { NET, SANDBOX_REGISTRY } from '../cluster/real-node.ts';
import { startS3Server, type S3Server } from '../controller/s3-server.ts';
import { publishS3Image } from '../images/s3/build.ts';
import { kubectl } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import {
  NS, RUNS, Runtime, cleanSlate, controlPlane, evaluationImage, releasedChart, runInstallCommand, smallEvaluation, submit, upgradeReusing, waitConnected,
  waitFinished, type Chart,
} from './harness.ts';
import { tempDir } from '../support/temp.ts';

const S3_HOST = 's3.private.test';
const S3_PORT = 9443;
const IN_CLUSTER_NS = 'rlmesh-test-s3';
const IN_CLUSTER_HOST = `s3.${IN_CLUSTER_NS}.svc.cluster.local`;
/** The operator's CA bundle ConfigMap (controlPlane.caBundleFrom), in rlmesh-system and rlmesh-runs. */
const TRUST_BUNDLE = 'corp-trust-bundle';

let chart: Chart;
let cp: ControlPlane;
let s3: S3Server;
let image = '';
let clusterId = '';
const rt = new Runtime();
const object = randomBytes(256 * 1024);
const sha256 = createHash('sha256').update(object).digest('hex');
// another object for the in-cluster server: the first one is in the cache by then
const other = randomBytes(128 * 1024);

function artifactEvaluation(host = S3_HOST, bytes = object, key = 'weights.bin'): Record<string, unknown> {
  return {
    ...smallEvaluation(image, { TEST_ARTIFACT: `/artifacts/${key}`, TEST_DURATION: '1s' }),
    artifacts: [{
      name: key, sha256: createHash('sha256').update(bytes).digest('hex'), sizeBytes: String(bytes.length),
      source: { s3: { endpoint: `https://${host}:${S3_PORT}`, region: 'us-east-1', bucket: 'inputs', key, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } },
    }],
  };
}

beforeAll(async () => {
  cleanSlate();
  chart = releasedChart();
  cp = await controlPlane(chart);
  image = await evaluationImage();
  // one certificate for both servers (the CA trusted once)
  s3 = await startS3Server({ host: NET.hostAddress, port: S3_PORT, tls: { hosts: [S3_HOST, IN_CLUSTER_HOST] } });
  await s3.put('inputs', 'weights.bin', object);
  await s3.put('inputs', 'other.bin', other);
  setClusterHosts({ [S3_HOST]: NET.hostAddress });
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'artifacts' });
  clusterId = created.body.clusterId;
  runInstallCommand(cp, created.body.installCommand);
  await waitConnected(cp, clusterId);
  // the S3 server's name is allow-listed and its port allowed, and its CA trusted: only its address stands in the way.
  // The CA bundle moves from inline to a ConfigMap of the operator's (as trust-manager writes one) in both
  // namespaces: the agent's session to the control plane and the filler's downloads from S3 trust it from there
  const bundle = join(tempDir('ca-'), 'bundle.pem');
  writeFileSync(bundle, `${readFileSync(cp.caFile, 'utf8').trim()}\n${s3.ca!.trim()}\n`);
  for (const ns of [NS, RUNS]) kubectl(['-n', ns, 'create', 'configmap', TRUST_BUNDLE, `--from-file=trust-bundle.pem=${bundle}`]);
  upgradeReusing(chart, [
    '--set', `egress.extraDomains={${S3_HOST},${IN_CLUSTER_HOST}}`, '--set', `egress.allowedPorts={443,${S3_PORT}}`,
    '--set', 'controlPlane.caBundle=', '--set', `controlPlane.caBundleFrom.configMap.name=${TRUST_BUNDLE}`, '--set', 'controlPlane.caBundleFrom.configMap.key=trust-bundle.pem',
    '--wait', '--timeout', '5m',
  ]);
  for (const w of ['agent', 'filler'] as const) {
    const volume = (rt.pod(w) as unknown as { spec: { volumes: { name: string; configMap?: { name: string } }[] } }).spec.volumes.find((v) => v.name === 'ca-bundle');
    expect(volume?.configMap?.name, `${w}'s CA bundle`).toBe(TRUST_BUNDLE);
  }
  await waitConnected(cp, clusterId);
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  await s3?.close();
  setClusterHosts();
  kubectl(['delete', 'namespace', IN_CLUSTER_NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
  cleanSlate();
});

/** versitygw as a pod behind Service s3, serving the host server's folder (so the same objects) with the same certificate. */
function inClusterS3(repository: string, digest: string): object[] {
  const labels = { app: 's3' };
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: IN_CLUSTER_NS } },
    {
      apiVersion: 'v1', kind: 'Secret', metadata: { name: 'tls', namespace: IN_CLUSTER_NS }, type: 'kubernetes.io/tls',
      stringData: { 'tls.crt': readFileSync(s3.certFile!, 'utf8'), 'tls.key': readFileSync(s3.keyFile!, 'utf8') },
    },
    {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 's3', namespace: IN_CLUSTER_NS, labels },
      spec: {
        containers: [{
          name: 'versitygw', image: `${SANDBOX_REGISTRY}/${repository}@${digest}`,
          args: ['--port', `:${S3_PORT}`, '--cert', '/tls/tls.crt', '--key', '/tls/tls.key', '--access', s3.accessKeyId, '--secret', s3.secretAccessKey, 'posix', '--nometa', '/data'],
          ports: [{ containerPort: S3_PORT }],
          readinessProbe: { tcpSocket: { port: S3_PORT }, periodSeconds: 1 },
          volumeMounts: [{ name: 'tls', mountPath: '/tls', readOnly: true }, { name: 'data', mountPath: '/data' }],
        }],
        // the real node shares the host's filesystem: the host server's folder
        volumes: [{ name: 'tls', secret: { secretName: 'tls' } }, { name: 'data', hostPath: { path: s3.root, type: 'Directory' } }],
      },
    },
    {
      apiVersion: 'v1', kind: 'Service', metadata: { name: 's3', namespace: IN_CLUSTER_NS },
      spec: { selector: labels, ports: [{ port: S3_PORT, targetPort: S3_PORT, protocol: 'TCP' }] },
    },
  ];
}

describe('artifacts through the egress proxy', () => {
  it('an S3 endpoint at a private address is refused by the proxy, and the evaluation says why', async () => {
    const id = await submit(cp, clusterId, artifactEvaluation());
    const e = await waitFinished(cp, id, 240);
    expect(e.phase).toBe('Failed');
    const inCluster = JSON.parse(kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', id, '-o', 'json']).stdout) as { status: { message?: string } };
    expect(inCluster.status.message).toMatch(new RegExp(`s3://inputs/weights\\.bin at https://${S3_HOST.replace(/\./g, '\\.')}:${S3_PORT}`));
    expect(inCluster.status.message).toMatch(/egress proxy refused/i);
    const decision = await until('the proxy\'s refusal line', () => rt.log('egress').split('\n').find((l) => l.includes(S3_HOST) && /refused/.test(l)), { timeoutMs: 30_000 });
    expect(decision).toMatch(/private|non-public|special/i);
  });

  it('with egress.allowRanges naming its address, the same artifact comes through the proxy into the cache', async () => {
    upgradeReusing(chart, ['--set', `egress.allowRanges={${NET.hostAddress}/32}`, '--wait', '--timeout', '5m']);
    await rt.ready('egress');
    const id = await submit(cp, clusterId, artifactEvaluation());
    const e = await waitFinished(cp, id, 240);
    expect(e.phase).toBe('Succeeded');
    const pod = kubectl(['-n', RUNS, 'get', 'pods', '-l', 'rlmesh.dev/evaluation', '-o', 'name']).stdout.split('\n').find((p) => p.includes(id))!;
    const out = kubectl(['-n', RUNS, 'logs', pod]).stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(out.find((l) => l.step === 'artifact')).toMatchObject({ sha256, size: object.length });
    const decision = await until('the proxy\'s allow line', () => rt.log('egress').split('\n').find((l) => l.includes(S3_HOST) && !/refused/.test(l) && /allow|tunnel|connect/i.test(l)), { timeoutMs: 30_000 });
    expect(decision).toBeTruthy();
  });
  it('an S3 server inside the cluster: its Service address is refused as one of the cluster\'s own ranges, until egress.allowRanges names its Service and pod addresses', async () => {
    const { repository, digest } = await publishS3Image();
    // the pod runs as the image's non-root user: it may read the host server's bucket (not its TLS folder)
    for (const [path, mode] of [[s3.root, 0o755], [join(s3.root, 'inputs'), 0o755], [join(s3.root, 'inputs/other.bin'), 0o644]] as const) chmodSync(path, mode);
    kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: inClusterS3(repository, digest) }) });
    kubectl(['-n', IN_CLUSTER_NS, 'wait', 'pod/s3', '--for=condition=Ready', '--timeout=180s']);
    const serviceIp = kubectl(['-n', IN_CLUSTER_NS, 'get', 'service', 's3', '-o', 'jsonpath={.spec.clusterIP}']).stdout;
    const podIp = kubectl(['-n', IN_CLUSTER_NS, 'get', 'pod', 's3', '-o', 'jsonpath={.status.podIP}']).stdout;
    // the Service range reached the proxy through the agent's ConfigMap (a private address alone would be refused as private-use)
    const ranges = kubectl(['-n', 'rlmesh-system', 'get', 'configmap', 'rlmesh-cluster-ranges', '-o', 'jsonpath={.data.ranges}']).stdout.split('\n');
    expect(ranges).toContain(NET.serviceRange);

    const refused = await submit(cp, clusterId, artifactEvaluation(IN_CLUSTER_HOST, other, 'other.bin'));
    expect((await waitFinished(cp, refused, 240)).phase).toBe('Failed');
    const status = JSON.parse(kubectl(['-n', RUNS, 'get', 'rlmeshevaluation', refused, '-o', 'json']).stdout) as { status: { message?: string } };
    expect(status.status.message).toMatch(/egress proxy refused/i);
    const decision = await until('the proxy\'s refusal line', () => rt.log('egress').split('\n').find((l) => l.includes(IN_CLUSTER_HOST) && /refused/.test(l)), { timeoutMs: 30_000 });
    expect(decision).toContain('cluster-range');

    upgradeReusing(chart, ['--set', `egress.allowRanges={${NET.hostAddress}/32,${serviceIp}/32,${podIp}/32}`, '--wait', '--timeout', '5m']);
    await rt.ready('egress');
    const id = await submit(cp, clusterId, artifactEvaluation(IN_CLUSTER_HOST, other, 'other.bin'));
    expect((await waitFinished(cp, id, 240)).phase).toBe('Succeeded');
    const allowed = await until('the proxy\'s allow line', () => rt.log('egress').split('\n').find((l) => l.includes(IN_CLUSTER_HOST) && !/refused/.test(l) && /allow|tunnel|connect/i.test(l)), { timeoutMs: 30_000 });
    expect(allowed).toContain(serviceIp);
  });
});

