// The metrics relay wired into the real control plane: Prometheus remote
// write 1.0 (snappy + protobuf) authenticated with the cluster's relay
// credential, including its rotation overlap.
import { rmSync } from 'node:fs';
import { create, toBinary } from '@bufbuild/protobuf';
import { compress } from 'snappyjs';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { WriteRequestSchema } from '../lib/gen/prometheus/remote_pb.ts';
import { startTestControlPlane, type TestControlPlane } from '../test/support/control-plane.ts';
import { api } from '../test/support/api.ts';

let cp: TestControlPlane;
beforeAll(async () => {
  cp = await startTestControlPlane();
});
afterAll(async () => {
  await cp.close();
  rmSync(cp.dir, { recursive: true, force: true });
});

async function remoteWrite(clusterId: string, bearer: string, value: number) {
  const body = toBinary(
    WriteRequestSchema,
    create(WriteRequestSchema, {
      timeseries: [{ labels: [{ name: '__name__', value: 'up' }, { name: 'job', value: 'rlmesh-agent' }], samples: [{ value, timestamp: BigInt(Date.now()) }] }],
    }),
  );
  const dispatcher = new Agent({ connect: { ca: cp.ca } });
  try {
    const res = await request(`${cp.url}/v1/cells/${clusterId}/metrics`, {
      method: 'POST',
      dispatcher,
      headers: { authorization: `Bearer ${bearer}`, 'content-encoding': 'snappy', 'content-type': 'application/x-protobuf', 'x-prometheus-remote-write-version': '0.1.0' },
      body: Buffer.from(compress(body)),
    });
    const text = await res.body.text();
    return { status: res.statusCode, body: text ? (JSON.parse(text) as { code: string; message: string }) : undefined };
  } finally {
    await dispatcher.close();
  }
}

it('accepts remote write with the relay credential, across its rotation overlap, and shows what arrived', async () => {
  const created = await api(cp, 'POST', '/v1/clusters', { name: 'observed' });
  const joined = await api(cp, 'POST', '/v1/clusters/join', { token: created.body.joinToken, facts: { observability: true } }, false);
  const clusterId = String(joined.body.clusterId);
  const relay = String(joined.body.relay);

  expect(await remoteWrite(clusterId, relay, 1)).toEqual({ status: 204, body: undefined });
  const seen = await api(cp, 'GET', `/v1/clusters/${clusterId}/metrics?__name__=up`);
  expect(seen.body).toMatchObject({ requests: 1, samples: 1, series: 1, matching: [{ labels: { job: 'rlmesh-agent' }, lastValue: 1 }] });

  const wrong = await remoteWrite(clusterId, String(joined.body.control), 2);
  expect(wrong).toMatchObject({ status: 401, body: { code: 'credential_invalid' } });

  const rotated = await api(cp, 'POST', `/v1/clusters/${clusterId}/credentials/relay/rotate`);
  expect((await remoteWrite(clusterId, relay, 3)).status).toBe(204);
  expect((await remoteWrite(clusterId, String(rotated.body.value), 4)).status).toBe(204);
  cp.clock.advance(24 * 60 * 60_000 + 60_000);
  expect(await remoteWrite(clusterId, relay, 5)).toMatchObject({ status: 401, body: { code: 'credential_expired' } });
  expect((await remoteWrite(clusterId, String(rotated.body.value), 6)).status).toBe(204);
  expect((await api(cp, 'GET', `/v1/clusters/${clusterId}/metrics`)).body).toMatchObject({ requests: 4, samples: 4, matching: [{ lastValue: 6 }] });
});
