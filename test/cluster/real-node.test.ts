// A real node in the local cluster (test/cluster/real-node.ts): added to the
// running cluster for this file and removed after it. It registers Ready as
// system:node:<name> under the Node authorizer and NodeRestriction, runs the
// released runtime image and the test evaluation image as real containers,
// pulled by digest from the local registry through containerd's
// registry.rlmesh.dev mirror (the runtime image with a join token, as the
// agent's pod at install), and neither the node's nor a pod's network
// namespace has a route anywhere but the harness's own subnets. Nothing here
// sends a packet; the routing tables are read.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishEvaluationImage } from '../images/evaluation/publish.ts';
import { REPOSITORY as EVALUATION_REPOSITORY } from '../images/evaluation/build.ts';
import { clusterInfo, kubectl } from '../support/cluster.ts';
import { api, startControlPlane } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { dockerConfigJson } from '../../lib/credential-secret.ts';
import { releaseInfo } from '../support/release.ts';
import { inside, NET, podNetnsPath, realNodes, routesIn, routesOutsideHarness, SANDBOX_REGISTRY, startRealNode, stopRealNode, type RealNode, type Route } from './real-node.ts';

const NAME = 'real-test';
const NS = 'rlmesh-real-node-test';
// only this file's pods land on the node: nothing else the suite left pending is scheduled there
const TAINT = { key: 'rlmesh.dev/real-node-test', value: 'true', effect: 'NoSchedule' as const };

type PodStatus = {
  metadata: { uid: string };
  status: {
    phase?: string;
    podIP?: string;
    containerStatuses?: { imageID?: string; state?: { running?: object; terminated?: { exitCode: number; reason?: string } }; lastState?: object }[];
  };
};

function pod(name: string, image: string, opts: { args?: string[]; env?: Record<string, string>; pullSecret?: string } = {}): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS },
    spec: {
      restartPolicy: 'Never',
      nodeSelector: { 'kubernetes.io/hostname': NAME },
      tolerations: [{ ...TAINT, operator: 'Equal' }],
      securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      ...(opts.pullSecret ? { imagePullSecrets: [{ name: opts.pullSecret }] } : {}),
      containers: [
        {
          name: 'main',
          image,
          imagePullPolicy: 'IfNotPresent',
          ...(opts.args ? { args: opts.args } : {}),
          env: Object.entries(opts.env ?? {}).map(([name, value]) => ({ name, value })),
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  });
}

const getPod = (name: string) => JSON.parse(kubectl(['-n', NS, 'get', 'pod', name, '-o', 'json']).stdout) as PodStatus;

function waitPod(name: string, timeoutMs: number, done: (p: PodStatus) => boolean): Promise<PodStatus> {
  return until(`pod ${name} to get there`, () => {
    const p = getPod(name);
    return done(p) ? p : undefined;
  }, {
    timeoutMs,
    intervalMs: 500,
    context: () => kubectl(['-n', NS, 'describe', 'pod', name], { allowFail: true }).stdout,
  });
}

function checkRoutes(where: string, routes: { v4: Route[]; v6: Route[] }): void {
  expect(routesOutsideHarness(routes), where).toEqual([]);
}

describe('a real node of the local cluster (kubelet, containerd, runc, CNI in a network namespace of its own)', () => {
  let node: RealNode;

  beforeAll(async () => {
    // a node a failed earlier run left behind
    if (realNodes().some((n) => n.name === NAME)) await stopRealNode(NAME);
    node = await startRealNode({ name: NAME, taints: [TAINT] });
    console.log(`real node ${NAME} start: ${JSON.stringify(node.timings)}`);
    kubectl(['delete', 'namespace', NS, '--ignore-not-found', '--wait=true']);
    kubectl(['create', 'namespace', NS]);
    kubectl(['label', 'namespace', NS, 'pod-security.kubernetes.io/enforce=restricted', 'pod-security.kubernetes.io/enforce-version=latest']);
    for (let i = 0; i < 60 && kubectl(['-n', NS, 'get', 'serviceaccount', 'default'], { allowFail: true }).status !== 0; i++) await new Promise((r) => setTimeout(r, 500));
  }, 300_000);

  afterAll(async () => {
    kubectl(['delete', 'namespace', NS, '--ignore-not-found', '--wait=false'], { allowFail: true });
    if (realNodes().some((n) => n.name === NAME)) await stopRealNode(NAME);
  }, 120_000);

  it('is Ready, authenticated as system:node:<name> in system:nodes, and the Node authorizer and NodeRestriction hold it to itself', () => {
    const n = JSON.parse(kubectl(['get', 'node', NAME, '-o', 'json']).stdout) as { status: { conditions: { type: string; status: string }[]; addresses: { type: string; address: string }[] }; spec: { taints?: object[] } };
    expect(n.status.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(n.status.addresses).toContainEqual({ type: 'InternalIP', address: node.address });
    expect(n.spec.taints).toContainEqual(TAINT);
    const asNode = (args: string[]) => kubectl(['--kubeconfig', node.kubeconfig, ...args], { allowFail: true });
    const who = JSON.parse(asNode(['auth', 'whoami', '-o', 'json']).stdout) as { status: { userInfo: { username: string; groups: string[] } } };
    expect(who.status.userInfo.username).toBe(`system:node:${NAME}`);
    expect(who.status.userInfo.groups).toContain('system:nodes');
    // the Node authorizer: a node reads no Secret it has no pod for
    expect(asNode(['auth', 'can-i', 'list', 'secrets', '--all-namespaces']).stdout.trim()).toMatch(/^no\b/);
    // NodeRestriction: a node may not change another node
    const other = asNode(['label', 'node', 'kwok-cpu-0', 'rlmesh.dev/touched=yes']);
    expect(other.status).not.toBe(0);
    expect(other.stderr).toMatch(/forbidden|cannot modify/i);
  });

  it('runs the released runtime image, pulled by digest through the registry.rlmesh.dev mirror, as a real container (egress --help exits 0)', async () => {
    const runtime = releaseInfo().images['rlmesh-runtime']!;
    const image = `${SANDBOX_REGISTRY}/${runtime.repository}@${runtime.digest}`;
    // the runtime image is not public: pull it as the agent's pod does at install, with an unredeemed join
    // token (the registry's token service judges it by the control plane's store, which outlives the process)
    const cp = await startControlPlane({ args: ['--registry-stores-dir', clusterInfo().registryStores] });
    const created = await api<{ joinToken: string }>(cp, 'POST', '/v1/clusters', { name: 'real-node-test' });
    await cp.stop();
    const config = dockerConfigJson(SANDBOX_REGISTRY, 'rlmesh-join', created.body.joinToken);
    const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'join-pull', namespace: NS }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': Buffer.from(config).toString('base64') } };
    kubectl(['apply', '-f', '-'], { input: JSON.stringify(secret) });
    kubectl(['apply', '-f', '-'], { input: pod('runtime-egress-help', image, { args: ['egress', '--help'], pullSecret: 'join-pull' }) });
    const p = await waitPod('runtime-egress-help', 150_000, (x) => x.status.phase === 'Succeeded' || x.status.phase === 'Failed');
    expect(p.status.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(0);
    expect(p.status.phase).toBe('Succeeded');
    expect(p.status.containerStatuses?.[0]?.imageID).toContain(runtime.digest);
    // the kubelet serves the container's log to the apiserver (its client certificate, the kubelet's webhook authn/authz)
    expect(kubectl(['-n', NS, 'logs', 'runtime-egress-help']).stdout).toContain('usage: rlmesh-runtime egress');
  }, 180_000);

  it('runs the test evaluation image to its TEST_EXIT_CODE; the node and the pod route only the harness subnets, with no default route', async () => {
    const evaluation = await publishEvaluationImage();
    const image = `${SANDBOX_REGISTRY}/${EVALUATION_REPOSITORY}@${evaluation.digest}`;
    kubectl(['apply', '-f', '-'], { input: pod('evaluation-exit-3', image, { env: { TEST_EXIT_CODE: '3', TEST_DURATION: '15s' } }) });
    const running = await waitPod('evaluation-exit-3', 120_000, (x) => !!x.status.containerStatuses?.[0]?.state?.running || x.status.phase === 'Failed');
    expect(running.status.podIP && inside(running.status.podIP, node.podSubnet), `pod IP ${running.status.podIP} in ${node.podSubnet}`).toBe(true);

    checkRoutes(`node ${NAME}`, routesIn(node.netns));
    const podNs = podNetnsPath(node, running.metadata.uid);
    checkRoutes('pod evaluation-exit-3', routesIn(podNs));
    // the pod's network namespace is not the node's
    expect(statSync(podNs).ino).not.toBe(statSync(`/run/netns/${node.netns}`).ino);
    const ended = await waitPod('evaluation-exit-3', 60_000, (x) => x.status.phase === 'Succeeded' || x.status.phase === 'Failed');
    expect(ended.status.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(3);
    expect(ended.status.phase).toBe('Failed');
  }, 180_000);

  it('stops leaving nothing behind: no process, mount, network namespace, link, route or cgroup of the node', async () => {
    kubectl(['-n', NS, 'delete', 'pods', '--all', '--wait=true', '--timeout=60s']);
    await stopRealNode(NAME);
    expect(realNodes().map((n) => n.name)).not.toContain(NAME);
    expect(existsSync(`/run/netns/${node.netns}`)).toBe(false);
    expect(existsSync(`/sys/class/net/${node.hostVeth}`)).toBe(false);
    expect(existsSync(`/sys/fs/cgroup/pids/${node.cgroup}`)).toBe(false);
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(node.dir);
    expect(existsSync(node.dir)).toBe(false);
    expect(kubectl(['get', 'node', NAME], { allowFail: true }).status).not.toBe(0);
    // the bridge and the forwarder went with the last real node
    if (realNodes().length === 0) expect(existsSync(`/sys/class/net/${NET.bridge}`)).toBe(false);
  }, 120_000);
});
