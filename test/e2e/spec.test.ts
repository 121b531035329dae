// The user's page (shared/seeds/rlmesh-bring-your-own-cluster.txt), section by
// section, as one story on the real local cluster: the chart comes from the
// local OCI registry, the control plane is the reference one, and the chart's
// Deployments run as local processes with their own ServiceAccounts.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { helm, kubectl, run } from '../support/cluster.ts';
import { api, until, type ControlPlane } from '../support/runtime.ts';
import {
  NS, RUNS, Runtime, cleanSlate, cliPath, clusterRow, controlPlane, evaluation, localFlags, releasedChart, runInstallCommand,
  SMALL_EVALUATION, submit, waitConnected, waitFinished, type Chart,
} from './harness.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
let chart: Chart;
let cp: ControlPlane;
const rt = new Runtime();
let clusterId = '';

const secretValue = (ns: string, name: string, key: string): string | undefined => {
  const r = kubectl(['-n', ns, 'get', 'secret', name, '-o', `jsonpath={.data.${key.replace(/\./g, '\\.')}}`], { allowFail: true });
  return r.status === 0 && r.stdout ? Buffer.from(r.stdout, 'base64').toString('utf8') : undefined;
};
const exists = (args: string[]) => kubectl(['get', ...args], { allowFail: true }).status === 0;

beforeAll(async () => {
  cleanSlate();
  chart = releasedChart();
  cp = await controlPlane(chart);
}, 300_000);

afterAll(async () => {
  await rt.stop();
  await cp?.stop();
  cleanSlate();
});

describe('Install', () => {
  it('connect your cluster prints one helm install command with a single-use rlm_jt_ token, valid for an hour', async () => {
    const r = await api<{ clusterId: string; joinToken: string; installCommand: string; installCommandPrompt: string; expiresAt: string }>(cp, 'POST', '/v1/clusters', { name: 'e2e' });
    expect(r.status).toBe(201);
    clusterId = r.body.clusterId;
    expect(r.body.joinToken).toMatch(/^rlm_jt_[A-Za-z0-9]{32,}$/);
    expect(r.body.installCommand).toBe(
      `helm install rlmesh ${chart.ref} --version ${chart.version} -n rlmesh-system --create-namespace --set joinToken=${r.body.joinToken}`,
    );
    const ttl = Date.parse(r.body.expiresAt) - Date.now();
    expect(ttl).toBeGreaterThan(59 * 60_000);
    expect(ttl).toBeLessThanOrEqual(60 * 60_000);
    // the hidden-prompt variant: the token is typed at a prompt, never on the command line
    expect(r.body.installCommandPrompt).toMatch(/^sh -c '.*read -r t.*' rlmesh-install$/s);
    expect(r.body.installCommandPrompt).not.toContain(r.body.joinToken);
    runInstallCommand(cp, r.body.installCommandPrompt, `${r.body.joinToken}\n`);
    expect(helm(['-n', NS, 'status', 'rlmesh', '-o', 'json']).stdout).toContain('"status":"deployed"');
  });

  it('the agent trades the token once, writes its own Secrets (a hash of the token, never the token) and connects', async () => {
    await rt.start();
    await until('the control Secret', () => secretValue(NS, 'rlmesh-cluster-control', 'cluster-id'), 60);
    expect(secretValue(NS, 'rlmesh-cluster-control', 'cluster-id')).toBe(clusterId);
    expect(secretValue(NS, 'rlmesh-cluster-control', 'control')).toMatch(/^rlm_/);
    for (const ns of [NS, RUNS]) {
      const dockercfg = JSON.parse(secretValue(ns, 'rlmesh-registry-pull', '.dockerconfigjson')!);
      expect(Object.keys(dockercfg.auths)).toEqual(['registry.rlmesh.dev']);
    }
    expect(exists(['-n', NS, 'secret', 'rlmesh-registry-join-crd-upgrade'])).toBe(true);
    const token = secretValue(NS, 'rlmesh-join-token', 'token')!;
    const control = JSON.parse(kubectl(['-n', NS, 'get', 'secret', 'rlmesh-cluster-control', '-o', 'json']).stdout);
    expect(JSON.stringify(control)).not.toContain(token);
    expect(JSON.stringify(control.metadata.annotations ?? {})).toMatch(/[a-f0-9]{64}/);
    expect(rt.log('agent')).not.toContain(token);
    await waitConnected(cp, clusterId);
  });

  it('egress.extraDomains adds a host without restating the defaults; a host not listed is refused', async () => {
    helm(['upgrade', 'rlmesh', chart.ref, '--version', chart.version, '-n', NS, '--reuse-values', '--set', 'egress.extraDomains={my-inputs.s3.eu-west-1.amazonaws.com}', ...localFlags(cp)]);
    const config = JSON.parse(kubectl(['-n', NS, 'get', 'configmap', 'rlmesh-runtime-config', '-o', 'jsonpath={.data.config\\.json}']).stdout);
    expect(config.egress.allowedDomains).toEqual(expect.arrayContaining(['localhost', 'registry.rlmesh.dev', 'my-inputs.s3.eu-west-1.amazonaws.com']));
    await rt.stop('egress');
    const proxy = await rt.startOne('egress');
    const port = await until('the proxy to listen', () => {
      const line = readFileSync(proxy.logFile, 'utf8').split('\n').find((l) => l.includes('egress proxy ready'));
      return line ? (JSON.parse(line).listen.port as number) : undefined;
    }, 30);
    const refused = run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_connect}', '-x', `http://127.0.0.1:${port}`, 'https://not-listed.example.com/', '--max-time', '10'], {});
    expect(refused.stdout).toBe('403');
    // the listed host is not dialled: it would need public DNS and a route; the config above proves it is listed
    // the proxy answers before it logs, and its log reaches the file through a pipe: the line can trail the 403
    const decision = await until('the refusal decision line', () =>
      readFileSync(proxy.logFile, 'utf8').split('\n').find((l) => l.includes('not-listed.example.com')), 10);
    expect(decision).toMatch(/refused/);
  });
});

describe('Bring your own Secrets', () => {
  it('rlmesh clusters join writes the Secrets; the chart installed without joinToken names them; the agent connects', async () => {
    await rt.stop();
    cleanSlate();
    const created = await api<{ clusterId: string; joinToken: string }>(cp, 'POST', '/v1/clusters', { name: 'e2e-gitops' });
    const out = join(mkdtempSync(join(tmpdir(), 'gitops-')), 'rlmesh-secrets.yaml');
    const r = run(NODE, [cliPath, 'clusters', 'join', '--token', created.body.joinToken, '--api', cp.url.replace('127.0.0.1', 'localhost'), '--ca-file', cp.caFile, '--format', 'k8s-secret', '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    kubectl(['apply', '-f', out]); // namespaces first, then the Secrets, as a GitOps tool would
    helm(['install', 'rlmesh', chart.ref, '--version', chart.version, '-n', NS, '--create-namespace',
      '--set', 'credentials.controlSecret=rlmesh-secrets', '--set', 'credentials.pullSecret=rlmesh-registry-pull', ...localFlags(cp)]);
    expect(exists(['-n', NS, 'secret', 'rlmesh-join-token'])).toBe(false);
    clusterId = created.body.clusterId;
    await rt.start();
    await waitConnected(cp, clusterId);
  });
});

describe('Verify', () => {
  it("the spec's four commands succeed", () => {
    kubectl(['-n', NS, 'rollout', 'status', 'deployment/rlmesh-cluster-agent', '--timeout=120s']);
    kubectl(['-n', NS, 'rollout', 'status', 'deployment/rlmesh-cluster-controller', '--timeout=120s']);
    expect(kubectl(['get', 'rlmeshcaches']).stdout).toMatch(/NAME\s+PHASE\s+CAPACITY\s+USED\s+ARTIFACTS/);
    const pvc = kubectl(['-n', RUNS, 'get', 'pods,pvc']).stdout;
    expect(pvc).toMatch(/persistentvolumeclaim\/rlmesh-artifact-cache\s+Bound/);
  });

  it('the control plane shows Connected and lastSeenAt advances', async () => {
    const first = await clusterRow(cp, clusterId);
    expect(first.status).toBe('Connected');
    const later = await until('lastSeenAt to advance', async () => {
      const row = await clusterRow(cp, clusterId);
      return Date.parse(row.lastSeenAt!) > Date.parse(first.lastSeenAt!) ? row : undefined;
    }, 30);
    expect(later.status).toBe('Connected');
  });

  it('a small evaluation runs in rlmesh-runs and its result reaches the control plane', async () => {
    const id = await submit(cp, clusterId);
    await until('its pod in rlmesh-runs', () => {
      const pods = kubectl(['-n', RUNS, 'get', 'pods', '-l', `rlmesh.dev/evaluation`, '-o', 'name']).stdout;
      return pods.includes(id) ? pods : undefined;
    }, 60);
    const e = await waitFinished(cp, id);
    expect(e.phase).toBe('Succeeded');
    expect(e.updates.map((u) => u.phase)).toEqual(expect.arrayContaining(['Running', 'Succeeded']));
  });
});

describe('Troubleshooting, as the spec lists it', () => {
  it('ImagePullBackOff: the evaluation says to check registry access and the pull Secret; with own Secrets the agent names the one missing', async () => {
    // the kubelet's report of a failed pull (kwok has no kubelet), on a running evaluation's pod
    const id = await submit(cp, clusterId, { ...SMALL_EVALUATION, deadlineSeconds: '600' });
    const pod = await until('its pod', () => kubectl(['-n', RUNS, 'get', 'pods', '-l', 'rlmesh.dev/evaluation', '-o', 'name']).stdout.split('\n').find((p) => p.includes(id)), 60);
    const waiting = { status: { phase: 'Pending', conditions: [], containerStatuses: [{ name: 'evaluation', image: SMALL_EVALUATION.image, imageID: '', ready: false, restartCount: 0, started: false,
      state: { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image: unauthorized: authentication required' } } }] } };
    const containerName = kubectl(['-n', RUNS, 'get', pod, '-o', 'jsonpath={.spec.containers[0].name}']).stdout;
    waiting.status.containerStatuses[0]!.name = containerName;
    kubectl(['-n', RUNS, 'patch', pod, '--subresource=status', '--type=merge', '-p', JSON.stringify(waiting)]);
    const update = await until('the control plane to hear why', async () => (await evaluation(cp, id)).updates.find((u) => /ImagePull|pull/.test(u.message ?? '')), 60);
    expect(update.message).toMatch(/check registry access and that the pull Secret exists in the runs namespace/);
    kubectl(['-n', RUNS, 'delete', pod, '--wait=false']);

    // with own Secrets: the pull Secret missing from rlmesh-runs is named by the agent
    await rt.stop('agent');
    kubectl(['-n', RUNS, 'delete', 'secret', 'rlmesh-registry-pull']);
    await rt.startOne('agent');
    const line = await until('the agent to name the Secret', () => rt.log('agent').split('\n').find((l) => l.includes('rlmesh-runs/rlmesh-registry-pull')), 60);
    expect(line).toMatch(/does not exist/);
  });

  it('agent authentication error: a used token is named in the agent log with the fix', async () => {
    const created = await api<{ clusterId: string; joinToken: string }>(cp, 'POST', `/v1/clusters/${clusterId}/install-command`);
    // use the token once out of band, then give it to the agent
    run(NODE, [cliPath, 'clusters', 'join', '--token', created.body.joinToken, '--api', cp.url.replace('127.0.0.1', 'localhost'), '--ca-file', cp.caFile, '--format', 'k8s-secret', '--out', join(mkdtempSync(join(tmpdir(), 'used-')), 'x.yaml')]);
    await rt.stop('agent');
    helm(['upgrade', 'rlmesh', chart.ref, '--version', chart.version, '-n', NS, '--reuse-values', '--set', `joinToken=${created.body.joinToken}`, '--set', 'credentials.controlSecret=', '--set', 'credentials.pullSecret=', ...localFlags(cp)]);
    await rt.startOne('agent');
    const line = await until('the agent to explain', () => rt.log('agent').split('\n').find((l) => /token_used|already used/.test(l)), 60);
    expect(line).toMatch(/new install command/);
    expect(line).not.toContain(created.body.joinToken);
  });

  it('Pending PVC: without a default StorageClass the cache PVC stays Pending and preflight says what to set', async () => {
    await rt.stop();
    cleanSlate();
    kubectl(['annotate', 'storageclass', 'standard', 'storageclass.kubernetes.io/is-default-class-']);
    try {
      const created = await api<{ joinToken: string }>(cp, 'POST', '/v1/clusters', { name: 'no-sc' });
      helm(['install', 'rlmesh', chart.ref, '--version', chart.version, '-n', NS, '--create-namespace', '--set', `joinToken=${created.body.joinToken}`, '--plain-http', '--set', 'controlPlane.apiHost=localhost', '--set-file', `controlPlane.caBundle=${cp.caFile}`]);
      await new Promise((r) => setTimeout(r, 3000));
      expect(kubectl(['-n', RUNS, 'get', 'pvc', 'rlmesh-artifact-cache', '-o', 'jsonpath={.status.phase}']).stdout).toBe('Pending');
      const pf = run(NODE, [cliPath, 'preflight', '-o', 'json']);
      const report = JSON.parse(pf.stdout) as { checks: { id: string; verdict: string; found: string; fix: string }[] };
      const sc = report.checks.find((c) => /storage/i.test(c.id))!;
      expect(sc.verdict).toBe('fail');
      expect(sc.fix).toMatch(/default StorageClass|storage\.className/);
    } finally {
      kubectl(['annotate', 'storageclass', 'standard', 'storageclass.kubernetes.io/is-default-class=true', '--overwrite']);
    }
  });
});

describe('Rotate credentials and upgrade', () => {
  let control = '';
  it('helm upgrade --reuse-values keeps the credentials (no second join)', async () => {
    await rt.stop();
    cleanSlate();
    const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'e2e-upgrade' });
    clusterId = created.body.clusterId;
    runInstallCommand(cp, created.body.installCommand);
    await rt.start(['agent', 'controller', 'filler']);
    await waitConnected(cp, clusterId);
    control = secretValue(NS, 'rlmesh-cluster-control', 'control')!;
    await rt.stop('agent');
    helm(['upgrade', 'rlmesh', chart.ref, '--version', chart.version, '-n', NS, '--reuse-values', ...localFlags(cp)]);
    await rt.startOne('agent');
    await waitConnected(cp, clusterId);
    await new Promise((r) => setTimeout(r, 2000));
    expect(secretValue(NS, 'rlmesh-cluster-control', 'control')).toBe(control);
    expect(rt.log('agent')).not.toMatch(/"msg":"joined/);
  });

  it('the upgrade reapplied the CRDs through the pinned kubectl hook', () => {
    const jobs = kubectl(['-n', NS, 'get', 'events', '--field-selector', 'involvedObject.kind=Job', '-o', 'jsonpath={.items[*].involvedObject.name}'], { allowFail: true }).stdout;
    expect(jobs).toMatch(/crd/);
  });

  it('a new install command run as helm upgrade --install rejoins with the new token', async () => {
    const fresh = await api<{ installCommand: string }>(cp, 'POST', `/v1/clusters/${clusterId}/install-command`);
    expect(fresh.body.installCommand).toContain('helm upgrade --install rlmesh');
    await rt.stop('agent');
    runInstallCommand(cp, fresh.body.installCommand);
    await rt.startOne('agent');
    await until('new credentials', () => {
      const v = secretValue(NS, 'rlmesh-cluster-control', 'control');
      return v && v !== control ? v : undefined;
    }, 60);
    await waitConnected(cp, clusterId);
  });

  it('with own Secrets, a rotated value written into the Secret inside the overlap is followed without a restart', async () => {
    const pid = rt.get('agent').proc.pid;
    const rotated = await api<{ value: string }>(cp, 'POST', `/v1/clusters/${clusterId}/credentials/control/rotate`);
    expect(rotated.status).toBe(200);
    kubectl(['-n', NS, 'patch', 'secret', 'rlmesh-cluster-control', '--type', 'merge', '-p', JSON.stringify({ stringData: { control: rotated.body.value } })]);
    await until('the agent to re-authenticate', () => /re-?authenticat|credential (changed|rotated)/i.test(rt.log('agent')), 60);
    await waitConnected(cp, clusterId);
    expect(rt.get('agent').proc.pid).toBe(pid);
    expect(rt.get('agent').proc.exitCode).toBeNull();
  });
});

describe('Uninstall', () => {
  it('drain first: evaluations finish, then helm uninstall removes the agent and its spool PVC and keeps the rest', async () => {
    const id = await submit(cp, clusterId);
    expect((await waitFinished(cp, id)).phase).toBe('Succeeded');
    helm(['uninstall', 'rlmesh', '-n', NS, '--wait']);
    expect(exists(['-n', NS, 'deployment', 'rlmesh-cluster-agent'])).toBe(false);
    await until('the spool PVC to go', () => !exists(['-n', NS, 'pvc', 'rlmesh-agent-spool']), 60);
    expect(exists(['namespace', RUNS])).toBe(true);
    expect(exists(['-n', RUNS, 'pvc', 'rlmesh-artifact-cache'])).toBe(true);
    expect(exists(['crd', 'rlmeshevaluations.rlmesh.dev'])).toBe(true);
    expect(exists(['crd', 'rlmeshcaches.rlmesh.dev'])).toBe(true);
    expect(exists(['-n', NS, 'secret', 'rlmesh-registry-join-crd-upgrade'])).toBe(true);
  });

  it('archiving the registration revokes every credential: the next call is refused with a clear message', async () => {
    const before = await evaluation(cp, (await api<{ evaluations: { id: string }[] }>(cp, 'GET', `/v1/clusters/${clusterId}/evaluations`)).body.evaluations[0]!.id);
    expect(before.phase).toBe('Succeeded');
    const archived = await api<{ status: string }>(cp, 'POST', `/v1/clusters/${clusterId}/archive`);
    expect(archived.body.status).toBe('Archived');
    const line = await until('the agent to say it was revoked', () => rt.log('agent').split('\n').find((l) => /archived|revoked/.test(l)), 60);
    expect(line).toMatch(/Connect your cluster|new install command/);
    writeFileSync(join(tmpdir(), 'e2e-archived.log'), line);
  });
});
