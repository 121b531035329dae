// Proves the local cluster is a real Kubernetes: real authentication and RBAC,
// PodSecurity admission, scheduling onto kwok nodes, garbage collection,
// dynamic volumes and an OCI registry that Helm installs from.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { clusterInfo, helm, kubectl, registryAuthFile, serviceAccountKubeconfig } from '../support/cluster.ts';
import { KWOK_TOLERATION, outcomeEnv } from '../support/kwok-outcome.ts';
import { until } from '../support/until.ts';
import { tempDir } from '../support/temp.ts';

const ns = `smoke-${process.pid}`;

const jsonpath = (args: string[], path: string) => kubectl([...args, '-o', `jsonpath=${path}`]).stdout;

describe('the local cluster is real Kubernetes', () => {
  kubectl(['create', 'namespace', ns]);
  afterAll(() => {
    kubectl(['delete', 'namespace', ns, '--wait=false'], { allowFail: true });
  });

  it('reports the Kubernetes version it was built as', () => {
    const version = JSON.parse(kubectl(['version', '-o', 'json']).stdout);
    expect(version.serverVersion.gitVersion).toBe(clusterInfo().kubernetesVersion);
    expect(Number(version.serverVersion.minor)).toBeGreaterThanOrEqual(34);
  });

  it('denies a TokenRequest ServiceAccount token what RBAC does not grant, and allows what it does', async () => {
    kubectl(['-n', ns, 'create', 'serviceaccount', 'reader']);
    kubectl(['-n', ns, 'create', 'role', 'cm-reader', '--verb=get,list', '--resource=configmaps']);
    kubectl(['-n', ns, 'create', 'rolebinding', 'cm-reader', '--role=cm-reader', `--serviceaccount=${ns}:reader`]);
    const kc = await serviceAccountKubeconfig(ns, 'reader');
    const env = { KUBECONFIG: kc };
    const denied = kubectl(['-n', ns, 'get', 'secrets'], { env, allowFail: true });
    expect(denied.status).not.toBe(0);
    expect(denied.stderr).toContain(`User "system:serviceaccount:${ns}:reader" cannot list resource "secrets"`);
    expect(kubectl(['-n', ns, 'get', 'configmaps'], { env }).status).toBe(0);
    expect(kubectl(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'], { env }).stdout).toBe(`system:serviceaccount:${ns}:reader`);
  });

  it('rejects a privileged pod in a namespace enforcing PodSecurity restricted', () => {
    kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted']);
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'privileged', namespace: ns },
      spec: { containers: [{ name: 'c', image: 'busybox', securityContext: { privileged: true } }] },
    };
    const r = kubectl(['apply', '-f', '-'], { input: JSON.stringify(pod), allowFail: true });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/violates PodSecurity "restricted:latest": privileged/);
    kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce-']);
  });

  it('schedules a Deployment pod that tolerates their taint onto a kwok node where it becomes Ready', async () => {
    const deployment = JSON.parse(kubectl(['-n', ns, 'create', 'deployment', 'web', '--image=registry.example/web:1', '--replicas=2', '--dry-run=client', '-o', 'json']).stdout);
    Object.assign(deployment.spec.template.spec, { tolerations: [KWOK_TOLERATION], nodeSelector: { type: 'kwok' } });
    kubectl(['apply', '-f', '-'], { input: JSON.stringify(deployment) });
    kubectl(['-n', ns, 'rollout', 'status', 'deployment/web', '--timeout=90s']);
    const nodes = jsonpath(['-n', ns, 'get', 'pods', '-l', 'app=web'], '{.items[*].spec.nodeName}').split(' ');
    expect(nodes).toHaveLength(2);
    for (const n of nodes) expect(n).toMatch(/^kwok-/);
  });

  it('finishes a bare pod with the exit code and after the duration its container is told', async () => {
    // the contract of test/cluster/kwok-stages.yaml: TEST_EXIT_CODE and TEST_DURATION on the first container
    const outcomes = { ok: { exitCode: 0, duration: '2s' }, bad: { exitCode: 3, duration: '2s' }, untold: {} };
    for (const [name, outcome] of Object.entries(outcomes)) {
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: ns },
        spec: { restartPolicy: 'Never', tolerations: [KWOK_TOLERATION], nodeSelector: { type: 'kwok' }, containers: [{ name: 'eval', image: 'registry.example/eval:1', env: outcomeEnv(outcome) }] },
      };
      kubectl(['apply', '-f', '-'], { input: JSON.stringify(pod) });
    }
    const phase = (name: string) => jsonpath(['-n', ns, 'get', 'pod', name], '{.status.phase}');
    await until('pod ok to succeed', () => (phase('ok') === 'Succeeded' ? true : undefined));
    await until('pod bad to fail', () => (phase('bad') === 'Failed' ? true : undefined));
    await until('pod untold to succeed', () => (phase('untold') === 'Succeeded' ? true : undefined));
    const terminated = (name: string) => JSON.parse(jsonpath(['-n', ns, 'get', 'pod', name], '{.status.containerStatuses[0].state.terminated}')) as { exitCode: number; startedAt: string; finishedAt: string };
    const ranFor = (name: string) => Date.parse(terminated(name).finishedAt) - Date.parse(jsonpath(['-n', ns, 'get', 'pod', name], '{.status.startTime}'));
    expect(terminated('ok').exitCode).toBe(0);
    expect(terminated('bad').exitCode).toBe(3);
    expect(terminated('untold').exitCode).toBe(0);
    // timestamps have whole seconds: a 2 s run shows as at least 2 s
    expect(ranFor('ok')).toBeGreaterThanOrEqual(2000);
    expect(ranFor('bad')).toBeGreaterThanOrEqual(2000);
  });

  it('binds a PVC through the default StorageClass', async () => {
    const pvc = {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'data', namespace: ns },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    };
    kubectl(['apply', '-f', '-'], { input: JSON.stringify(pvc) });
    await until('PVC to bind', () => (jsonpath(['-n', ns, 'get', 'pvc', 'data'], '{.status.phase}') === 'Bound' ? true : undefined));
    expect(jsonpath(['-n', ns, 'get', 'pvc', 'data'], '{.spec.storageClassName}')).toBe('standard');
  });

  it('completes a namespace deletion, garbage-collecting what was in it', async () => {
    const doomed = `${ns}-doomed`;
    kubectl(['create', 'namespace', doomed]);
    kubectl(['-n', doomed, 'create', 'configmap', 'c', '--from-literal=a=b']);
    kubectl(['-n', doomed, 'create', 'deployment', 'd', '--image=registry.example/x:1']);
    kubectl(['delete', 'namespace', doomed, '--timeout=120s']);
    const r = kubectl(['get', 'namespace', doomed], { allowFail: true });
    expect(r.stderr).toContain('NotFound');
  });

  it('installs a chart pushed to the local OCI registry from oci://', () => {
    const dir = tempDir('smoke-chart-');
    const chart = join(dir, 'smoke');
    mkdirSync(join(chart, 'templates'), { recursive: true });
    writeFileSync(join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: smoke\nversion: 0.0.1\n');
    writeFileSync(join(chart, 'templates/cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-oci\ndata:\n  release: {{ .Release.Name | quote }}\n');
    helm(['package', chart, '-d', dir]);
    const push = helm(['push', join(dir, 'smoke-0.0.1.tgz'), `oci://${clusterInfo().registry}/smoke`, '--plain-http', '--registry-config', registryAuthFile()]);
    expect(push.stdout + push.stderr).toContain('Digest: sha256:');
    // the registry serves anonymous clients only its public repositories (controlplane/registry-auth): the publisher pulls what it pushed
    helm(['install', 'oci-smoke', `oci://${clusterInfo().registry}/smoke/smoke`, '--version', '0.0.1', '--plain-http', '--registry-config', registryAuthFile(), '-n', ns, '--wait']);
    expect(jsonpath(['-n', ns, 'get', 'configmap', 'from-oci'], '{.data.release}')).toBe('oci-smoke');
  });
});
