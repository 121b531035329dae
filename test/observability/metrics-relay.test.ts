// The reference control plane's metrics relay, on its one TLS port on
// 127.0.0.1 (HTTP/2 and HTTP/1.1): remote write 1.0 bodies built with the
// protocol's own encoding (protobuf WriteRequest, snappy block format), the
// answers Prometheus acts on (204 / 400 / 401), rotation with the 24 h overlap,
// and what the admin API then shows.
import { create, toBinary } from '@bufbuild/protobuf';
import { compress } from 'snappyjs';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../support/runtime.ts';
import { relayClusterId } from '../../controlplane/metrics-relay.ts';
import { ROTATION_OVERLAP_MS } from '../../controlplane/store.ts';
import { WriteRequestSchema } from '../../lib/gen/prometheus/remote_pb.ts';
import { joinWithRelay, relayView, rotateRelay, startTestControlPlane, type RelayCluster, type TestControlPlane } from './control-plane.ts';

let cp: TestControlPlane;
let dispatcher: Agent;
let cluster: RelayCluster;

beforeAll(async () => {
  cp = await startTestControlPlane();
  dispatcher = new Agent({ connect: { ca: cp.ca }, allowH2: true });
  cluster = await joinWithRelay(cp);
});
afterAll(async () => {
  await dispatcher.close();
  await cp.close();
});

function writeRequest(series: { labels: Record<string, string>; samples: [number, number][] }[]): Uint8Array {
  const msg = create(WriteRequestSchema, {
    timeseries: series.map((s) => ({
      labels: Object.entries(s.labels)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([name, value]) => ({ name, value })),
      samples: s.samples.map(([value, ts]) => ({ value, timestamp: BigInt(ts) })),
    })),
  });
  return compress(toBinary(WriteRequestSchema, msg));
}

async function post(clusterId: string, body: Uint8Array | string, headers: Record<string, string>) {
  const res = await request(`${cp.url}/v1/cells/${clusterId}/metrics`, {
    method: 'POST',
    dispatcher,
    body: typeof body === 'string' ? body : Buffer.from(body),
    headers: { 'content-type': 'application/x-protobuf', 'content-encoding': 'snappy', 'x-prometheus-remote-write-version': '0.1.0', ...headers },
  });
  const text = await res.body.text();
  return { status: res.statusCode, text, json: text ? (JSON.parse(text) as { code: string; message: string }) : undefined };
}

const bearer = (v: string) => ({ authorization: `Bearer ${v}` });

describe('metrics relay', () => {
  it('routes /v1/cells/<cluster id>/metrics only', () => {
    expect(relayClusterId('/v1/cells/c_abc123/metrics')).toBe('c_abc123');
    expect(relayClusterId('/v1/cells/c_abc123/metrics/')).toBe('c_abc123');
    expect(relayClusterId('/v1/cells//metrics')).toBeUndefined();
    expect(relayClusterId('/v1/cells/a/b/metrics')).toBeUndefined();
    expect(relayClusterId('/v1/clusters')).toBeUndefined();
  });

  it('stores a snappy-compressed WriteRequest with the relay credential: 204, series and samples per cluster', async () => {
    const now = Date.now();
    const body = writeRequest([
      { labels: { __name__: 'rlmesh_agent_session_state', cluster: cluster.clusterId, state: 'connected' }, samples: [[0, now - 1000], [1, now]] },
      { labels: { __name__: 'up', cluster: cluster.clusterId, job: 'rlmesh-runtime' }, samples: [[1, now]] },
    ]);
    const r = await post(cluster.clusterId, body, bearer(cluster.relay));
    expect(r.status, r.text).toBe(204);
    const view = await relayView(cp, cluster.clusterId, { __name__: 'rlmesh_agent_session_state' });
    expect(view).toMatchObject({ requests: 1, samples: 3, series: 2 });
    expect(view.matching).toHaveLength(1);
    expect(view.matching[0]).toMatchObject({ lastValue: 1, lastTimestampMs: now, samples: 2, labels: { state: 'connected', cluster: cluster.clusterId } });
  });

  it('401 with {code, message} without a bearer, with an unknown one, or with another cluster’s; never echoes the credential', async () => {
    const body = writeRequest([{ labels: { __name__: 'up' }, samples: [[1, Date.now()]] }]);
    const before = (await relayView(cp, cluster.clusterId)).requests;

    const none = await post(cluster.clusterId, body, {});
    expect(none.status).toBe(401);
    expect(none.json?.code).toBe('unauthenticated');
    expect(none.json?.message).toContain('credentials_file');

    const wrong = 'rlm_rs_' + 'x'.repeat(40);
    const unknown = await post(cluster.clusterId, body, bearer(wrong));
    expect(unknown.status).toBe(401);
    expect(unknown.json?.code).toBe('credential_invalid');
    expect(unknown.json?.message).toContain('rlmesh-cluster-relay-secret');
    expect(unknown.text).not.toContain(wrong);

    const other = await joinWithRelay(cp);
    const cross = await post(cluster.clusterId, body, bearer(other.relay));
    expect(cross.status).toBe(401);
    expect(cross.json?.code).toBe('credential_wrong_cluster');
    expect(cross.text).not.toContain(other.relay);

    // the control credential is no relay credential
    const control = await api(cp, 'POST', '/v1/clusters', { name: 'x' }).then(async (c) => (await api(cp, 'POST', '/v1/clusters/join', { token: c.body.joinToken, facts: {} }, false)).body);
    const asControl = await post(String(control.clusterId), body, bearer(String(control.control)));
    expect(asControl.status).toBe(401);
    expect(asControl.json?.code).toBe('credential_invalid');
    expect((await relayView(cp, cluster.clusterId)).requests).toBe(before);
  });

  it('400 on a body that is not snappy, not a WriteRequest, or not declared snappy', async () => {
    const garbage = await post(cluster.clusterId, 'not snappy at all', bearer(cluster.relay));
    expect(garbage.status).toBe(400);
    expect(garbage.json?.code).toBe('malformed_body');
    const notProto = await post(cluster.clusterId, compress(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])), bearer(cluster.relay));
    expect(notProto.status).toBe(400);
    expect(notProto.json?.code).toBe('malformed_body');
    const plain = await post(cluster.clusterId, writeRequest([]), { ...bearer(cluster.relay), 'content-encoding': 'gzip' });
    expect(plain.status).toBe(400);
    expect(plain.json?.code).toBe('bad_encoding');
  });

  it('405 on GET', async () => {
    const res = await request(`${cp.url}/v1/cells/${cluster.clusterId}/metrics`, { dispatcher, headers: bearer(cluster.relay) });
    expect(res.statusCode).toBe(405);
    expect(((await res.body.json()) as { code: string }).code).toBe('method_not_allowed');
  });

  it('rotation: the new and the old credential both work for 24 h, then the old one is refused as expired', async () => {
    const c = await joinWithRelay(cp);
    const body = () => writeRequest([{ labels: { __name__: 'up', cluster: c.clusterId }, samples: [[1, Date.now()]] }]);
    const next = await rotateRelay(cp, c.clusterId);
    expect((await post(c.clusterId, body(), bearer(next))).status).toBe(204);
    expect((await post(c.clusterId, body(), bearer(c.relay))).status).toBe(204);
    cp.clock.advance(ROTATION_OVERLAP_MS - 60_000);
    expect((await post(c.clusterId, body(), bearer(c.relay))).status).toBe(204);
    cp.clock.advance(120_000);
    const old = await post(c.clusterId, body(), bearer(c.relay));
    expect(old.status).toBe(401);
    expect(old.json?.code).toBe('credential_expired');
    expect((await post(c.clusterId, body(), bearer(next))).status).toBe(204);
    expect((await relayView(cp, c.clusterId)).requests).toBe(4);
  });

  it('an archived cluster takes no metrics', async () => {
    const c = await joinWithRelay(cp);
    expect((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/archive`)).status).toBe(200);
    const r = await post(c.clusterId, writeRequest([]), bearer(c.relay));
    expect(r.status).toBe(401);
    expect(r.json?.code).toBe('cluster_archived');
  });
});
