// The agent's informers survive losing the API server: its connections to the
// real kube-apiserver go through a TCP relay this test controls, which can drop
// every connection and refuse new ones (an API server restart, as the agent sees
// it), or keep connections open but silent (a dead watch, for the watchdog).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, connect, type Server, type Socket } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { adminKubeConfig, clusterInfo, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { api, ROOT } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { newCluster, resetAgentState, runtimeConfig, RUNS, SA, SYSTEM } from './harness.ts';
import { agentSuite } from './suite.ts';
import { API_VERSION, EVALUATION, GROUP, VERSION } from '../../lib/crds/types.ts';

const TENANT = 'rlmesh-agent-it-tenant2';

/** A loopback TCP relay to the API server: 'up', 'down' (drop all, refuse new) or 'silent' (existing connections stop carrying bytes). */
class Relay {
  private server: Server | undefined;
  private readonly pairs = new Set<[Socket, Socket]>();
  port = 0;
  private readonly target: { host: string; port: number };
  constructor(target: { host: string; port: number }) {
    this.target = target;
  }
  /**
   * Listens on `port`, or on a free port below the kernel's ephemeral range: while the relay is down the
   * agent keeps dialling it, and a dial to a closed port inside that range can be given the same port as
   * its source and connect to itself, which then holds the port (TCP self-connect).
   */
  async up(port?: number): Promise<void> {
    if (port !== undefined) return this.listen(port);
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    for (let attempt = 0; ; attempt++) {
      const candidate = 20_000 + Math.floor(Math.random() * (low! - 20_000));
      try {
        return await this.listen(candidate);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt > 50) throw err;
      }
    }
  }

  private async listen(port: number): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      client.pipe(upstream);
      upstream.pipe(client);
      const close = () => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
    });
    await new Promise<void>((ok, fail) => {
      this.server!.once('error', fail);
      this.server!.listen(port, '127.0.0.1', () => ok());
    });
    this.port = (this.server.address() as { port: number }).port;
  }
  async down(): Promise<void> {
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    this.pairs.clear();
    await new Promise((ok) => this.server?.close(ok));
  }
  /** existing connections stay open but carry nothing more; new ones work */
  silence(): void {
    for (const [a, b] of this.pairs) {
      a.unpipe(b);
      b.unpipe(a);
      a.pause();
      b.pause();
    }
    this.pairs.clear();
  }
}

describe('agent informers when the API server goes away', () => {
  let relay: Relay;
  const suite = agentSuite({ joinToken: true }, {
    before: async () => {
      kubectl(['create', 'namespace', TENANT], { allowFail: true });
      const url = new URL(clusterInfo().apiserverUrl);
      relay = new Relay({ host: url.hostname, port: Number(url.port) });
      await relay.up();
    },
    after: async () => {
      await relay?.down();
      kubectl(['delete', 'namespace', TENANT, '--wait=false'], { allowFail: true });
    },
  });

  /** The agent's ServiceAccount kubeconfig, pointed at the relay. */
  const relayKubeconfig = async (): Promise<string> => {
    const kubeconfig = JSON.parse(readFileSync(await serviceAccountKubeconfig(SYSTEM, SA), 'utf8')) as { clusters: { cluster: { server: string } }[] };
    kubeconfig.clusters[0]!.cluster.server = `https://127.0.0.1:${relay.port}`;
    const kcFile = `${clusterInfo().dir}/sa/agent-it-relay.kubeconfig`;
    writeFileSync(kcFile, JSON.stringify(kubeconfig), { mode: 0o600 });
    return kcFile;
  };

  it('recovers from an API server outage and from silent watches; changes made meanwhile reach the control plane', async () => {
    const { clusterId, joinToken } = await newCluster(suite.cp, 'apiserver-loss');
    const kcFile = await relayKubeconfig();
    const agent = await suite.start({
      configFile: runtimeConfig(suite.cp, { nodeSelector: 'nvidia.com/gpu.present=true' }),
      token: joinToken,
      env: { KUBECONFIG: kcFile },
      args: ['--watch-silence-ms=4000'],
    });
    await agent.waitFor('connected', /session connected/);
    await agent.waitFor('informers synced', /node and pod informers synced/);

    const core = adminKubeConfig().makeApiClient(k8s.CoreV1Api);
    const report = async () =>
      (await api<{ nodeReport: { report: { nodes: { name: string; gpusFree?: number }[] } } | null }>(suite.cp, 'GET', `/v1/clusters/${clusterId}`)).body.nodeReport?.report.nodes.find((n) => n.name === 'kwok-gpu-0');
    const gpusFree = async () => (await report())?.gpusFree ?? 0;
    const base = await until('first report', async () => (await report()) ?? undefined, { timeoutMs: 20_000 }).then((n) => n.gpusFree ?? 0);
    const pod = (name: string, gpus: number): k8s.V1Pod => ({
      metadata: { name },
      spec: { nodeName: 'kwok-gpu-0', tolerations: [{ operator: 'Exists' }], containers: [{ name: 'c', image: 'busybox', resources: { limits: { 'nvidia.com/gpu': String(gpus) } } }] },
    });

    // 1. outage: every connection dropped, new ones refused; a change happens meanwhile
    const port = relay.port;
    await relay.down();
    await core.createNamespacedPod({ namespace: TENANT, body: pod('during-outage', 2) });
    await agent.waitFor('watch failure noticed', /watch failed; restarting the informer/, { timeoutMs: 30_000 });
    expect(agent.proc.exitCode).toBeNull();
    await new Promise((r) => setTimeout(r, 3000));
    await relay.up(port);
    await until('the change made during the outage is reported', async () => ((await gpusFree()) === base - 2 ? true : undefined), { timeoutMs: 60_000, intervalMs: 200 });
    // and changes after it flow as before
    await core.createNamespacedPod({ namespace: TENANT, body: pod('after-outage', 1) });
    await until('a change after the outage is reported', async () => ((await gpusFree()) === base - 3 ? true : undefined), { timeoutMs: 30_000, intervalMs: 200 });

    // 2. silent watches: connections stay open but carry nothing; the watchdog re-opens them
    relay.silence();
    await core.deleteNamespacedPod({ namespace: TENANT, name: 'during-outage', gracePeriodSeconds: 0 });
    await agent.waitFor('watchdog', /watch silent for too long; re-opening it/, { timeoutMs: 30_000 });
    await until('the change made while the watch was silent is reported', async () => ((await gpusFree()) === base - 1 ? true : undefined), { timeoutMs: 60_000, intervalMs: 200 });
    expect(agent.proc.exitCode).toBeNull();
    await agent.stop();
  });

  it('a real kube-apiserver restart: informers recover and changes made afterwards reach the control plane', async () => {
    resetAgentState();
    const { clusterId, joinToken } = await newCluster(suite.cp, 'apiserver-restart');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp, { nodeSelector: 'nvidia.com/gpu.present=true' }), token: joinToken });
    await agent.waitFor('connected', /session connected/);
    await agent.waitFor('informers synced', /node and pod informers synced/);
    const report = async () =>
      (await api<{ nodeReport: { report: { nodes: { name: string; gpusFree?: number }[] } } | null }>(suite.cp, 'GET', `/v1/clusters/${clusterId}`)).body.nodeReport?.report.nodes.find((n) => n.name === 'kwok-gpu-0');
    const base = await until('first report', async () => (await report()) ?? undefined, { timeoutMs: 20_000 }).then((n) => n.gpusFree ?? 0);

    execFileSync(join(ROOT, 'test/cluster/restart'), ['kube-apiserver'], { stdio: 'pipe', timeout: 120_000 });
    const core = adminKubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedPod({
      namespace: TENANT,
      body: { metadata: { name: 'after-restart' }, spec: { nodeName: 'kwok-gpu-0', tolerations: [{ operator: 'Exists' }], containers: [{ name: 'c', image: 'busybox', resources: { limits: { 'nvidia.com/gpu': '1' } } }] } },
    });
    await until('pod change after the restart reported', async () => ((await report())?.gpusFree === base - 1 ? true : undefined), { timeoutMs: 60_000, intervalMs: 200 });
    const custom = adminKubeConfig().makeApiClient(k8s.CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: RUNS, plural: EVALUATION.plural,
      body: { apiVersion: API_VERSION, kind: EVALUATION.kind, metadata: { name: 'after-apiserver-restart' }, spec: { evaluationId: 'after-apiserver-restart', image: 'busybox', deadlineSeconds: 60 } },
    });
    await until('evaluation created after the restart reported', async () => ((await api<{ phase: string }>(suite.cp, 'GET', '/v1/evaluations/after-apiserver-restart')).body.phase === 'Pending' ? true : undefined), { timeoutMs: 60_000, intervalMs: 250 });
    expect(agent.proc.exitCode).toBeNull();
    await core.deleteNamespacedPod({ namespace: TENANT, name: 'after-restart', gracePeriodSeconds: 0 });
    await agent.stop();
  });
  // last in this file: it advances the control plane's clock by a day
  it('a rotation during a three-minute API server outage is stored once the API is back, and the agent still connects after the 24-hour overlap', async () => {
    resetAgentState();
    const { clusterId, joinToken } = await newCluster(suite.cp, 'rotation-outage');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp), token: joinToken, env: { KUBECONFIG: await relayKubeconfig() } });
    await agent.waitFor('connected', /session connected/);
    const port = relay.port;
    await relay.down();
    let back = false;
    try {
      const rotated = await api<{ value: string; deliveredToSession: boolean }>(suite.cp, 'POST', `/v1/clusters/${clusterId}/credentials/control/rotate`);
      expect(rotated.body.deliveredToSession).toBe(true);
      await agent.waitFor('the write to fail', /storing the rotated control credential failed; retrying/, { timeoutMs: 60_000 });
      await new Promise((r) => setTimeout(r, 180_000));
      await relay.up(port);
      back = true;
      await agent.waitFor('the rotated credential stored', /rotated credential written to its Secret/, { timeoutMs: 120_000 });
      const stored = JSON.parse(kubectl(['-n', SYSTEM, 'get', 'secret', 'rlmesh-cluster-control', '-o', 'jsonpath={.data}']).stdout) as { control: string };
      expect(Buffer.from(stored.control, 'base64').toString()).toBe(rotated.body.value);
    } finally {
      if (!back) await relay.up(port);
    }
    // past the overlap the old credential is refused; the agent, on the new one, is still seen
    expect((await api(suite.cp, 'POST', '/v1/test/clock/advance', { ms: 25 * 3600 * 1000 })).status).toBe(200);
    const seenAt = async () => (await api<{ lastSeenAt: string }>(suite.cp, 'GET', `/v1/clusters/${clusterId}`)).body.lastSeenAt;
    const seen = await seenAt();
    await until('lastSeenAt to advance on the rotated credential', async () => ((await seenAt()) > seen ? true : undefined), { timeoutMs: 30_000 });
    expect(agent.log()).not.toMatch(/refused the control credential|giving up/);
    expect(agent.proc.exitCode).toBeNull();
    await agent.stop();
  }, 420_000);
});
