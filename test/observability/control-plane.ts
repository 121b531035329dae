// The reference control plane (controlplane/, real TLS, SQLite store, the
// metrics relay on its one port) started on 127.0.0.1 for the observability
// tests, and what they ask it through its own API.
import { startTestControlPlane, type TestControlPlane } from '../support/control-plane.ts';
import { api } from '../support/runtime.ts';

export type RelayCluster = { clusterId: string; relay: string };
export type RelaySeries = { labels: Record<string, string>; samples: number; lastValue: number; lastTimestampMs: number };
export type RelayView = { requests: number; samples: number; metadata: number; series: number; droppedSeries: number; matching: RelaySeries[] };

export { startTestControlPlane, type TestControlPlane };

/** Registers a cluster and joins it the way an agent installed with observability.enabled=true does. */
export async function joinWithRelay(cp: TestControlPlane): Promise<RelayCluster> {
  const created = await api(cp, 'POST', '/v1/clusters', { name: 'observability-test' });
  const joined = await api(cp, 'POST', '/v1/clusters/join', { token: created.body.joinToken, facts: { observability: true } }, false);
  if (joined.status !== 200 || typeof joined.body.relay !== 'string') throw new Error(`join with observability failed: ${JSON.stringify(joined.body)}`);
  return { clusterId: String(joined.body.clusterId), relay: joined.body.relay };
}

/** Rotates the relay credential through the admin API (Settings → rotate); returns the new value. */
export async function rotateRelay(cp: TestControlPlane, clusterId: string): Promise<string> {
  const r = await api(cp, 'POST', `/v1/clusters/${clusterId}/credentials/relay/rotate`);
  if (r.status !== 200) throw new Error(`rotation failed: ${JSON.stringify(r.body)}`);
  return String(r.body.value);
}

/** What the relay received from a cluster (GET /v1/clusters/{id}/metrics), series filtered by labels. */
export async function relayView(cp: TestControlPlane, clusterId: string, match: Record<string, string> = {}): Promise<RelayView> {
  const r = await api(cp, 'GET', `/v1/clusters/${clusterId}/metrics?${new URLSearchParams(match).toString()}`);
  if (r.status !== 200) throw new Error(`GET /v1/clusters/${clusterId}/metrics: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as unknown as RelayView;
}

/** True once the newest relay credential has been presented (the store then stops holding it for delivery). */
export const rotationUsed = (cp: TestControlPlane, clusterId: string): boolean => !cp.store.undeliveredRotations(clusterId).some((r) => r.purpose === 'relay');
