// The reference control plane as a real HTTPS + gRPC server on 127.0.0.1,
// driven through its REST API and a Connect-ES gRPC client that trusts the
// generated CA. Time moves with a manual clock.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { joinedCluster, openSession, startTestControlPlane, type TestControlPlane, type TestSession } from '../test/support/control-plane.ts';
import { api } from '../test/support/api.ts';
import { until } from '../test/support/until.ts';
import pkg from '../package.json' with { type: 'json' };

const MIN = 60_000;
const HOUR = 60 * MIN;

let cps: TestControlPlane[] = [];
let sessions: TestSession[] = [];
async function start(overrides: Parameters<typeof startTestControlPlane>[0] = {}): Promise<TestControlPlane> {
  const cp = await startTestControlPlane(overrides);
  cps.push(cp);
  return cp;
}
/** A session whose Hello (sent first, as an agent's) carries `hello` and an agent version the control plane accepts. */
function session(cp: TestControlPlane, credential: string | null, hello: Parameters<typeof openSession>[2] = {}): TestSession {
  const s = openSession(cp, credential, hello === false ? false : { agentVersion: pkg.version, ...hello });
  sessions.push(s);
  return s;
}
afterEach(async () => {
  for (const s of sessions) s.close();
  for (const cp of cps) await cp.close().catch(() => {});
  for (const cp of cps) rmSync(cp.dir, { recursive: true, force: true });
  cps = [];
  sessions = [];
});

const cluster = async (cp: TestControlPlane, id: string) => (await api(cp, 'GET', `/v1/clusters/${id}`)).body;

describe('REST API', () => {
  it('/v1/info says where the gRPC session is', async () => {
    const cp = await start({ registryHost: '127.0.0.1:5000', outputHosts: ['outputs.example.test'] });
    const info = await api(cp, 'GET', '/v1/info', undefined, false);
    expect(info.status).toBe(200);
    expect(info.body).toMatchObject({ grpc: { host: '127.0.0.1', port: cp.port, tls: true }, registryHost: '127.0.0.1:5000', outputHosts: ['outputs.example.test'] });
    expect(info.body.versions).toMatchObject({ protocol: 'rlmesh.v1' });
  });

  it('Connect your cluster gives the install command with a single-use join token', async () => {
    const cp = await start({ chartVersion: '1.2.3' });
    const created = await api(cp, 'POST', '/v1/clusters', { name: 'lab' });
    expect(created.status).toBe(201);
    const token = String(created.body.joinToken);
    expect(token).toMatch(/^rlm_jt_[0-9A-Za-z]{32,}$/);
    expect(created.body.installCommand).toBe(
      `helm install rlmesh oci://registry.rlmesh.dev/rlmesh/charts/rlmesh-runtime --version 1.2.3 -n rlmesh-system --create-namespace --set joinToken=${token}`,
    );
    expect(created.body.installCommandPrompt).not.toContain(token);
    expect(created.body.installCommandPrompt).toMatch(/^sh -c '.*read -r t.*' rlmesh-install$/);
    const list = await api(cp, 'GET', '/v1/clusters');
    expect(list.body.clusters).toMatchObject([{ id: created.body.clusterId, name: 'lab', status: 'Pending', lastSeenAt: null }]);

    const joined = await api(cp, 'POST', '/v1/clusters/join', { token, facts: { kubernetesVersion: 'v1.35.4' } }, false);
    expect(joined.status).toBe(200);
    expect(joined.body.clusterId).toBe(created.body.clusterId);
    expect(joined.body.control).toMatch(/^rlm_cc_[0-9A-Za-z]{32,}$/);
    expect(joined.body.relay).toBeUndefined();
    const pull = JSON.parse(String(joined.body.pull)) as { auths: Record<string, { username: string; password: string; auth: string }> };
    const entry = pull.auths['registry.rlmesh.dev']!;
    expect(entry.username).toBe(created.body.clusterId);
    expect(entry.password).toMatch(/^rlm_rp_/);
    expect(Buffer.from(entry.auth, 'base64').toString()).toBe(`${entry.username}:${entry.password}`);
    expect((await api(cp, 'GET', '/v1/clusters')).body.clusters).toMatchObject([{ status: 'Disconnected' }]);
  });

  it('a join token is single use, valid one hour, and unknown tokens are refused, each with what to do', async () => {
    const cp = await start();
    const a = await api(cp, 'POST', '/v1/clusters', {});
    expect((await api(cp, 'POST', '/v1/clusters/join', { token: a.body.joinToken }, false)).status).toBe(200);
    const again = await api(cp, 'POST', '/v1/clusters/join', { token: a.body.joinToken }, false);
    expect(again).toMatchObject({ status: 409, body: { code: 'token_used' } });
    expect(again.body.message).toContain('a used or expired token needs a new install command');

    const b = await api(cp, 'POST', `/v1/clusters/${String(a.body.clusterId)}/install-command`);
    expect(b.body.installCommand).toMatch(/^helm upgrade --install rlmesh .* --reset-then-reuse-values --set joinToken=rlm_jt_/);
    cp.clock.advance(61 * MIN);
    const expired = await api(cp, 'POST', '/v1/clusters/join', { token: b.body.joinToken }, false);
    expect(expired).toMatchObject({ status: 401, body: { code: 'token_expired' } });
    expect(expired.body.message).toContain('valid for one hour');
    expect(expired.body.message).toContain('New install command');

    const unknown = await api(cp, 'POST', '/v1/clusters/join', { token: `rlm_jt_${'A'.repeat(40)}` }, false);
    expect(unknown).toMatchObject({ status: 401, body: { code: 'token_invalid' } });
    const malformed = await api(cp, 'POST', '/v1/clusters/join', { token: 'hello' }, false);
    expect(malformed).toMatchObject({ status: 401, body: { code: 'token_invalid' } });
    expect(malformed.body.message).toContain('rlm_jt_');
    expect(JSON.stringify([again, expired, unknown])).not.toContain(String(a.body.joinToken));
  });

  it('ten concurrent joins with one token: exactly one succeeds', async () => {
    const cp = await start();
    const a = await api(cp, 'POST', '/v1/clusters', {});
    const results = await Promise.all(Array.from({ length: 10 }, () => api(cp, 'POST', '/v1/clusters/join', { token: a.body.joinToken }, false)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409 && r.body.code === 'token_used')).toHaveLength(9);
  });

  it('a join with observability also claims the relay credential', async () => {
    const cp = await start();
    const c = await joinedCluster(cp, { observability: true });
    const rotated = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/credentials/relay/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.value).toMatch(/^rlm_rs_/);
    const plain = await joinedCluster(cp);
    const refused = await api(cp, 'POST', `/v1/clusters/${plain.clusterId}/credentials/relay/rotate`);
    expect(refused).toMatchObject({ status: 409, body: { code: 'no_credential' } });
  });

  it('the admin API refuses requests without the admin token', async () => {
    const cp = await start();
    const none = await api(cp, 'GET', '/v1/clusters', undefined, false);
    expect(none).toMatchObject({ status: 401, body: { code: 'unauthenticated' } });
    const wrong = await api({ ...cp, adminToken: 'rlm_admin_wrong' }, 'GET', '/v1/clusters');
    expect(wrong).toMatchObject({ status: 401, body: { code: 'unauthenticated' } });
  });
});

describe('ClusterSession', () => {
  it('authenticates, welcomes, pings, and keeps lastSeenAt and status current', async () => {
    const cp = await start({ pingIntervalMs: 100 });
    const c = await joinedCluster(cp);
    const s = session(cp, c.control);
    const welcome = await s.waitFor('welcome');
    expect(welcome.sessionId).not.toBe('');
    expect(s.received[0]?.msg.case).toBe('welcome');
    s.send({ case: 'hello', value: { clusterId: c.clusterId, agentVersion: '0.1.0', kubernetesVersion: 'v1.35.4' } });
    await s.waitFor('ping');
    await expect.poll(async () => (await cluster(cp, c.clusterId)).agentVersion).toBe('0.1.0');
    const first = await cluster(cp, c.clusterId);
    expect(first.status).toBe('Connected');
    const seen1 = Date.parse(String(first.lastSeenAt));

    cp.clock.advance(20_000);
    s.send({ case: 'heartbeat', value: {} });
    await expect.poll(async () => Date.parse(String((await cluster(cp, c.clusterId)).lastSeenAt))).toBeGreaterThanOrEqual(seen1 + 20_000);

    s.close();
    expect(await s.ended).toBeNull();
    await expect.poll(async () => (await cluster(cp, c.clusterId)).status).toBe('Disconnected');
  });

  it('refuses a missing or unknown control credential, naming the cause', async () => {
    const cp = await start();
    const missing = await session(cp, null).ended;
    expect(missing?.code).toBe(Code.Unauthenticated);
    expect(missing?.rawMessage).toContain('authorization: Bearer');
    const unknown = await session(cp, `rlm_cc_${'x'.repeat(40)}`).ended;
    expect(unknown?.code).toBe(Code.Unauthenticated);
    expect(unknown?.rawMessage).toContain('control credential unknown');
    expect(unknown?.rawMessage).toContain('New install command');
  });

  it('applies evaluation updates once by id, acks every delivery, and counts duplicates', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const ev = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'busybox:1.36', command: ['true'], deadlineSeconds: 60 });
    expect(ev.status).toBe(201);
    const evaluationId = String(ev.body.id);
    const s = session(cp, c.control, { clusterId: c.clusterId });
    const assignment = await s.waitFor('assignment');
    expect(assignment).toMatchObject({ evaluationId, image: 'busybox:1.36', command: ['true'] });

    const update = (id: string, phase: string, sequence: number, exitCode?: number) => ({
      case: 'evaluationUpdate' as const,
      value: { id, evaluationId, phase, sequence: BigInt(sequence), ...(exitCode !== undefined ? { exitCode, hasExitCode: true } : {}) },
    });
    s.send(update('u-1', 'Pending', 1));
    s.send(update('u-2', 'Running', 2));
    s.send(update('u-2', 'Running', 2)); // redelivered
    s.send(update('u-1', 'Pending', 1)); // redelivered
    s.send(update('u-3', 'Succeeded', 3, 0));
    await expect.poll(() => s.received.filter((m) => m.msg.case === 'ack').flatMap((m) => (m.msg.case === 'ack' ? m.msg.value.ids : []))).toEqual(['u-1', 'u-2', 'u-2', 'u-1', 'u-3']);

    const after = await api(cp, 'GET', `/v1/evaluations/${evaluationId}`);
    expect(after.body).toMatchObject({ phase: 'Succeeded', result: { phase: 'Succeeded', exitCode: 0 } });
    expect((after.body.updates as { id: string; duplicates: number }[]).map((u) => [u.id, u.duplicates])).toEqual([['u-1', 1], ['u-2', 1], ['u-3', 0]]);
    expect((await cluster(cp, c.clusterId)).updates).toEqual({ distinct: 3, duplicatesReceived: 2 });

    // after a reconnect, Hello's pending ids that are already stored are acked at once
    s.close();
    await s.ended;
    const s2 = session(cp, c.control, { clusterId: c.clusterId, pendingUpdateIds: ['u-3', 'u-9'] });
    expect((await s2.waitFor('ack')).ids).toEqual(['u-3']);
    // the evaluation was acknowledged by its updates, so it is not assigned again
    await s2.waitFor('ping');
    expect(s2.received.some((m) => m.msg.case === 'assignment')).toBe(false);
  });

  it('an update naming another cluster\'s evaluation is refused: not stored, not acked, the evaluation untouched', async () => {
    const cp = await start();
    const a = await joinedCluster(cp);
    const b = await joinedCluster(cp);
    const ev = await api(cp, 'POST', `/v1/clusters/${a.clusterId}/evaluations`, { image: 'busybox:1.36', command: ['true'] });
    const evaluationId = String(ev.body.id);
    const sa = session(cp, a.control, { clusterId: a.clusterId });
    await sa.waitFor('assignment');
    sa.send({ case: 'evaluationUpdate', value: { id: 'u-1', evaluationId, phase: 'Running', sequence: 1n } });
    await sa.waitFor('ack');

    // B's Hello offering A's update id is not acked: B never stored u-1
    const sb = session(cp, b.control, { clusterId: b.clusterId, pendingUpdateIds: ['u-1'] });
    sb.send({ case: 'evaluationUpdate', value: { id: 'u-2', evaluationId, phase: 'Failed', sequence: 9n, exitCode: 1, hasExitCode: true } });
    sb.send({ case: 'evaluationUpdate', value: { id: 'u-1', evaluationId: 'ev-b-local', phase: 'Running', sequence: 1n } });
    expect((await sb.waitFor('ack')).ids).toEqual(['u-1']); // the update for B's own evaluation, not u-2
    await sb.waitFor('ping');
    expect(sb.received.flatMap((m) => (m.msg.case === 'ack' ? m.msg.value.ids : []))).toEqual(['u-1']);

    const after = await api(cp, 'GET', `/v1/evaluations/${evaluationId}`);
    expect(after.body).toMatchObject({ clusterId: a.clusterId, phase: 'Running', result: null });
    expect((after.body.updates as { id: string; clusterId: string }[]).map((u) => [u.id, u.clusterId])).toEqual([['u-1', a.clusterId]]);
    expect((await cluster(cp, b.clusterId)).updates).toEqual({ distinct: 1, duplicatesReceived: 0 });
  });

  it('an S3 secret key of an evaluation submitted while the cluster is away: not in the database files, delivered in the assignment', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const secretAccessKey = `s3-secret-${'z'.repeat(32)}`;
    const ev = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, {
      image: 'x:1',
      artifacts: [{ name: 'w', sha256: 'a'.repeat(64), sizeBytes: 1, source: { s3: { bucket: 'b', key: 'k', accessKeyId: 'AKIA', secretAccessKey } } }],
    });
    expect(ev.status).toBe(201);
    expect(JSON.stringify(ev.body)).not.toContain(secretAccessKey);
    const dbFiles = () => readdirSync(cp.dir).filter((f) => f.startsWith('controlplane.db')).map((f) => readFileSync(join(cp.dir, f)).toString('latin1')).join('');
    expect(dbFiles()).not.toContain(secretAccessKey);
    const s = session(cp, c.control, { clusterId: c.clusterId });
    const assignment = await s.waitFor('assignment');
    const src = assignment.artifacts[0]?.source?.source;
    expect(src?.case === 's3' ? src.value.secretAccessKey : undefined).toBe(secretAccessKey);
    expect(dbFiles()).not.toContain(secretAccessKey);
  });

  it('stores a burst of 1,000 updates, each acked once', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const s = session(cp, c.control);
    await s.waitFor('welcome');
    const started = performance.now();
    for (let i = 0; i < 1000; i++) s.send({ case: 'evaluationUpdate', value: { id: `b-${i}`, evaluationId: `ev-burst-${i % 10}`, phase: 'Running', sequence: BigInt(i) } });
    await s.waitFor('ack', (a) => a.ids.includes('b-999'), 15_000);
    const ms = performance.now() - started;
    const acked = s.received.flatMap((m) => (m.msg.case === 'ack' ? m.msg.value.ids : []));
    expect(new Set(acked).size).toBe(1000);
    expect((await cluster(cp, c.clusterId)).updates).toEqual({ distinct: 1000, duplicatesReceived: 0 });
    console.log(`1,000 evaluation updates stored and acked in ${ms.toFixed(0)} ms`);
  });

  it('re-sends unacknowledged assignments on reconnect, pushes new ones live, and delivers cancellations', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const s = session(cp, c.control);
    await s.waitFor('welcome');
    const ev = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'trainer:1', gpuCount: 8, gpuVendor: 'nvidia', env: { A: 'b' } });
    const evaluationId = String(ev.body.id);
    expect(evaluationId).toMatch(/^ev-[0-9a-z]+$/);
    expect(await s.waitFor('assignment')).toMatchObject({ evaluationId, gpuCount: 8, env: { A: 'b' } });
    s.close();
    await s.ended;

    const s2 = session(cp, c.control);
    expect((await s2.waitFor('assignment')).evaluationId).toBe(evaluationId);
    s2.send({ case: 'evaluationUpdate', value: { id: 'x-1', evaluationId, phase: 'Running', sequence: 1n } });
    await s2.waitFor('ack');
    const cancelled = await api(cp, 'POST', `/v1/evaluations/${evaluationId}/cancel`, { reason: 'user asked' });
    expect(cancelled.status).toBe(200);
    expect(await s2.waitFor('cancellation')).toMatchObject({ evaluationId, reason: 'user asked' });
    s2.close();
    await s2.ended;

    // until the cluster reports a terminal phase, the cancellation is sent again on reconnect
    const s3 = session(cp, c.control);
    await s3.waitFor('cancellation');
    s3.send({ case: 'evaluationUpdate', value: { id: 'x-2', evaluationId, phase: 'Cancelled', sequence: 2n } });
    await s3.waitFor('ack', (a) => a.ids.includes('x-2'));
    expect((await api(cp, 'GET', `/v1/evaluations/${evaluationId}`)).body).toMatchObject({ phase: 'Cancelled', result: { phase: 'Cancelled' } });

    // an evaluation cancelled before it reached the cluster ends at once
    s3.close();
    await s3.ended;
    const never = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:1' });
    const nc = await api(cp, 'POST', `/v1/evaluations/${String(never.body.id)}/cancel`);
    expect(nc.body).toMatchObject({ phase: 'Cancelled', result: { reason: 'CancelledBeforeDelivery' } });
  });

  it('output hosts: /v1/info and every session after Welcome name them; PUT /v1/output-hosts changes both and tells the live session at once', async () => {
    const cp = await start({ outputHosts: ['outputs.example.test'] });
    const c = await joinedCluster(cp);
    const s = session(cp, c.control);
    expect(await s.waitFor('outputHosts')).toMatchObject({ hosts: ['outputs.example.test'] });
    const put = await api(cp, 'PUT', '/v1/output-hosts', { hosts: ['outputs.example.test', 'checkpoints.example.test'] });
    expect(put.body).toEqual({ outputHosts: ['outputs.example.test', 'checkpoints.example.test'], sessions: 1 });
    expect(await s.waitFor('outputHosts', (m) => m.hosts.length === 2)).toMatchObject({ hosts: ['outputs.example.test', 'checkpoints.example.test'] });
    expect((await api(cp, 'GET', '/v1/info', undefined, false)).body).toMatchObject({ outputHosts: ['outputs.example.test', 'checkpoints.example.test'] });
    const s2 = session(cp, c.control);
    expect(await s2.waitFor('outputHosts')).toMatchObject({ hosts: ['outputs.example.test', 'checkpoints.example.test'] });
    expect((await api(cp, 'PUT', '/v1/output-hosts', { hosts: 'outputs.example.test' })).body).toMatchObject({ code: 'invalid_request' });
    expect((await api(cp, 'PUT', '/v1/output-hosts', { hosts: [] }, false)).status).toBe(401);
  });

  it('drain: no new assignments (a submission is refused, one that waited is held), the session is told, GET /v1/clusters counts what still runs; resume sends what waited', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    // submitted while the cluster is away: never delivered
    const waited = String((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:1' })).body.id);
    const s = session(cp, c.control);
    expect(await s.waitFor('clusterState')).toMatchObject({ draining: false });
    expect((await s.waitFor('assignment')).evaluationId).toBe(waited);
    const running = String((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:2' })).body.id);
    await s.waitFor('assignment', (a) => a.evaluationId === running);
    s.send({ case: 'evaluationUpdate', value: { id: 'u-1', evaluationId: running, phase: 'Running', sequence: 1n } });
    s.send({ case: 'evaluationUpdate', value: { id: 'u-2', evaluationId: waited, phase: 'Succeeded', sequence: 1n } });
    await s.waitFor('ack', (a) => a.ids.includes('u-2'));

    const drained = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/drain`);
    expect(drained.body).toMatchObject({ draining: true, unfinishedEvaluations: 1 });
    expect(await s.waitFor('clusterState', (m) => m.draining)).toMatchObject({ draining: true });
    const refused = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:3' });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'cluster_draining' });
    expect(String(refused.body.message)).toMatch(/is draining \(since .*\) and takes no new evaluations; submit to another cluster, or end the drain with POST \/v1\/clusters\/c_[0-9a-z]+\/resume/);

    s.send({ case: 'evaluationUpdate', value: { id: 'u-3', evaluationId: running, phase: 'Succeeded', sequence: 2n } });
    await s.waitFor('ack', (a) => a.ids.includes('u-3'));
    const list = await api(cp, 'GET', '/v1/clusters');
    expect(list.body.clusters).toMatchObject([{ id: c.clusterId, draining: true, unfinishedEvaluations: 0 }]);

    // a drain survives a reconnect, and resume ends it
    s.close();
    await s.ended;
    const s2 = session(cp, c.control);
    expect(await s2.waitFor('clusterState')).toMatchObject({ draining: true });
    expect((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/resume`)).body).toMatchObject({ draining: false });
    expect(await s2.waitFor('clusterState', (m) => !m.draining)).toMatchObject({ draining: false });
    expect((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:4' })).status).toBe(201);
  });

  it("the operator's drain, as the agent reports it: shown, outlives the session, submissions refused naming rlmesh drain --undo, taken again once the agent says it ended", async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const s = session(cp, c.control);
    await s.waitFor('clusterState');
    const since = new Date('2026-12-01T08:00:00Z');
    s.send({ case: 'operatorDrain', value: { draining: true, since: { seconds: BigInt(since.getTime() / 1000), nanos: 0 } } });
    const shown = await until('the drain shown', async () => {
      const row = (await cluster(cp, c.clusterId)) as { operatorDraining?: boolean; operatorDrainingSince?: string };
      return row.operatorDraining ? row : undefined;
    });
    expect(shown).toMatchObject({ operatorDraining: true, operatorDrainingSince: since.toISOString(), draining: false });
    const refused = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:1' });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'cluster_drained_by_operator' });
    expect(String(refused.body.message)).toMatch(/drained by its operator on the cluster's side \(rlmesh drain, since 2026-12-01T08:00:00\.000Z\) and refuses new evaluations; submit to another cluster, or ask the cluster's operator to run rlmesh drain --undo/);
    expect((await api(cp, 'GET', '/v1/clusters')).body.clusters).toMatchObject([{ id: c.clusterId, operatorDraining: true }]);

    // it outlives the session (only the agent ends it), and ends when the agent says so
    s.close();
    await s.ended;
    const s2 = session(cp, c.control);
    await s2.waitFor('clusterState');
    expect(await cluster(cp, c.clusterId)).toMatchObject({ operatorDraining: true });
    s2.send({ case: 'operatorDrain', value: { draining: false } });
    await until('the drain ended', async () => (((await cluster(cp, c.clusterId)) as { operatorDraining?: boolean }).operatorDraining === false ? true : undefined));
    const taken = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:2' });
    expect(taken.status).toBe(201);
    expect((await s2.waitFor('assignment')).evaluationId).toBe(String(taken.body.id));
  });

  it('--test-ignore-drain: a new evaluation for a draining cluster is stored and sent anyway (what a buggy or hostile platform does)', async () => {
    const cp = await start({ ignoreDrain: true });
    const c = await joinedCluster(cp);
    const s = session(cp, c.control);
    await s.waitFor('clusterState');
    await api(cp, 'POST', `/v1/clusters/${c.clusterId}/drain`);
    await s.waitFor('clusterState', (m) => m.draining);
    const sent = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:1' });
    expect(sent.status).toBe(201);
    expect((await s.waitFor('assignment')).evaluationId).toBe(String(sent.body.id));
    // without the flag the same submission is refused (the test above)
    const plain = await start();
    const c2 = await joinedCluster(plain);
    await api(plain, 'POST', `/v1/clusters/${c2.clusterId}/drain`);
    expect((await api(plain, 'POST', `/v1/clusters/${c2.clusterId}/evaluations`, { image: 'x:1' })).status).toBe(409);
  });

  it('rotation: sent again on the live session until the agent confirms it, then no more', async () => {
    const cp = await start({ rotationResendMs: 300 });
    const c = await joinedCluster(cp);
    const s = session(cp, c.control);
    await s.waitFor('welcome');
    const rotated = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/credentials/control/rotate`);
    const first = await s.waitFor('credentialRotation');
    // not confirmed (the agent could not store it): the same value comes again on the same session
    const again = await s.waitFor('credentialRotation', (m) => m !== first);
    expect(again.value).toBe(rotated.body.value);
    s.send({ case: 'credentialRotated', value: { purpose: 'control' } });
    await new Promise((r) => setTimeout(r, 1500));
    const rotations = () => s.received.filter((m) => m.msg.case === 'credentialRotation').length;
    const after = rotations();
    await new Promise((r) => setTimeout(r, 1500));
    expect(rotations()).toBe(after);
  });

  it('rotation: pushed over the live session; the old credential works for 24 hours and is refused after', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const s = session(cp, c.control);
    await s.waitFor('welcome');
    const rotated = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/credentials/control/rotate`);
    expect(rotated.body).toMatchObject({ purpose: 'control', deliveredToSession: true });
    const pushed = await s.waitFor('credentialRotation');
    expect(pushed.purpose).toBe('control');
    expect(pushed.value).toBe(rotated.body.value);
    expect(timestampDate(pushed.oldValidUntil!).toISOString()).toBe(rotated.body.oldValidUntil);

    // one session per cluster: a newer one replaces the older
    cp.clock.advance(24 * HOUR - MIN);
    const old = session(cp, c.control);
    await old.waitFor('welcome');
    expect((await s.ended)?.code).toBe(Code.Aborted);

    cp.clock.advance(2 * MIN);
    const refused = await session(cp, c.control).ended;
    expect(refused?.code).toBe(Code.Unauthenticated);
    expect(refused?.rawMessage).toContain('control credential expired');
    expect(refused?.rawMessage).toContain('24-hour overlap');
    // a session opened with the old credential is closed at its next ping
    const ended = await old.ended;
    expect(ended?.code).toBe(Code.Unauthenticated);
    expect(ended?.rawMessage).toContain('control credential expired');

    const fresh = session(cp, String(rotated.body.value));
    await fresh.waitFor('welcome');
  });

  it('a rotation the agent has not confirmed is re-sent on connect until CredentialRotated', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const rotated = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/credentials/pull/rotate`);
    expect(rotated.body.deliveredToSession).toBe(false);
    expect(JSON.parse(String(rotated.body.value))).toHaveProperty(['auths', 'registry.rlmesh.dev', 'username'], c.clusterId);
    const s = session(cp, c.control);
    expect((await s.waitFor('credentialRotation')).value).toBe(rotated.body.value);
    s.send({ case: 'credentialRotated', value: { purpose: 'pull' } });
    s.send({ case: 'heartbeat', value: {} });
    await expect.poll(async () => (await cluster(cp, c.clusterId)).status).toBe('Connected');
    s.close();
    await s.ended;
    const s2 = session(cp, c.control);
    await s2.waitFor('ping');
    expect(s2.received.some((m) => m.msg.case === 'credentialRotation')).toBe(false);
  });

  it('a session opened with a superseded control credential gets no rotation; the old one keeps opening sessions until the overlap ends, then is refused', async () => {
    const cp = await start({ rotationResendMs: 200, pingIntervalMs: 100 });
    const c = await joinedCluster(cp);
    const control = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/credentials/control/rotate`);
    const pull = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/credentials/pull/rotate`);
    expect(pull.body.deliveredToSession).toBe(false);

    // the overlap: the old value still opens a session, but neither the undelivered rotations nor a new one reach it
    const old = session(cp, c.control);
    await old.waitFor('welcome');
    const again = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/credentials/control/rotate`);
    expect(again.body.deliveredToSession).toBe(false);
    old.send({ case: 'credentialRotated', value: { purpose: 'pull' } }); // ignored: nothing was sent to confirm
    await new Promise((r) => setTimeout(r, 600));
    expect(old.received.some((m) => m.msg.case === 'credentialRotation')).toBe(false);

    // the session on the current value gets them (the pull rotation still unconfirmed)
    const current = session(cp, String(again.body.value));
    const got = await current.waitFor('credentialRotation');
    expect(got).toMatchObject({ purpose: 'pull', value: pull.body.value });
    expect((await old.ended)?.code).toBe(Code.Aborted); // replaced by the newer session

    // the new value used, the old ones still open sessions inside the overlap (a GitOps sync may restore one); they
    // used to be revoked at once, which took such a cluster offline
    current.close();
    await current.ended;
    for (const value of [c.control, String(control.body.value)]) {
      const within = session(cp, value);
      await within.waitFor('welcome');
      within.close();
      await within.ended;
    }
    // after the overlap they are refused, saying why and what to do
    cp.clock.advance(24 * HOUR + MIN);
    for (const value of [c.control, String(control.body.value)]) {
      const refused = await session(cp, value).ended;
      expect(refused?.code).toBe(Code.Unauthenticated);
      expect(refused?.metadata.get('rlmesh-auth-cause')).toBe('expired');
      expect(refused?.rawMessage).toMatch(/^control credential expired: it was replaced by a rotation at \S+ and its 24-hour overlap ended at \S+, so the control plane refuses it now; write the value the rotation issued/);
    }
  });

  it('a session opened with a superseded control credential gets no assignment that carries S3 keys or secret environment values: held back with a log line, sent once the current value is used', async () => {
    const lines: string[] = [];
    const cp = await start({ pingIntervalMs: 100, log: pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }) });
    const c = await joinedCluster(cp);
    const rotated = String((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/credentials/control/rotate`)).body.value);
    const secretAccessKey = `s3-secret-${'y'.repeat(32)}`;
    const s3 = (key: string) => ({ image: 'x:1', artifacts: [{ name: 'w', sha256: 'a'.repeat(64), sizeBytes: 1, source: { s3: { bucket: 'b', key, accessKeyId: 'AKIA', secretAccessKey } } }] });
    const withKeys = String((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, s3('backlog'))).body.id);
    const plain = String((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:1', env: { A: 'b' } })).body.id);
    const withEnv = String((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:1', secretEnv: { API_KEY: secretAccessKey } })).body.id);

    // within the overlap the old value opens a session: the assignment without secrets arrives, the one with S3 keys does not
    const old = session(cp, c.control);
    expect((await old.waitFor('assignment')).evaluationId).toBe(plain);
    const live = String((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, s3('live'))).body.id);
    for (let i = 0; i < 3; i++) await old.waitFor('ping', () => old.received.filter((m) => m.msg.case === 'ping').length > i);
    expect(old.received.flatMap((m) => (m.msg.case === 'assignment' ? [m.msg.value.evaluationId] : []))).toEqual([plain]);
    const held = lines.filter((l) => l.includes('held back')).map((l) => JSON.parse(l) as { evaluationId: string; msg: string });
    expect(held.map((l) => l.evaluationId).sort()).toEqual([withKeys, withEnv, live].sort());
    expect(held[0]!.msg).toMatch(/carries secrets .* superseded control credential; it is sent when the agent connects with the current control value/);
    expect(lines.join('')).not.toContain(secretAccessKey);
    expect((await api(cp, 'GET', `/v1/evaluations/${withKeys}`)).body).toMatchObject({ firstAssignedAt: null, assignmentDeliveries: 0 });

    // the session on the current value gets both, S3 keys and all
    const current = session(cp, rotated);
    for (const id of [withKeys, live]) {
      const a = await current.waitFor('assignment', (x) => x.evaluationId === id);
      const src = a.artifacts[0]?.source?.source;
      expect(src?.case === 's3' ? src.value.secretAccessKey : undefined).toBe(secretAccessKey);
    }
    expect((await current.waitFor('assignment', (x) => x.evaluationId === withEnv)).secretEnv).toEqual({ API_KEY: secretAccessKey });
  });

  it('a rejoin: the old control credential works until the agent connects with the new one, then it is refused', async () => {
    const cp = await start({ pingIntervalMs: 100 });
    const c = await joinedCluster(cp);
    const oldSession = session(cp, c.control);
    await oldSession.waitFor('welcome');
    const token = (await api(cp, 'POST', `/v1/clusters/${c.clusterId}/install-command`)).body.joinToken;
    const rejoined = await api(cp, 'POST', '/v1/clusters/join', { token }, false);
    expect(rejoined.status).toBe(200);
    await oldSession.waitFor('ping'); // still valid: the new credentials are not confirmed yet

    const s = session(cp, String(rejoined.body.control));
    await s.waitFor('welcome');
    expect((await oldSession.ended)?.code).toBe(Code.Aborted); // one session per cluster: the newer one replaced it
    const refused = await session(cp, c.control).ended;
    expect(refused?.code).toBe(Code.Unauthenticated);
    expect(refused?.metadata.get('rlmesh-auth-cause')).toBe('revoked');
    expect(refused?.rawMessage).toMatch(/control credential revoked at .*: cluster c_[0-9a-z]+ joined again with a new install command and its agent confirmed the new credentials/);
    await s.waitFor('ping');
  });

  it('archive revokes everything and closes the live session', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const spare = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/install-command`);
    const s = session(cp, c.control);
    await s.waitFor('welcome');
    const archived = await api(cp, 'POST', `/v1/clusters/${c.clusterId}/archive`);
    expect(archived.body).toMatchObject({ status: 'Archived' });
    const ended = await s.ended;
    expect(ended?.code).toBe(Code.Unauthenticated);
    expect(ended?.rawMessage).toContain('archived');
    const again = await session(cp, c.control).ended;
    expect(again?.rawMessage).toContain('revoked');
    const join = await api(cp, 'POST', '/v1/clusters/join', { token: spare.body.joinToken }, false);
    expect(join).toMatchObject({ status: 401, body: { code: 'token_invalid', cause: 'revoked' } });
    expect((await api(cp, 'GET', '/v1/clusters')).body.clusters).toMatchObject([{ id: c.clusterId, status: 'Archived' }]);
    expect((await api(cp, 'POST', `/v1/clusters/${c.clusterId}/install-command`)).body.code).toBe('cluster_archived');
  });

  it('an agent that goes silent is disconnected after the silence timeout', async () => {
    const cp = await start({ silenceTimeoutMs: 600 });
    const c = await joinedCluster(cp);
    const s = session(cp, c.control, { clusterId: c.clusterId });
    await expect.poll(async () => (await cluster(cp, c.clusterId)).agentVersion).toBe(pkg.version);
    const seen = (await cluster(cp, c.clusterId)).lastSeenAt;
    cp.clock.advance(10 * MIN);
    const ended = await s.ended;
    expect(ended?.code).toBe(Code.DeadlineExceeded);
    expect(ended?.rawMessage).toContain('no message from the agent');
    // the end of a silent session is not a sign of life
    expect(await cluster(cp, c.clusterId)).toMatchObject({ status: 'Disconnected', lastSeenAt: seen });
  });

  it('an agent outside the version skew policy is refused in one line before anything is sent to it', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    await api(cp, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'busybox:1.36', command: ['true'] });
    const [major, minor] = pkg.version.split('.').map(Number) as [number, number];
    for (const agentVersion of [`${major}.${minor + 1}.0`, `${major + 1}.0.0`, 'dev', '']) {
      const s = session(cp, c.control, { clusterId: c.clusterId, agentVersion });
      const ended = await s.ended;
      expect(ended?.code, agentVersion).toBe(Code.FailedPrecondition);
      expect(ended?.metadata.get('rlmesh-version-skew')).toBe('unsupported');
      expect(ended?.metadata.get('rlmesh-control-plane-version')).toBe(pkg.version);
      expect(ended?.rawMessage).toMatch(/refused: .*this control plane runs .* and accepts agents .*; (install|upgrade) /);
      expect(ended?.rawMessage).not.toContain('\n');
      expect(s.received, 'no Welcome, no assignment').toEqual([]);
    }
    // the refused version is still recorded: the platform shows which agent tried
    expect(await cluster(cp, c.clusterId)).toMatchObject({ status: 'Disconnected', agentVersion: '' });
    const ok = session(cp, c.control, { clusterId: c.clusterId, agentVersion: `${major}.${minor}.99-rc.1` });
    const welcome = await ok.waitFor('welcome');
    expect(welcome).toMatchObject({ controlPlaneVersion: pkg.version, versionNotice: '' });
    await ok.waitFor('assignment');
  });

  it('a session whose first message is not Hello is refused, naming what to do', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const s = session(cp, c.control, false);
    s.send({ case: 'heartbeat', value: {} });
    const ended = await s.ended;
    expect(ended?.code).toBe(Code.InvalidArgument);
    expect(ended?.rawMessage).toMatch(/first message was heartbeat, not Hello.*run a released agent/);
  });

  it('a hello naming another cluster is refused', async () => {
    const cp = await start();
    const c = await joinedCluster(cp);
    const s = session(cp, c.control, { clusterId: 'c_someoneelse' });
    const ended = await s.ended;
    expect(ended?.code).toBe(Code.PermissionDenied);
    expect(ended?.rawMessage).toContain('cluster-id');
  });
});

describe('persistence', () => {
  it('state survives a restart on the same SQLite file', async () => {
    const first = await start();
    const c = await joinedCluster(first);
    const ev = await api(first, 'POST', `/v1/clusters/${c.clusterId}/evaluations`, { image: 'x:1' });
    const s = session(first, c.control);
    s.send({ case: 'evaluationUpdate', value: { id: 'p-1', evaluationId: String(ev.body.id), phase: 'Running', sequence: 1n } });
    await s.waitFor('ack');
    const before = await cluster(first, c.clusterId);
    await first.close();
    expect((await s.ended)?.code).toBe(Code.Unavailable);
    cps = cps.filter((x) => x !== first);

    const second = await start({ dir: first.dir, clock: first.clock });
    const after = await cluster(second, c.clusterId);
    expect(after).toMatchObject({ id: c.clusterId, status: 'Disconnected', lastSeenAt: before.lastSeenAt, updates: { distinct: 1, duplicatesReceived: 0 } });
    expect((await api(second, 'POST', '/v1/clusters/join', { token: c.joinToken }, false)).body.code).toBe('token_used');
    expect((await api(second, 'GET', `/v1/evaluations/${String(ev.body.id)}`)).body).toMatchObject({ phase: 'Running' });
    const s2 = session(second, c.control);
    s2.send({ case: 'evaluationUpdate', value: { id: 'p-1', evaluationId: String(ev.body.id), phase: 'Running', sequence: 1n } });
    await s2.waitFor('ack');
    expect((await cluster(second, c.clusterId)).updates).toEqual({ distinct: 1, duplicatesReceived: 1 });
    expect((await cluster(second, c.clusterId)).status).toBe('Connected');
  });
});
