// RBAC proven on the real apiserver: each ServiceAccount's token is minted with
// TokenRequest and every row of the table in docs/chart/service-account-rights.md (RBAC_TABLE) is asked with
// `kubectl auth can-i`, once as the ServiceAccount itself and once with --as.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildEvaluationPod } from '../../controller/pod-spec.ts';
import { defaultProbeTargets, GATE_GRACE_SECONDS, gateTargets, probePod } from '../../controller/network-policy-probe.ts';
import type { RLMeshEvaluation } from '../../lib/crds/types.ts';
import { runtimeConfigSchema, type RuntimeConfig } from '../../lib/runtime-config.ts';
import { canIArgs, OPERATOR_PULL, RBAC_TABLE } from '../../scripts/generators/rbac-rights.ts';
import { admitImage } from '../../agent/evaluation-image.ts';
import { pullSecretsFor } from '../../controller/pull-secrets.ts';
import { clusterInfo, helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { until } from '../support/until.ts';
import { CHART, HOOK_ON_KWOK, TOKEN } from './chart.ts';

const SYS = 'rlmesh-system';
const kubeconfigs = new Map<string, string>();

function canI(args: string[], kubeconfig?: string): 'yes' | 'no' {
  const full = kubeconfig ? ['--kubeconfig', kubeconfig, ...args] : args;
  // can-i exits 1 for "no"; its answer is on stdout either way
  const out = (() => {
    try {
      return execFileSync(join(clusterInfo().bin, 'kubectl'), full, { encoding: 'utf8', env: { ...process.env, KUBECONFIG: clusterInfo().kubeconfig }, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (err) {
      return String((err as { stdout?: string }).stdout ?? '');
    }
  })().trim();
  if (out !== 'yes' && out !== 'no') throw new Error(`kubectl ${full.join(' ')} answered '${out}'`);
  return out;
}

// the operator's private registry for evaluations: one repository prefix, and its pull Secret mapped to it
const CORP_PREFIX = 'registry.corp.example/evals/';

beforeAll(async () => {
  helm([
    'upgrade', '--install', 'rlmesh', CHART, '-n', SYS, '--create-namespace', '--set', `joinToken=${TOKEN}`, '--set', 'observability.enabled=true',
    '--set', `evaluations.extraRegistries={${CORP_PREFIX}}`, '--set-json', `evaluations.imagePullSecrets=${JSON.stringify([{ name: OPERATOR_PULL, registries: [CORP_PREFIX] }])}`,
    ...HOOK_ON_KWOK,
  ]);
  for (const r of RBAC_TABLE) if (!kubeconfigs.has(r.sa)) kubeconfigs.set(r.sa, await serviceAccountKubeconfig(r.saNamespace, r.sa));
});

describe('what each ServiceAccount may do', () => {
  for (const row of RBAC_TABLE) {
    const args = canIArgs(row);
    it(`${row.saNamespace}:${row.sa}: ${args.slice(2).join(' ')} → ${row.allowed ? 'yes' : 'no'}`, () => {
      const expected = row.allowed ? 'yes' : 'no';
      expect(canI(args, kubeconfigs.get(row.sa)), 'with its own minted token').toBe(expected);
      expect(canI([...args, `--as=system:serviceaccount:${row.saNamespace}:${row.sa}`]), 'with --as').toBe(expected);
    });
  }

  it('the table covers every ServiceAccount with both answers', () => {
    for (const sa of ['rlmesh-cluster-agent', 'rlmesh-cluster-controller', 'rlmesh-artifact-cache-filler']) {
      expect(RBAC_TABLE.some((r) => r.sa === sa && r.allowed)).toBe(true);
      expect(RBAC_TABLE.filter((r) => r.sa === sa && !r.allowed).length).toBeGreaterThanOrEqual(4);
    }
    expect(RBAC_TABLE.filter((r) => r.sa === 'rlmesh-egress-proxy').every((r) => !r.allowed)).toBe(true);
  });

  it('the agent, with its own token, writes its Secret and cannot read one it did not create', () => {
    const kc = kubeconfigs.get('rlmesh-cluster-agent')!;
    kubectl(['-n', SYS, 'delete', 'secret', 'rlmesh-cluster-control', 'rbac-test-other', '--ignore-not-found']);
    kubectl(['-n', SYS, 'create', 'secret', 'generic', 'rbac-test-other', '--from-literal=k=v']);
    const k = (args: string[]) => as(kc, args);
    expect(k(['-n', SYS, 'create', 'secret', 'generic', 'rlmesh-cluster-control', '--from-literal=control=x', '--from-literal=cluster-id=c']).ok).toBe(true);
    expect(k(['-n', SYS, 'get', 'secret', 'rlmesh-cluster-control']).ok).toBe(true);
    const other = k(['-n', SYS, 'get', 'secret', 'rbac-test-other']);
    expect(other.ok).toBe(false);
    expect(other.out).toMatch(/forbidden/i);
    kubectl(['-n', SYS, 'delete', 'secret', 'rlmesh-cluster-control', 'rbac-test-other', '--ignore-not-found']);
  });
});

/** kubectl with a kubeconfig of its own, `input` on stdin; ok and what it printed (stderr on failure). */
function as(kubeconfig: string, args: string[], input?: string): { ok: boolean; out: string } {
  try {
    return { ok: true, out: execFileSync(join(clusterInfo().bin, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', input, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] }) };
  } catch (err) {
    return { ok: false, out: String((err as { stderr?: string }).stderr) };
  }
}

/**
 * Waits until the apiserver enforces the chart's admission policies (they take effect a moment after creation):
 * retries while the request passes, or while RBAC, which has not yet seen a grant the test just made, refuses it.
 */
async function enforced(kubeconfig: string, args: string[], input?: string): Promise<{ ok: boolean; out: string }> {
  const end = Date.now() + 30_000;
  for (;;) {
    const r = as(kubeconfig, args, input);
    if ((!r.ok && !/is forbidden: User .* cannot /.test(r.out)) || Date.now() > end) return r;
    await new Promise((done) => setTimeout(done, 500));
  }
}

/** A server-side dry run of creating `pod` with the controller's own token: admission decides, nothing is stored. */
const createPod = (kubeconfig: string, pod: V1Pod) => as(kubeconfig, ['create', '-f', '-', '--dry-run=server'], JSON.stringify(pod));

/** The pods the controller builds, with its own code and the release's runtime config: an evaluation's (with the network-ready gate and an artifact) and the NetworkPolicy probe's. */
function controllerPods(namespace = 'rlmesh-runs'): { evaluation: V1Pod; probe: V1Pod; config: RuntimeConfig } {
  const config = runtimeConfigSchema.parse(JSON.parse(kubectl(['-n', 'rlmesh-runs', 'get', 'configmap', 'rlmesh-runtime-config', '-o', 'jsonpath={.data.config\\.json}']).stdout));
  const image = config.preflight?.networkPolicyProbe.image;
  if (!image) throw new Error("the release's runtime config names no runtime image (preflight.networkPolicyProbe.image)");
  const proxyUrl = 'http://10.96.0.10:3128';
  const ev: RLMeshEvaluation = {
    apiVersion: 'rlmesh.dev/v1alpha1',
    kind: 'RLMeshEvaluation',
    metadata: { name: 'rbac-test', namespace, uid: '00000000-0000-4000-8000-000000000001' },
    spec: {
      evaluationId: 'ev_rbac_test',
      image: `${config.controlPlane.registryHost}/envs/test:1`,
      deadlineSeconds: 60,
      cancelled: false,
      env: [{ name: 'SEED', value: '7' }],
      secretEnv: { secretName: 'rbac-test-env', names: ['API_KEY'] },
      artifacts: [{ name: 'policy.pt', sha256: 'a'.repeat(64), sizeBytes: 1, source: { httpsUrlSecretRef: { name: 'rbac-test-sources', key: 'url.policy.pt' } } }],
    },
  };
  const gate = gateTargets(proxyUrl, { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' })!;
  const evaluation = buildEvaluationPod(ev, {
    namespace,
    pullSecret: config.credentials.pullSecret,
    proxyUrl,
    networkGate: { image, ...gate, graceSeconds: GATE_GRACE_SECONDS },
    cache: { pvcName: config.artifactCache.pvcName, accessModes: ['ReadWriteOnce'], nodeName: 'kwok-node-0' },
  });
  const probe = probePod({
    runsNamespace: namespace,
    image,
    pullSecrets: [config.credentials.pullSecret, config.credentials.joinPullSecret].filter(Boolean),
    targets: defaultProbeTargets(proxyUrl, config.ports.metrics, '10.244.0.9'),
  });
  return { evaluation, probe, config };
}

/** A copy of `pod` changed by `change` (and its metadata by `meta`). */
function altered(pod: V1Pod, change: (spec: V1Pod['spec'] & object) => void, meta?: (m: V1Pod['metadata'] & object) => void): V1Pod {
  const copy = structuredClone(pod);
  change(copy.spec!);
  meta?.(copy.metadata!);
  return copy;
}

describe('what admission refuses beyond RBAC (the chart\'s ValidatingAdmissionPolicies)', () => {
  it('the agent creates only its own Secrets: no ServiceAccount token, no other name', async () => {
    const kc = kubeconfigs.get('rlmesh-cluster-agent')!;
    const foreign = await enforced(kc, ['-n', SYS, 'create', 'secret', 'generic', 'someone-elses', '--from-literal=k=v', '--dry-run=server']);
    expect(foreign.ok).toBe(false);
    expect(foreign.out).toMatch(/may write only its own Secrets .*rlmesh-system\/someone-elses/);
    // a token Secret under one of its own names, for a ServiceAccount that may do more than it
    const file = join(clusterInfo().dir, 'sa', 'agent-token-secret.json');
    writeFileSync(file, JSON.stringify({
      apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/service-account-token',
      metadata: { name: 'rlmesh-cluster-control', namespace: SYS, annotations: { 'kubernetes.io/service-account.name': 'rlmesh-cluster-controller' } },
    }));
    const sat = as(kc, ['create', '-f', file, '--dry-run=server']);
    expect(sat.ok).toBe(false);
    expect(sat.out).toMatch(/only Opaque and dockerconfigjson Secrets, not kubernetes\.io\/service-account-token/);
    // its own names pass (the server's dry run goes through admission and stores nothing)
    expect(as(kc, ['-n', SYS, 'create', 'secret', 'generic', 'rlmesh-cluster-relay-secret', '--from-literal=relay-secret=x', '--dry-run=server']).ok).toBe(true);
    expect(as(kc, ['-n', 'rlmesh-runs', 'create', 'secret', 'generic', 'ev-1-env', '--from-literal=API_KEY=a', '--dry-run=server']).ok).toBe(true);
    expect(as(kc, ['-n', 'rlmesh-runs', 'create', 'secret', 'generic', 'rlmesh-artifact-sources-0', '--from-literal=ev-1-sources={}', '--dry-run=server']).ok).toBe(true);
    // the artifact credentials live in those Secrets alone, Opaque: not a Secret per evaluation, which the filler could not mount
    const perEvaluation = as(kc, ['-n', 'rlmesh-runs', 'create', 'secret', 'generic', 'ev-1-sources', '--from-literal=accessKeyId=a', '--dry-run=server']);
    expect(perEvaluation.ok).toBe(false);
    expect(perEvaluation.out).toMatch(/may write only its own Secrets .*rlmesh-artifact-sources-\* artifact credentials and per-evaluation -env secret environment in rlmesh-runs\), not rlmesh-runs\/ev-1-sources/);
    expect(as(kc, ['-n', 'rlmesh-runs', 'create', 'secret', 'docker-registry', 'rlmesh-artifact-sources-1', '--docker-server=x', '--docker-username=u', '--docker-password=p', '--dry-run=server']).ok).toBe(false);
    expect(as(kc, ['-n', 'rlmesh-runs', 'create', 'secret', 'generic', 'ev-1-other', '--from-literal=a=b', '--dry-run=server']).ok).toBe(false);
  });

  it("the agent creates only its own ConfigMaps: not the controller's NetworkPolicy probe verdict", async () => {
    const kc = kubeconfigs.get('rlmesh-cluster-agent')!;
    const verdict = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'rlmesh-network-policy-probe', namespace: SYS }, data: { summary: 'pass: forged' } };
    const forged = await enforced(kc, ['create', '-f', '-', '--dry-run=server'], JSON.stringify(verdict));
    expect(forged.ok).toBe(false);
    expect(forged.out).toContain(`may write only its own ConfigMaps (rlmesh-preflight, rlmesh-cluster-ranges, rlmesh-output-hosts, rlmesh-agent-status in ${SYS}), not ${SYS}/rlmesh-network-policy-probe`);
    expect(as(kc, ['-n', SYS, 'create', 'configmap', 'rlmesh-preflight-other', '--dry-run=server']).ok).toBe(false);
    // its own pass
    expect(as(kc, ['-n', SYS, 'create', 'configmap', 'rlmesh-agent-status', '--from-literal=k=v', '--dry-run=server']).out).not.toMatch(/may write only/);
  });

  it('GPU discovery labels only its own node, and only with rlmesh.dev/gpu.* labels: no owner reference or finalizer', async () => {
    const pods = JSON.parse(kubectl(['-n', SYS, 'get', 'pods', '-l', 'app.kubernetes.io/name=rlmesh-gpu-feature-discovery', '-o', 'json']).stdout) as { items: { metadata: { name: string; uid: string }; spec: { nodeName?: string } }[] };
    const pod = pods.items.find((p) => p.spec.nodeName);
    expect(pod, 'a scheduled GPU discovery pod').toBeDefined();
    const own = pod!.spec.nodeName!;
    const other = (JSON.parse(kubectl(['get', 'nodes', '-o', 'json']).stdout) as { items: { metadata: { name: string } }[] }).items.map((n) => n.metadata.name).find((n) => n !== own)!;
    const kc = await serviceAccountKubeconfig(SYS, 'rlmesh-gpu-feature-discovery', 600, pod!.metadata);
    const another = await enforced(kc, ['label', 'node', other, 'rlmesh.dev/gpu.test=yes', '--dry-run=server']);
    expect(another.ok).toBe(false);
    expect(another.out).toContain(`may label only the node its pod runs on (${own}), not ${other}`);
    expect(as(kc, ['label', 'node', own, 'rlmesh.dev/gpu.test=yes', '--dry-run=server']).ok).toBe(true);
    const label = as(kc, ['label', 'node', own, 'team=someone', '--dry-run=server']);
    expect(label.ok).toBe(false);
    expect(label.out).toContain('may change only rlmesh.dev/gpu.* labels');
    const taint = as(kc, ['taint', 'node', own, 'rlmesh.dev/evil=yes:NoSchedule', '--dry-run=server']);
    expect(taint.ok).toBe(false);
    expect(taint.out).toContain("may not change a node's spec");
    // an owner the garbage collector would delete the Node with, or a finalizer that would hold its deletion
    const ns = JSON.parse(kubectl(['get', 'namespace', SYS, '-o', 'json']).stdout) as { metadata: { uid: string } };
    const owner = { ownerReferences: [{ apiVersion: 'v1', kind: 'Namespace', name: SYS, uid: ns.metadata.uid }] };
    for (const metadata of [owner, { finalizers: ['rlmesh.dev/hold'] }]) {
      const patched = as(kc, ['patch', 'node', own, '--type=merge', '-p', JSON.stringify({ metadata }), '--dry-run=server']);
      expect(patched.ok, JSON.stringify(metadata)).toBe(false);
      expect(patched.out).toContain("may not change a node's ownerReferences or finalizers");
    }
    // a token bound to no pod names no node, so it may label none
    const unbound = as(kubeconfigs.get('rlmesh-gpu-feature-discovery')!, ['label', 'node', own, 'rlmesh.dev/gpu.test=yes', '--dry-run=server']);
    expect(unbound.ok).toBe(false);
    expect(unbound.out).toContain('its token names no node');
  });

  it('the controller creates only pods shaped like its own: as ServiceAccount default, no token, no volume but the cache read-only, no Secret in env but its evaluation\'s own secret environment, images from the evaluation registries or its own', async () => {
    const kc = kubeconfigs.get('rlmesh-cluster-controller')!;
    const { evaluation, probe, config } = controllerPods();
    const registry = config.controlPlane.registryHost;
    expect(evaluation.spec!.initContainers).toHaveLength(1);
    expect(evaluation.spec!.volumes).toHaveLength(1);
    expect(evaluation.spec!.containers[0]!.env!.filter((e) => e.valueFrom)).toEqual([{ name: 'API_KEY', valueFrom: { secretKeyRef: { name: 'rbac-test-env', key: 'API_KEY' } } }]);

    // the cache filler's ServiceAccount may read every Secret in rlmesh-runs; its pod is the chart's alone
    const filler = await enforced(kc, ['create', '-f', '-', '--dry-run=server'], JSON.stringify(altered(evaluation, (s) => { s.serviceAccountName = 'rlmesh-artifact-cache-filler'; })));
    expect(filler.ok).toBe(false);
    expect(filler.out).toContain('may run pods only as ServiceAccount default, as its evaluation and probe pods do, not as rlmesh-artifact-cache-filler');

    const refusals: [string, V1Pod, ...string[]][] = [
      ['a mounted token', altered(evaluation, (s) => { delete s.automountServiceAccountToken; }), 'must set automountServiceAccountToken: false'],
      ['a projected token', altered(evaluation, (s) => { s.volumes!.push({ name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } }); }), 'may not give a pod a ServiceAccount token (projected volume token)'],
      // PodSecurity restricted allows Secret volumes
      ['a Secret volume', altered(evaluation, (s) => { s.volumes!.push({ name: 'pull', secret: { secretName: config.credentials.pullSecret } }); }), 'may mount only the artifact cache, PersistentVolumeClaim rlmesh-artifact-cache read-only, not volume pull'],
      ['the cache read-write', altered(evaluation, (s) => { s.volumes![0]!.persistentVolumeClaim!.readOnly = false; }), 'may mount only the artifact cache', 'not volume artifact-cache'],
      ['a Secret in env', altered(evaluation, (s) => { s.containers[0]!.env!.push({ name: 'KEYS', valueFrom: { secretKeyRef: { name: 'rbac-test-sources', key: 'url.policy.pt' } } }); }), 'may fill environment variables only from the secret environment Secret of the evaluation that owns the pod (<evaluation>-env), not from another Secret (container evaluation)'],
      ['the pull Secret in env', altered(evaluation, (s) => { s.containers[0]!.env!.push({ name: 'PULL', valueFrom: { secretKeyRef: { name: config.credentials.pullSecret, key: '.dockerconfigjson' } } }); }), 'not from another Secret (container evaluation)'],
      ["another evaluation's secret environment", altered(evaluation, (s) => { s.containers[0]!.env!.push({ name: 'THEIRS', valueFrom: { secretKeyRef: { name: 'other-ev-env', key: 'API_KEY' } } }); }), 'not from another Secret (container evaluation)'],
      ['its own secret environment as envFrom', altered(evaluation, (s) => { s.containers[0]!.envFrom = [{ secretRef: { name: 'rbac-test-env' } }]; }), 'not from another Secret (container evaluation)'],
      ['a second owner to borrow its Secret', altered(evaluation, () => undefined, (m) => { m.ownerReferences!.push({ ...m.ownerReferences![0]!, name: 'other-ev', uid: '00000000-0000-4000-8000-000000000002', controller: false }); }), 'not from another Secret (container evaluation)'],
      ['an unlisted registry', altered(evaluation, (s) => { s.containers[0]!.image = 'ghcr.io/someone/env:1'; }), `may run images only from under ${registry}/, ${CORP_PREFIX} `, 'not ghcr.io/someone/env:1, which is the repository ghcr.io/someone/env'],
      // an upper-case first component is a registry host, as the kubelet reads it, not a Docker Hub path
      ['an upper-case host', altered(evaluation, (s) => { s.containers[0]!.image = 'MYREG/env:1'; }), 'not MYREG/env:1, which is the repository myreg/env'],
      // a runtime may resolve an image ID to whatever image the node already holds
      ['a bare image ID', altered(evaluation, (s) => { s.containers[0]!.image = `sha256:${'b'.repeat(64)}`; }), `may not run the bare image ID sha256:${'b'.repeat(64)} (InvalidImageName, as the agent refuses it)`],
      ['an image ID alone', altered(evaluation, (s) => { s.initContainers![0]!.image = 'c'.repeat(64); }), `may not run the bare image ID ${'c'.repeat(64)} (InvalidImageName`],
      ['Docker Hub, unlisted', altered(evaluation, (s) => { s.containers[0]!.image = 'busybox'; }), 'not busybox, which is the repository docker.io/library/busybox'],
      ['an init container from an unlisted registry', altered(evaluation, (s) => { s.initContainers![0]!.image = 'docker.io/library/busybox:1'; }), 'not docker.io/library/busybox:1, which is the repository docker.io/library/busybox'],
    ];
    for (const [what, pod, ...messages] of refusals) {
      const r = createPod(kc, pod);
      expect(r.ok, what).toBe(false);
      for (const m of messages) expect(r.out, what).toContain(m);
    }

    // exactly as the controller builds them, they pass (the server's dry run stores nothing)
    const own = createPod(kc, evaluation);
    expect(own.ok, `the evaluation pod: ${own.out}`).toBe(true);
    const probed = createPod(kc, probe);
    expect(probed.ok, `the probe pod: ${probed.out}`).toBe(true);
  });

  it("the controller's pods run images only under the allowed repository prefixes, and carry an operator's pull Secret only with an image under its registries: admission and the agent's and controller's code agree", async () => {
    const kc = kubeconfigs.get('rlmesh-cluster-controller')!;
    const { evaluation, config } = controllerPods();
    const platform = config.controlPlane.registryHost;
    const mapped = config.evaluations?.imagePullSecrets ?? [];
    expect(mapped).toEqual([{ name: OPERATOR_PULL, registries: [CORP_PREFIX] }]);
    await enforced(kc, ['create', '-f', '-', '--dry-run=server'], JSON.stringify(altered(evaluation, (s) => { s.containers[0]!.image = 'ghcr.io/x/y'; })));
    const sha = `sha256:${'b'.repeat(64)}`;
    // [image, under an allowed prefix]
    const images: [string, boolean][] = [
      ['registry.corp.example/evals/gym:1', true],
      [`registry.corp.example/evals/team/gym@${sha}`, true],
      [`registry.corp.example/evals/gym:2@${sha}`, true],
      ['Registry.Corp.Example/evals/gym', true],
      [`${platform}/anything/env:1`, true],
      ['registry.corp.example/evals-evil/gym:1', false],
      ['registry.corp.example/evalsx/gym', false],
      ['registry.corp.example/evals:1', false],
      ['registry.corp.example/other/gym:1', false],
      ['registry.corp.example:5000/evals/gym:1', false],
      ['registry.corp.example.evil.example/evals/gym', false],
      ['docker.io/library/busybox', false],
      ['index.docker.io/evals/gym', false],
    ];
    for (const [image, allowed] of images) {
      expect('image' in admitImage(image, config.agent.imageRegistries), `the agent on ${image}`).toBe(allowed);
      const alone = createPod(kc, altered(evaluation, (s) => { s.containers[0]!.image = image; }));
      expect(alone.ok, `${image} without the operator's pull Secret: ${alone.out}`).toBe(allowed);
      if (!allowed) expect(alone.out, image).toMatch(/may run images only from under .*\(controlPlane\.registryHost, evaluations\.extraRegistries\).*add the prefix of its repository to evaluations\.extraRegistries/);
      if (!allowed) continue;
      // with the operator's pull Secret: only where the controller would attach it
      const wants = pullSecretsFor(image, mapped).includes(OPERATOR_PULL);
      expect(wants, image).toBe(image.toLowerCase().startsWith(CORP_PREFIX));
      const withSecret = createPod(kc, altered(evaluation, (s) => { s.containers[0]!.image = image; s.imagePullSecrets = [...(s.imagePullSecrets ?? []), { name: OPERATOR_PULL }]; }));
      expect(withSecret.ok, `${image} with ${OPERATOR_PULL}: ${withSecret.out}`).toBe(wants);
      if (!wants) {
        expect(withSecret.out, image).toContain(`may give a pod only the pull Secrets its images are for`);
        expect(withSecret.out, image).toContain(`not ${OPERATOR_PULL} to a pod with the images`);
        expect(withSecret.out, image).toContain('evaluations.imagePullSecrets[].registries');
      }
    }
    // a Secret the values name nowhere, on any image
    const unknown = createPod(kc, altered(evaluation, (s) => { s.containers[0]!.image = 'registry.corp.example/evals/gym:1'; s.imagePullSecrets = [{ name: 'someone-elses-login' }]; }));
    expect(unknown.ok).toBe(false);
    expect(unknown.out).toContain('not someone-elses-login to a pod with the images');
  });

  it('where PodSecurity does not hold, the controller\'s pods still get nothing of the node: no host namespace, host path or privilege', async () => {
    // rlmesh-runs enforces PodSecurity restricted, which refuses these before the policy is asked;
    // the policy holds them in any namespace, here one without PodSecurity labels where the test lets the controller create pods
    const ns = 'rlmesh-rbac-test-nopsa';
    kubectl(['delete', 'namespace', ns, '--ignore-not-found', '--wait=true']);
    kubectl(['create', 'namespace', ns]);
    try {
      kubectl(['apply', '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'v1',
          kind: 'List',
          items: [
            { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'pods', namespace: ns }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['create'] }] },
            {
              apiVersion: 'rbac.authorization.k8s.io/v1',
              kind: 'RoleBinding',
              metadata: { name: 'pods', namespace: ns },
              roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pods' },
              subjects: [{ kind: 'ServiceAccount', name: 'rlmesh-cluster-controller', namespace: SYS }],
            },
          ],
        }),
      });
      await until(`ServiceAccount ${ns}/default`, () => kubectl(['-n', ns, 'get', 'serviceaccount', 'default'], { allowFail: true }).status === 0);
      const kc = kubeconfigs.get('rlmesh-cluster-controller')!;
      const { evaluation } = controllerPods(ns);
      const hostNetwork = await enforced(kc, ['create', '-f', '-', '--dry-run=server'], JSON.stringify(altered(evaluation, (s) => { s.hostNetwork = true; })));
      expect(hostNetwork.ok).toBe(false);
      expect(hostNetwork.out).toContain("may not give a pod the node's network, PID or IPC namespace");
      const hostPath = createPod(kc, altered(evaluation, (s) => { s.volumes!.push({ name: 'host', hostPath: { path: '/' } }); }));
      expect(hostPath.ok).toBe(false);
      expect(hostPath.out).toContain('may mount only the artifact cache, PersistentVolumeClaim rlmesh-artifact-cache read-only, not volume host');
      const privileged = createPod(kc, altered(evaluation, (s) => { s.containers[0]!.securityContext = { privileged: true }; }));
      expect(privileged.ok).toBe(false);
      expect(privileged.out).toContain('may run containers only with allowPrivilegeEscalation: false, unprivileged and with no added capabilities, not container evaluation');
      // and the pod as the controller builds it passes there too
      const own = createPod(kc, evaluation);
      expect(own.ok, `the evaluation pod: ${own.out}`).toBe(true);
    } finally {
      kubectl(['delete', 'namespace', ns, '--wait=false', '--ignore-not-found']);
    }
  });
});
