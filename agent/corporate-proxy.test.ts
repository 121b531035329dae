// The agent behind a corporate proxy: discovery, the join and the gRPC session
// go through Debian's Squid (basic auth) to a control plane whose name only
// Squid resolves, all on loopback; a wrong password is one line naming the proxy.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { pino, type Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeConfigSchema } from '../lib/runtime-config.ts';
import { api } from '../test/support/api.ts';
import { startTestControlPlane, type TestControlPlane } from '../test/support/control-plane.ts';
import { freePort } from '../test/support/free-port.ts';
import { startSquid, type Squid } from '../test/support/squid.ts';
import { until } from '../test/support/until.ts';
import type { OutboundProxy } from '../lib/outbound-proxy.ts';
import { Session } from './control-plane-session.ts';
import { controlPlaneClient, fetchInfo, join } from './join.ts';

const CP_HOST = 'api.corporate-proxy.test';

let cp: TestControlPlane;
let squid: Squid;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(joinPath(tmpdir(), 'rlmesh-agent-proxy-'));
  cp = await startTestControlPlane({ dir, tlsHosts: [CP_HOST], advertiseHost: CP_HOST });
  squid = await startSquid({ listen: { host: '127.0.0.1', port: await freePort() }, hosts: { [CP_HOST]: '127.0.0.1' } });
  mkdirSync(joinPath(dir, 'proxy'));
  password(squid.password);
}, 60_000);

afterAll(async () => {
  await squid?.stop();
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

function password(p: string) {
  writeFileSync(joinPath(dir, 'proxy/username'), squid.username);
  writeFileSync(joinPath(dir, 'proxy/password'), p);
}

const config = () =>
  runtimeConfigSchema.parse({
    controlPlane: {
      apiHost: CP_HOST,
      apiPort: cp.port,
      caBundlePath: cp.caFile,
      proxy: { url: squid.url, noProxy: ['.svc', '.cluster.local'], credentialsDir: joinPath(dir, 'proxy'), credentialsSecret: 'corp-proxy' },
    },
    credentials: {},
    observability: {},
    gpuFeatureDiscovery: {},
    egress: {},
    artifactCache: {},
  });

/** The agent's session to the control plane, through `proxy`, with quick timings. */
function sessionThroughSquid(proxy: OutboundProxy | undefined, joined: { control: string; clusterId: string }, log: Logger): Session {
  return new Session({
    target: { host: CP_HOST, port: cp.port },
    ca: cp.ca,
    proxy,
    credential: () => ({ control: joined.control, clusterId: joined.clusterId }),
    agentVersion: '0.0.0-test',
    kubernetesVersion: () => 'v1.31.0',
    timing: { heartbeatMs: 200, silenceMs: 5000, backoffBaseMs: 100, backoffMaxMs: 500, authBackoffMs: 1000, reportDelayMs: 10, watchSilenceMs: 60_000, leaseSeconds: 15 },
    log,
    pendingIds: () => [],
    onConnected: () => undefined,
    onMessage: () => undefined,
    onState: () => undefined,
    onReconnect: () => undefined,
  });
}

const tunnels = (from: number) => squid.accessLog().slice(from).filter((l) => l.includes(`CONNECT ${CP_HOST}:${cp.port}`) && l.includes(squid.username));

describe('the agent behind Squid', () => {
  it('discovers, joins and holds the session through CONNECT tunnels, each in the access log', async () => {
    const before = squid.accessLog().length;
    const client = controlPlaneClient(config());
    const info = await fetchInfo(client);
    expect(info.grpc).toEqual({ host: CP_HOST, port: cp.port, tls: true });
    const created = await api(cp, 'POST', '/v1/clusters', { name: 'behind-proxy' });
    const joined = await join(client, String(created.body.joinToken), {});
    await client.dispatcher.close();

    const session = sessionThroughSquid(client.proxy, joined, pino({ level: 'silent' }));
    session.start();
    try {
      await until('the session through Squid is live', () => session.live, { timeoutMs: 15_000 });
      const { clusters } = (await api(cp, 'GET', '/v1/clusters')).body as { clusters: { id: string; status: string }[] };
      expect(clusters.find((c) => c.id === joined.clusterId)?.status).toBe('Connected');
    } finally {
      await session.stop();
    }
    // Squid logs a tunnel when it closes: discovery and the join (one kept-alive tunnel or two), and the session
    await until('Squid logs the tunnels', () => tunnels(before).length >= 2, { timeoutMs: 10_000 });
  });

  it('a wrong proxy password: the join says so, naming the proxy and the Secret, never the password', async () => {
    password('a-wrong-password');
    try {
      const client = controlPlaneClient(config());
      const err = (await fetchInfo(client).catch((e: unknown) => e)) as Error;
      expect(err.message).toBe(
        `cannot reach the control plane at https://${CP_HOST}:${cp.port}: the corporate proxy ${squid.url} answered 407 Proxy Authentication Required to CONNECT ${CP_HOST}:${cp.port}: it does not accept the username and password in Secret corp-proxy; put the right ones in its keys username and password (read again at the next attempt)`,
      );
      expect(err.message).not.toContain('a-wrong-password');
    } finally {
      password(squid.password);
    }
  });

  it('a wrong proxy password: the session logs the proxy\'s answer, and connects once the Secret is fixed', async () => {
    const created = await api(cp, 'POST', '/v1/clusters', { name: 'behind-proxy-2' });
    const client = controlPlaneClient(config());
    const joined = await join(client, String(created.body.joinToken), {});
    password('a-wrong-password');
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) });
    const session = sessionThroughSquid(client.proxy, joined, log);
    session.start();
    try {
      await until('the session logs the 407', () => lines.find((l) => l.includes('answered 407')), { timeoutMs: 10_000 });
      const line = JSON.parse(lines.find((l) => l.includes('answered 407'))!) as { err: string };
      expect(line.err).toContain(`the corporate proxy ${squid.url} answered 407 Proxy Authentication Required to CONNECT ${CP_HOST}:${cp.port}`);
      expect(lines.join('\n')).not.toContain('a-wrong-password');
      password(squid.password);
      await until('the session connects with the fixed password', () => session.live, { timeoutMs: 15_000 });
    } finally {
      password(squid.password);
      await session.stop();
    }
  });
});
