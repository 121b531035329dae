// Own-Secrets rotation on the real node, as the spec puts it: "rotate a purpose
// in the cluster's Settings and write the new value into your Secret within the
// 24-hour overlap; the agent follows its control Secret without a restart".
// The Secrets come from `rlmesh clusters join --format k8s-secret` and are
// applied with kubectl, as a GitOps tool would. A rotation through the
// reference control plane's API leaves them alone (the agent says which Secret
// and key to write, and by when); the agent keeps working on the old value; the
// new value applied is followed without a restart; the old value applied back
// inside the overlap (a sync of an older commit) keeps working; after the
// overlap the old value is refused with a clear message. No write to the
// Secrets ever comes from the agent: every field manager is kubectl's.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { helm, kubectl, run } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { tempDir } from '../support/temp.ts';
import { until } from '../support/until.ts';
import type { StatusReport } from '../../lib/status/run.ts';
import { AGENT_STATUS_CONFIGMAP, AGENT_STATUS_KEY, agentStatusSchema, type AgentStatus } from '../../lib/agent-status.ts';
import { NS, RUNS, Runtime, cleanSlate, cliPath, clusterRow, controlPlane, evaluationImage, localFlags, releasedChart, smallEvaluation, submit, waitConnected, waitFinished } from './harness.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const CONTROL = 'rlmesh-secrets';
const PULL = 'rlmesh-registry-pull';
const rt = new Runtime();
let cp: ControlPlane;
let image = '';
let clusterId = '';
let dir = '';
/** the Secrets as the join rendered them (the old values), parsed */
let joined: Record<string, unknown>[] = [];
let oldControl = '';
let newControl = '';
let newPull = '';
let oldValidUntil = '';
let agentUid = '';

type SecretDoc = { kind: string; metadata: { name: string; namespace: string }; stringData?: Record<string, string> };
type Meta = { resourceVersion: string; managedFields?: { manager: string; operation: string }[] };

/** kubectl apply of the join's Secrets with `control` and `pull` values as given (a GitOps commit). */
function applySecrets(control: string, pull?: string): void {
  const docs = structuredClone(joined).map((d) => {
    const s = d as SecretDoc;
    if (s.kind === 'Secret' && s.metadata.name === CONTROL) s.stringData!.control = control;
    if (s.kind === 'Secret' && s.metadata.name === PULL && pull) s.stringData!['.dockerconfigjson'] = pull;
    return s;
  });
  const file = join(dir, `commit-${Date.now()}.yaml`);
  writeFileSync(file, docs.map((d) => stringify(d)).join('---\n'));
  kubectl(['apply', '-f', file]);
}

const secretMeta = (ns: string, name: string): Meta => (JSON.parse(kubectl(['-n', ns, 'get', 'secret', name, '-o', 'json', '--show-managed-fields']).stdout) as { metadata: Meta }).metadata;
const secretValue = (ns: string, name: string, key: string): string =>
  Buffer.from(kubectl(['-n', ns, 'get', 'secret', name, '-o', `jsonpath={.data.${key.replace(/\./g, '\\.')}}`]).stdout, 'base64').toString('utf8');
const OUR_SECRETS = [[NS, CONTROL], [NS, PULL], [RUNS, PULL]] as const;

/** Every write to the delivered Secrets came from kubectl (its create, client-side and server-side apply), none from the agent. */
function expectOnlyKubectlWrote(): void {
  for (const [ns, name] of OUR_SECRETS) {
    const managers = (secretMeta(ns, name).managedFields ?? []).map((f) => f.manager);
    expect(managers.length, `${ns}/${name}`).toBeGreaterThan(0);
    for (const m of managers) expect(m, `${ns}/${name} field manager`).toMatch(/^kubectl/);
  }
}

function agentStatus(): AgentStatus {
  const raw = kubectl(['-n', NS, 'get', 'configmap', AGENT_STATUS_CONFIGMAP, '-o', `jsonpath={.data.${AGENT_STATUS_KEY.replace(/\./g, '\\.')}}`]).stdout;
  return agentStatusSchema.parse(JSON.parse(raw));
}

/** The control plane's log lines about this cluster's sessions, in order. */
function sessionLines(): { msg: string; currentCredential?: boolean }[] {
  return readFileSync(cp.logFile, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; clusterId?: string; currentCredential?: boolean })
    .filter((l) => l.clusterId === clusterId && l.msg.startsWith('session opened'));
}

/** The agent pod is the one installed: same UID, its container never restarted. */
function expectSamePod(): void {
  const pod = rt.pod('agent');
  expect(pod.metadata.uid).toBe(agentUid);
  expect(pod.status.containerStatuses?.[0]?.restartCount).toBe(0);
}

async function evaluationSucceeds(): Promise<void> {
  const id = await submit(cp, clusterId, smallEvaluation(image));
  expect((await waitFinished(cp, id, 180)).phase).toBe('Succeeded');
}

beforeAll(async () => {
  cleanSlate();
  const chart = releasedChart();
  cp = await controlPlane(chart, undefined, ['--test-clock']);
  image = await evaluationImage();
  const created = await api<{ clusterId: string; joinToken: string }>(cp, 'POST', '/v1/clusters', { name: 'e2e-own-secrets-rotation' });
  clusterId = created.body.clusterId;
  dir = tempDir('own-secrets-rotation-');
  const out = join(dir, 'rlmesh-secrets.yaml');
  const r = run(NODE, [cliPath, 'clusters', 'join', '--token', created.body.joinToken, '--api', cp.url, '--ca-file', cp.caFile, '--format', 'k8s-secret', '--out', out]);
  if (r.status !== 0) throw new Error(`rlmesh clusters join failed: ${r.stderr}`);
  joined = parseAllDocuments(readFileSync(out, 'utf8')).map((d) => d.toJSON() as Record<string, unknown>);
  oldControl = (joined.find((d) => (d as SecretDoc).metadata.name === CONTROL) as SecretDoc).stringData!.control!;
  kubectl(['apply', '-f', out]);
  helm(['install', 'rlmesh', chart.ref, '--version', chart.version, '-n', NS, '--create-namespace', '--set', `credentials.controlSecret=${CONTROL}`, '--set', `credentials.pullSecret=${PULL}`, ...localFlags(cp)]);
  await waitConnected(cp, clusterId);
  agentUid = rt.pod('agent').metadata.uid;
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  cleanSlate();
});

describe('Own-Secrets rotation', () => {
  it("a rotation through the control plane's API: the agent writes none of your Secrets, says which Secret and key to write by when (never the value), and keeps working on the old value", async () => {
    const before = OUR_SECRETS.map(([ns, name]) => secretMeta(ns, name).resourceVersion);
    const control = await api<{ value: string; oldValidUntil: string; deliveredToSession: boolean }>(cp, 'POST', `/v1/clusters/${clusterId}/credentials/control/rotate`);
    expect(control.status).toBe(200);
    expect(control.body.deliveredToSession).toBe(true);
    const pull = await api<{ value: string }>(cp, 'POST', `/v1/clusters/${clusterId}/credentials/pull/rotate`);
    expect(pull.status).toBe(200);
    newControl = control.body.value;
    newPull = pull.body.value;
    oldValidUntil = control.body.oldValidUntil;

    const pending = await until('the agent to say what to write', () => rt.log('agent').split('\n').filter((l) => l.includes('rotation pending')).length >= 2 || undefined, { timeoutMs: 60_000 });
    expect(pending).toBe(true);
    const log = rt.log('agent');
    expect(log).toContain(`rotation pending: the control plane rotated the control credential, and ${NS}/${CONTROL} is delivered out of band (GitOps, a secret manager), so the agent does not write it. Write the new value (the cluster's Settings, or the rotate call's answer) into key \\"control\\" before ${oldValidUntil}`);
    expect(log).toContain(`${NS}/${PULL} and ${RUNS}/${PULL} is delivered out of band`);
    const pullPassword = Object.values((JSON.parse(newPull) as { auths: Record<string, { password: string }> }).auths)[0]!.password;
    for (const v of [newControl, pullPassword]) expect(log).not.toContain(v);

    // what `rlmesh status` reads: the rotation pending, where and by when
    const status = await until('the agent status to show the pending rotations', () => {
      const s = agentStatus();
      return s.credentials.rotations.length === 2 ? s : undefined;
    }, { timeoutMs: 45_000 });
    expect(status.credentials.rotations).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ purpose: 'control', state: 'awaiting-secret', secrets: [`${NS}/${CONTROL}`], key: 'control', until: oldValidUntil }),
        expect.objectContaining({ purpose: 'pull', state: 'awaiting-secret', secrets: [`${NS}/${PULL}`, `${RUNS}/${PULL}`], key: '.dockerconfigjson' }),
      ]),
    );

    // and what the operator sees: rlmesh status warns, naming the Secret, the key and the deadline
    const report = JSON.parse(run(NODE, [cliPath, 'status', '-o', 'json']).stdout) as StatusReport;
    const credentials = report.checks.find((c) => c.id === 'credentials')!;
    expect(credentials.verdict).toBe('warn');
    expect(credentials.found).toContain(`rotation pending: write the new control value into ${NS}/${CONTROL} key "control" by ${oldValidUntil}`);
    expect(credentials.found).toContain(`write the new pull value into ${NS}/${PULL} and ${RUNS}/${PULL} key ".dockerconfigjson" by `);
    expect(JSON.stringify(report)).not.toContain(newControl);

    // the old value keeps working: heartbeats and an evaluation go through
    const seen = (await clusterRow(cp, clusterId)).lastSeenAt!;
    await until('lastSeenAt to advance on the old value', async () => ((await clusterRow(cp, clusterId)).lastSeenAt! > seen ? true : undefined), { timeoutMs: 30_000 });
    await evaluationSucceeds();
    expect(secretValue(NS, CONTROL, 'control')).toBe(oldControl);
    expect(OUR_SECRETS.map(([ns, name]) => secretMeta(ns, name).resourceVersion)).toEqual(before);
    expectOnlyKubectlWrote();
    expectSamePod();
  });

  it('the new values applied as GitOps would: the agent follows without a restart and the control plane sees the new credential in use', async () => {
    const opened = sessionLines().length;
    applySecrets(newControl, newPull);
    await until('a session on the current credential', () => sessionLines().slice(opened).some((l) => l.currentCredential === true) || undefined, { timeoutMs: 60_000 });
    await waitConnected(cp, clusterId);
    expectSamePod();
    await until('the agent status to drop the control rotation', () => (agentStatus().credentials.rotations.some((r) => r.purpose === 'control') ? undefined : true), { timeoutMs: 45_000 });
    await evaluationSucceeds();
    expectOnlyKubectlWrote();
  });

  it('the old values applied back inside the overlap (a sync of an older commit): the agent follows and keeps working', async () => {
    const opened = sessionLines().length;
    applySecrets(oldControl);
    await until('a session on the superseded credential', () => sessionLines().slice(opened).some((l) => l.currentCredential === false) || undefined, { timeoutMs: 60_000 });
    await waitConnected(cp, clusterId);
    const seen = (await clusterRow(cp, clusterId)).lastSeenAt!;
    await until('lastSeenAt to advance on the old value', async () => ((await clusterRow(cp, clusterId)).lastSeenAt! > seen ? true : undefined), { timeoutMs: 30_000 });
    await evaluationSucceeds();
    expectSamePod();
    expectOnlyKubectlWrote();
  });

  it('after the overlap the old value is refused with a clear message; the new value applied connects again, still without a restart', async () => {
    expect((await api(cp, 'POST', '/v1/test/clock/advance', { ms: 25 * 3600 * 1000 })).status).toBe(200);
    await until('the agent to be refused the expired value', () => /control credential expired: it was replaced by a rotation at \S+ and its 24-hour overlap ended at \S+, so the control plane refuses it now/.test(rt.log('agent')) || undefined, {
      timeoutMs: 60_000,
    });
    expect(rt.log('agent')).not.toContain(newControl);
    const opened = sessionLines().length;
    applySecrets(newControl, newPull);
    await until('a session on the current credential', () => sessionLines().slice(opened).some((l) => l.currentCredential === true) || undefined, { timeoutMs: 90_000 });
    await waitConnected(cp, clusterId, 90);
    expectSamePod();
    expectOnlyKubectlWrote();
  });
});
