// One TLS port for everything: the gRPC session (HTTP/2, Connect-ES with the
// gRPC protocol), and as its fallback the metrics relay (Prometheus remote
// write) and the REST API (HTTP/1.1 or HTTP/2).
import { createSecureServer, type Http2SecureServer } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { Logger } from 'pino';
import pkg from '../package.json' with { type: 'json' };
import { LiveSessions } from './live-sessions.ts';
import { handleRemoteWrite, RelaySeriesStore, relayClusterId, storeRelayVerifier, type RelayResponse } from './metrics-relay.ts';
import { createApiHandler } from './rest-api.ts';
import { clusterSessionRoutes } from './agent-session.ts';
import { Store, systemClock, type Clock } from './store.ts';

export const DEFAULT_CHART_REF = 'oci://registry.rlmesh.dev/rlmesh/charts/rlmesh-runtime';

export type ControlPlaneOptions = {
  dbFile: string;
  tls: { cert: string; key: string };
  host: string;
  port: number;
  adminToken: string;
  log: Logger;
  /** What /v1/info tells agents to dial; defaults to the listen address. */
  advertiseHost?: string;
  advertisePort?: number;
  registryHost?: string;
  outputHosts?: string[];
  chartRef?: string;
  chartVersion?: string;
  pingIntervalMs?: number;
  silenceTimeoutMs?: number;
  rotationResendMs?: number;
  clock?: Clock;
  advanceClock?: (ms: number) => Date;
  /** --test-ignore-drain: new evaluations for a draining cluster are sent anyway (tests of the cluster's own drain only) */
  ignoreDrain?: boolean;
};

export type ControlPlane = {
  url: string;
  port: number;
  store: Store;
  sessions: LiveSessions;
  /** What the metrics relay received (in memory). */
  relay: RelaySeriesStore;
  close(): Promise<void>;
};

export async function startControlPlane(opts: ControlPlaneOptions): Promise<ControlPlane> {
  const store = new Store(opts.dbFile, opts.clock ?? systemClock);
  store.markAllDisconnected();
  const sessions = new LiveSessions();
  const relay = new RelaySeriesStore();
  const registryHost = opts.registryHost ?? 'registry.rlmesh.dev';
  const pingIntervalMs = opts.pingIntervalMs ?? 15_000;
  const silenceTimeoutMs = opts.silenceTimeoutMs ?? 45_000;

  // The advertised gRPC port is only known after listen() when port is 0.
  const grpc = { host: opts.advertiseHost ?? advertisable(opts.host), port: opts.advertisePort ?? opts.port };
  const platform = { outputHosts: opts.outputHosts ?? [] };
  const api = createApiHandler({
    store,
    sessions,
    log: opts.log,
    adminToken: opts.adminToken,
    grpc,
    registryHost,
    platform,
    chartRef: opts.chartRef ?? DEFAULT_CHART_REF,
    chartVersion: opts.chartVersion ?? pkg.version,
    controlPlaneVersion: pkg.version,
    relay,
    ...(opts.advanceClock ? { advanceClock: opts.advanceClock } : {}),
    ...(opts.ignoreDrain ? { ignoreDrain: true } : {}),
  });
  const handler = connectNodeAdapter({
    routes: clusterSessionRoutes({ store, sessions, log: opts.log, registryHost, platform, version: pkg.version, pingIntervalMs, silenceTimeoutMs, ...(opts.rotationResendMs ? { rotationResendMs: opts.rotationResendMs } : {}) }),
    fallback: (req, res) => {
      const relayCluster = relayClusterId(new URL(req.url ?? '/', 'https://control-plane').pathname);
      if (relayCluster === undefined) return api(req, res);
      handleRemoteWrite(req, res as unknown as RelayResponse, relayCluster, { verify: storeRelayVerifier(store), sink: relay }).catch((err: unknown) => {
        opts.log.error({ err, clusterId: relayCluster }, 'remote write failed');
        if (!res.headersSent) {
          (res as { writeHead(status: number, headers: Record<string, string>): void }).writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ code: 'internal', message: 'the relay failed to store this batch; Prometheus retries it' }));
        }
      });
    },
  });

  const server: Http2SecureServer = createSecureServer({ cert: opts.tls.cert, key: opts.tls.key, allowHTTP1: true }, handler);
  const sockets = new Set<Socket>();
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  if (opts.advertisePort === undefined) grpc.port = port;
  const urlHost = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  opts.log.info({ listen: `${opts.host}:${port}`, grpc }, 'control plane listening');

  return {
    url: `https://${urlHost}:${port}`,
    port,
    store,
    sessions,
    relay,
    async close() {
      sessions.closeAll(new ConnectError('the control plane is shutting down; the agent should reconnect', Code.Unavailable));
      // let the error reach the agents before the connections go
      await new Promise((r) => setTimeout(r, 50));
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
      store.close();
    },
  };
}

function advertisable(host: string): string {
  return host === '0.0.0.0' || host === '::' ? 'localhost' : host;
}
