// GitOps on the real local cluster: the CLI claims a join token from the
// reference control plane (a child process, as in production a remote
// service), its YAML is applied with kubectl, and the Secrets the apiserver
// stores are the ones the agent accepts and the control plane authenticates,
// also after a control plane restart.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseControlSecret, parsePullSecret } from '../../agent/credentials.ts';
import { openSession } from '../support/control-plane.ts';
import { kubectl } from '../support/cluster.ts';
import { api, startControlPlane, type ControlPlane } from '../support/runtime.ts';
import { tempDir } from '../support/temp.ts';
import pkg from '../../package.json' with { type: 'json' };

const ROOT = join(import.meta.dirname, '../..');
const suffix = Math.random().toString(36).slice(2, 8);
const ns = `rlmesh-cpt-${suffix}`;
const runsNs = `rlmesh-cpt-runs-${suffix}`;
let cp: ControlPlane;
let dir: string;

beforeAll(async () => {
  dir = tempDir('rlmesh-gitops-');
  cp = await startControlPlane({ dataDir: join(dir, 'cp') });
  for (const n of [ns, runsNs]) kubectl(['create', 'namespace', n]);
});
afterAll(async () => {
  await cp?.stop();
  kubectl(['delete', 'namespace', ns, runsNs, '--wait=false', '--ignore-not-found'], { allowFail: true });
  rmSync(dir, { recursive: true, force: true });
});

const getSecret = (namespace: string, name: string): k8s.V1Secret => JSON.parse(kubectl(['-n', namespace, 'get', 'secret', name, '-o', 'json']).stdout) as k8s.V1Secret;

it('rlmesh clusters join writes Secrets the apiserver accepts, the agent reads, and the control plane authenticates across a restart', async () => {
  const created = await api<{ clusterId: string; joinToken: string }>(cp, 'POST', '/v1/clusters', { name: 'gitops' });
  expect(created.status).toBe(201);
  const out = join(dir, 'rlmesh-secrets.yaml');
  const cli = spawnSync(
    process.execPath,
    [join(ROOT, 'cli/main.ts'), 'clusters', 'join', '--token', '-', '--api', cp.url, '--ca-file', cp.caFile, '--format', 'k8s-secret', '--out', out,
      '--observability', '--namespace', ns, '--runs-namespace', runsNs],
    { encoding: 'utf8', input: created.body.joinToken },
  );
  expect(cli.stderr).toContain(`cluster ${created.body.clusterId} joined`);
  expect(cli.status).toBe(0);
  kubectl(['apply', '-f', out]);

  const control = parseControlSecret(getSecret(ns, 'rlmesh-secrets'), ns, 'rlmesh-secrets');
  if (!control.ok) throw new Error(control.problem);
  expect(control.value.clusterId).toBe(created.body.clusterId);
  for (const n of [ns, runsNs]) {
    const pull = getSecret(n, 'rlmesh-registry-pull');
    expect(pull.type).toBe('kubernetes.io/dockerconfigjson');
    expect(parsePullSecret(pull, n, 'rlmesh-registry-pull')).toEqual({ ok: true, value: true });
    const auths = (JSON.parse(Buffer.from(pull.data!['.dockerconfigjson']!, 'base64').toString()) as { auths: Record<string, { username: string }> }).auths;
    expect(Object.values(auths)[0]?.username).toBe(created.body.clusterId);
    expect(Object.keys(auths)[0]).toBe('registry.rlmesh.dev'); // the control plane's registry host (its default)
  }
  expect(Buffer.from(getSecret(ns, 'rlmesh-cluster-relay-secret').data!['relay-secret']!, 'base64').toString()).toMatch(/^rlm_rs_/);

  const ca = readFileSync(cp.caFile, 'utf8');
  const s = openSession({ url: cp.url, ca }, control.value.control, { clusterId: control.value.clusterId, agentVersion: pkg.version });
  await s.waitFor('welcome');
  await expect.poll(async () => (await api<{ status: string }>(cp, 'GET', `/v1/clusters/${control.value.clusterId}`)).body.status).toBe('Connected');

  // restart on the same data directory: the agent's reconnect with the same Secret works
  await cp.stop();
  expect((await s.ended)?.code).toBeDefined();
  cp = await startControlPlane({ dataDir: join(dir, 'cp') });
  const again = await api<{ status: string; lastSeenAt: string }>(cp, 'GET', `/v1/clusters/${control.value.clusterId}`);
  expect(again.body.status).toBe('Disconnected');
  expect(again.body.lastSeenAt).not.toBeNull();
  const s2 = openSession({ url: cp.url, ca: readFileSync(cp.caFile, 'utf8') }, control.value.control);
  await s2.waitFor('welcome');
  await expect.poll(async () => (await api<{ status: string }>(cp, 'GET', `/v1/clusters/${control.value.clusterId}`)).body.status).toBe('Connected');
  s2.close();
  await s2.ended;

  // the token was used by the CLI: a second claim says what to do
  const reused = spawnSync(
    process.execPath,
    [join(ROOT, 'cli/main.ts'), 'clusters', 'join', '--token', created.body.joinToken, '--api', cp.url, '--ca-file', cp.caFile, '--format', 'k8s-secret'],
    { encoding: 'utf8' },
  );
  expect(reused.status).toBe(1);
  expect(reused.stderr).toContain('a used or expired token needs a new install command');
});
