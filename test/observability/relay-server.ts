// The metrics relay as the control plane serves it, on 127.0.0.1: the same TLS
// HTTP/2 server with HTTP/1.1 fallback, the control plane's real SQLite store for
// relay credentials (join, rotation, 24 h overlap), and the in-memory series
// store the tests read. It records every bearer the verifier was asked about.
import { mkdtempSync } from 'node:fs';
import { createSecureServer, type Http2SecureServer } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { handleRemoteWrite, relayClusterId, RelaySeriesStore, storeRelayVerifier } from '../../controlplane/metrics-relay.ts';
import { Store, type Clock } from '../../controlplane/store.ts';
import { ensureTls } from '../../controlplane/tls.ts';

export type RelayServer = {
  url: string;
  ca: string;
  caFile: string;
  store: Store;
  series: RelaySeriesStore;
  /** Every bearer presented, in order, with the verdict. */
  presented: { bearer: string; ok: boolean; at: number }[];
  clock: Clock & { advance(ms: number): void };
  /** Registers a cluster and joins it with the relay credential. */
  joinCluster(): { clusterId: string; relay: string };
  close(): Promise<void>;
};

export async function startRelayServer(): Promise<RelayServer> {
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-relay-'));
  const tls = await ensureTls(join(dir, 'tls'));
  let offset = 0;
  const clock = { now: () => new Date(Date.now() + offset), advance: (ms: number) => void (offset += ms) };
  const store = new Store(join(dir, 'controlplane.db'), clock);
  const series = new RelaySeriesStore();
  const presented: RelayServer['presented'] = [];
  const verify = storeRelayVerifier(store);
  const server: Http2SecureServer = createSecureServer({ cert: tls.cert, key: tls.key, allowHTTP1: true }, (req, res) => {
    const clusterId = relayClusterId(new URL(req.url, 'https://relay').pathname);
    if (!clusterId) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'not_found', message: `no route ${req.url}` }));
      return;
    }
    const deps = {
      sink: series,
      verify: (id: string, bearer: string) => {
        const v = verify(id, bearer);
        presented.push({ bearer, ok: v === true || (typeof v === 'object' && v.ok), at: Date.now() });
        return v;
      },
    };
    handleRemoteWrite(req, res, clusterId, deps).catch((err: unknown) => {
      res.writeHead(500);
      res.end(String(err));
    });
  });
  const sockets = new Set<Socket>();
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    ca: tls.ca,
    caFile: tls.caFile,
    store,
    series,
    presented,
    clock,
    joinCluster() {
      const cluster = store.createCluster('observability-test');
      const { token } = store.issueJoinToken(cluster.id);
      const r = store.redeemJoinToken(token, {}, true);
      if (!r.ok || !r.credentials.relay) throw new Error(`join failed: ${JSON.stringify(r)}`);
      return { clusterId: cluster.id, relay: r.credentials.relay };
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
      store.close();
    },
  };
}
