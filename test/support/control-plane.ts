// A reference control plane for tests, shared by the control plane's and the
// CLI's unit tests and the integration tests: a manual clock, a real control
// plane on 127.0.0.1 with a generated CA and a fixed admin token, a REST client
// that trusts that CA, and a Connect-ES gRPC session client. It lives under
// test/ so that nothing of it goes into the product (scripts/image/bundle.test.ts checks).
import { join } from 'node:path';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { pino } from 'pino';
import { AgentMessageSchema, ClusterSession, type AgentMessage, type ControlMessage, type HelloSchema } from '../../lib/gen/rlmesh/v1/session_pb.ts';
import pkg from '../../package.json' with { type: 'json' };
import { Outbox } from '../../controlplane/live-sessions.ts';
import { startControlPlane, type ControlPlane, type ControlPlaneOptions } from '../../controlplane/server.ts';
import type { Clock } from '../../controlplane/store.ts';
import { ensureTls } from '../../controlplane/tls.ts';
import { api } from './api.ts';
import { tempDir } from './temp.ts';

export type ManualClock = Clock & { advance(ms: number): void };

export function manualClock(start = '2026-01-01T00:00:00.000Z'): ManualClock {
  let t = Date.parse(start);
  return { now: () => new Date(t), advance: (ms: number) => void (t += ms) };
}

export type TestControlPlane = ControlPlane & { ca: string; caFile: string; adminToken: string; dir: string; clock: ManualClock; dbFile: string };

export async function startTestControlPlane(
  { tlsHosts = [], ...overrides }: Partial<ControlPlaneOptions> & { dir?: string; clock?: ManualClock; tlsHosts?: string[] } = {},
): Promise<TestControlPlane> {
  const dir = overrides.dir ?? tempDir('rlmesh-cp-');
  const tls = await ensureTls(join(dir, 'tls'), tlsHosts);
  const clock = overrides.clock ?? manualClock(new Date().toISOString());
  const adminToken = 'rlm_admin_test_0123456789abcdefghijklmnopqrstuv';
  const dbFile = join(dir, 'controlplane.db');
  const cp = await startControlPlane({
    dbFile,
    tls,
    host: '127.0.0.1',
    port: 0,
    adminToken,
    log: pino({ level: process.env.LOG_LEVEL ?? 'silent' }),
    pingIntervalMs: 200,
    silenceTimeoutMs: 10_000,
    ...overrides,
    clock,
  });
  return { ...cp, ca: tls.ca, caFile: tls.caFile, adminToken, dir, clock, dbFile };
}

/** Registers a cluster and joins it: returns its id and credentials. */
export async function joinedCluster(cp: TestControlPlane, facts: Record<string, unknown> = {}) {
  const created = await api(cp, 'POST', '/v1/clusters', { name: 'test' });
  const joined = await api(cp, 'POST', '/v1/clusters/join', { token: created.body.joinToken, facts }, false);
  if (joined.status !== 200) throw new Error(`join failed: ${JSON.stringify(joined.body)}`);
  return { clusterId: String(joined.body.clusterId), control: String(joined.body.control), pull: String(joined.body.pull), joinToken: String(created.body.joinToken) };
}

export type TestSession = {
  received: ControlMessage[];
  send(msg: MessageInitShape<typeof AgentMessageSchema>['msg']): void;
  /** Resolves with the first received message of this kind matching `match`. */
  waitFor<C extends NonNullable<ControlMessage['msg']['case']>>(kind: C, match?: (m: Extract<ControlMessage['msg'], { case: C }>['value']) => boolean, timeoutMs?: number): Promise<Extract<ControlMessage['msg'], { case: C }>['value']>;
  /** Resolves when the server ends the stream: null for a clean end, else the error. */
  ended: Promise<ConnectError | null>;
  close(): void;
};

/**
 * Opens a session as an agent does: Hello first (by default an agent of this package's version,
 * which the control plane accepts; `hello: false` sends none, for tests of what precedes it).
 */
export function openSession(cp: { url: string; ca: string }, credential: string | null, hello: MessageInitShape<typeof HelloSchema> | false = { agentVersion: pkg.version }): TestSession {
  const transport = createGrpcTransport({ baseUrl: cp.url, nodeOptions: { ca: cp.ca } }) // gRPC: always HTTP/2;
  const client = createClient(ClusterSession, transport);
  const outgoing = new Outbox<AgentMessage>();
  const received: ControlMessage[] = [];
  const listeners = new Set<() => void>();
  const notify = (): void => {
    for (const l of [...listeners]) l();
  };
  if (hello) outgoing.push(create(AgentMessageSchema, { msg: { case: 'hello', value: hello } }));
  const abort = new AbortController();
  const stream = client.connect(outgoing, { headers: credential === null ? {} : { authorization: `Bearer ${credential}` }, signal: abort.signal });
  let finished = false;
  const ended = (async () => {
    try {
      for await (const m of stream) {
        received.push(m);
        notify();
      }
      return null;
    } catch (err) {
      return ConnectError.from(err);
    } finally {
      finished = true;
      notify();
    }
  })();
  return {
    received,
    send: (msg) => outgoing.push(create(AgentMessageSchema, { msg })),
    waitFor: (kind, match = () => true, timeoutMs = 5000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${kind} message within ${timeoutMs} ms (got ${received.map((m) => m.msg.case).join(',')})`)), timeoutMs);
        const check = (): void => {
          const hit = received.find((m) => m.msg.case === kind && match(m.msg.value as never));
          if (!hit && !finished) return;
          listeners.delete(check);
          clearTimeout(timer);
          if (hit) resolve(hit.msg.value as never);
          else reject(new Error(`the stream ended before a ${kind} message arrived`));
        };
        listeners.add(check);
        check();
      }),
    ended,
    close: () => {
      outgoing.close();
      setTimeout(() => abort.abort(), 2000).unref();
    },
  };
}
