// The README's first command: the whole product on one machine, narrated.
// Local cluster with a real node -> reference control plane -> chart from the
// local OCI registry installed with a fresh join token -> the chart's pods as
// real containers -> one evaluation of the test image, phase by phase.
// The control plane keeps running after the demo, so that what the demo prints
// at its end works: `./demo stop` (or test/cluster/down) stops it.
import { join } from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { caBundleFile, CONTROL_PLANE_ADDRESSES, CONTROL_PLANE_HOST, LAB_HOST_USERS, controlPlaneListen, evaluationImage, notReady, Runtime, smallEvaluation } from './e2e/harness.ts';
import { clusterDir, clusterInfo, helm, kubectl } from './support/cluster.ts';
import { startDemoControlPlane, stopDemoControlPlane } from './support/demo-control-plane.ts';
import { releaseIsCurrent, releaseToLocalRegistry } from './support/release.ts';
import { api, releasedChart, ROOT } from './support/runtime.ts';
import { until } from './support/until.ts';

const NS = 'rlmesh-system';
let step = 0;
const say = (text: string) => console.log(`\n[${++step}] ${text}`);
const detail = (text: string) => console.log(`    ${text}`);
const rt = new Runtime();

let stopControlPlane: (() => Promise<void>) | undefined;

async function main(): Promise<void> {
  say('Starting the local Kubernetes cluster (real kube-apiserver, scheduler, controller-manager; a real node with kubelet, containerd, kube-proxy, kube-router and CoreDNS; kwok nodes)');
  const kubeconfig = execFileSync(join(ROOT, 'test/cluster/up'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
  process.env.KUBECONFIG = kubeconfig;
  const info = clusterInfo();
  detail(`kubeconfig ${kubeconfig}; Kubernetes ${info.kubernetesVersion}`);
  detail(kubectl(['get', 'nodes', '-L', 'nvidia.com/gpu.product', '--no-headers']).stdout.trim().split('\n').join('\n    '));

  say('Releasing to the local OCI registry: every image built without a container engine, both charts, the CLI');
  if (!releaseIsCurrent()) releaseToLocalRegistry();
  const chart = releasedChart();
  detail(`${chart.ref} --version ${chart.version}`);

  say(`Starting the reference control plane (HTTPS + gRPC on port 443 of the node bridge's host address; pods resolve ${CONTROL_PLANE_HOST} to it)`);
  const cp = await startDemoControlPlane({ dataDir: join(clusterDir(), 'demo-controlplane-data'), ...controlPlaneListen(chart) }).catch((err: Error) => {
    throw new Error(`${err.message}. Port 443 on the host's bridge address must be free (the chart's agent dials the API on 443); stop whatever listens there and run ./demo again`);
  });
  stopControlPlane = cp.stop;
  detail(`${cp.url}; log ${cp.logFile}; it keeps running after the demo (pid ${cp.proc.pid})`);

  say('Connect your cluster: the control plane issues a single-use join token');
  const created = await api<{ clusterId: string; joinToken: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'demo' });
  if (created.status !== 201) throw new Error(`POST /v1/clusters answered ${created.status}: ${JSON.stringify(created.body)}`);
  const { clusterId, joinToken } = created.body;
  detail(`cluster ${clusterId}; token ${joinToken.slice(0, 10)}… (valid one hour, works once)`);

  say('helm install rlmesh … --set joinToken=… (from oci://, as a user would)');
  helm(['uninstall', 'rlmesh', '-n', NS, '--wait'], { allowFail: true });
  helm([
    'install', 'rlmesh', chart.ref, '--version', chart.version, '--plain-http', '-n', NS, '--create-namespace',
    '--set', `joinToken=${joinToken}`, '--set', `controlPlane.apiHost=${CONTROL_PLANE_HOST}`, '--set-file', `controlPlane.caBundle=${caBundleFile(cp)}`,
    // the lab's control plane is at a private address, which the agent's NetworkPolicy opens on 443 only when named
    ...CONTROL_PLANE_ADDRESSES,
    // the lab node runs no user namespaces: evaluation pods share its users, as accepted here
    ...LAB_HOST_USERS,
    '--wait', '--timeout', '5m',
  ]);
  detail(helm(['-n', NS, 'status', 'rlmesh', '--show-resources=false']).stdout.split('\n').slice(0, 6).join('\n    '));

  say('The chart\'s pods, running as real containers on the real node (pulled by digest from the local registry)');
  for (const w of ['agent', 'controller', 'filler', 'egress'] as const) {
    for (const p of rt.pods(w)) detail(`${w.padEnd(10)} ${p.metadata.name} on ${p.spec.nodeName}: ${p.status.phase}, ready ${p.status.containerStatuses?.[0]?.ready}`);
  }

  say('Waiting for the agent to trade the token and connect');
  const secret = await until('the control Secret', () => {
    const r = kubectl(['-n', NS, 'get', 'secret', 'rlmesh-cluster-control', '-o', 'json'], { allowFail: true });
    return r.status === 0 ? (JSON.parse(r.stdout) as { data: Record<string, string>; metadata: { annotations?: Record<string, string> } }) : undefined;
  }, { timeoutMs: 60_000 });
  detail(`joined as ${Buffer.from(secret.data['cluster-id']!, 'base64').toString()}; Secrets written:`);
  detail(kubectl(['get', 'secrets', '-A', '--field-selector', 'type!=helm.sh/release.v1', '-o', 'custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,TYPE:.type', '--no-headers']).stdout.trim().split('\n').filter((l) => /^rlmesh-(system|runs)\s/.test(l)).join('\n    '));
  const connected = await until('Connected', async () => {
    const r = await api<{ clusters: { id: string; status: string; lastSeenAt: string }[] }>(cp, 'GET', '/v1/clusters');
    return r.body.clusters.find((c) => c.id === clusterId && c.status === 'Connected');
  }, { timeoutMs: 60_000 });
  detail(`control plane shows ${connected.status}, lastSeenAt ${connected.lastSeenAt}`);

  say('Submitting a small evaluation to this cluster (the test evaluation image: runs 2 s, exits 0)');
  const submitted = await api<{ id: string }>(cp, 'POST', `/v1/clusters/${clusterId}/evaluations`, smallEvaluation(await evaluationImage()));
  if (submitted.status !== 201) throw new Error(`submitting the evaluation answered ${submitted.status}: ${JSON.stringify(submitted.body)}`);
  const evalId = submitted.body.id;
  detail(`evaluation ${evalId}`);
  const seen = new Set<string>();
  const final = await until('the evaluation to finish', async () => {
    const r = await api<{ phase: string; result?: unknown; updates: { phase: string; message?: string; pod?: string; node?: string }[] }>(cp, 'GET', `/v1/evaluations/${evalId}`);
    for (const u of r.body.updates ?? []) {
      const key = `${u.phase}`;
      if (seen.has(key)) continue;
      seen.add(key);
      detail(`phase ${u.phase}${u.pod ? ` (pod ${u.pod}${u.node ? ` on ${u.node}` : ''})` : ''}${u.message ? `: ${u.message}` : ''}`);
    }
    return ['Succeeded', 'Failed', 'Cancelled'].includes(r.body.phase) ? r.body : undefined;
  }, { timeoutMs: 120_000, intervalMs: 500 });
  detail(`result reached the control plane: ${final.phase}`);

  say('Look at it yourself');
  for (const c of [
    `export KUBECONFIG=${kubeconfig}`,
    `export PATH=${info.bin}:$PATH   # kubectl and helm as the local cluster built them`,
    'kubectl get rlmeshcaches',
    'kubectl -n rlmesh-runs get rlmeshevaluations,pods,pvc',
    `kubectl -n rlmesh-runs describe rlmeshevaluation ${evalId}`,
  ]) detail(c);

  say('Is it healthy? rlmesh status: one line per check, and what to do under each ✗ (the CLI from this checkout, with the kube context only)');
  // the probe's and preflight's first results come shortly after the start: wait (up to two minutes) for every ✓
  // (a warning exits 0 too: wait for every check to pass, not for the exit code)
  const allPass = (): boolean => {
    const r = spawnSync(process.execPath, [join(ROOT, 'cli/main.ts'), 'status', '-o', 'json'], { encoding: 'utf8' });
    try {
      return r.status === 0 && (JSON.parse(r.stdout) as { checks: { verdict: string }[] }).checks.every((c) => c.verdict === 'pass');
    } catch {
      return false;
    }
  };
  await until('every check of rlmesh status to pass', () => (allPass() ? true : undefined), { timeoutMs: 120_000, intervalMs: 3000 }).catch(() => undefined);
  const table = spawnSync(process.execPath, [join(ROOT, 'cli/main.ts'), 'status'], { encoding: 'utf8' });
  detail(table.stdout.trim().split('\n').join('\n    '));
  const passed = table.status === 0 && allPass();
  detail(passed ? 'every check passed' : table.status === 0 ? 'no check failed; the ! lines above say what to look at' : `exit ${table.status}: the ✗ lines above say what failed and what to do`);
  detail(`run it again: ${process.execPath} ${join(ROOT, 'cli/main.ts')} status   (rlmesh status from this checkout; -o json for scripts)`);
  detail('The cluster and the control plane keep running: ./demo stop stops the control plane (the agent then reports it away); test/cluster/down stops both');
}

if (process.argv[2] === 'stop') {
  console.log((await stopDemoControlPlane()) ? 'stopped the demo\'s control plane' : 'the demo\'s control plane is not running');
  process.exit(0);
}

main()
  .catch(async (err: Error) => {
    console.error(`\ndemo stopped at step ${step}: ${err.message}`);
    console.error(`    not ready:\n${notReady()}`);
    for (const w of ['agent', 'controller'] as const) {
      const tail = (() => {
        try {
          return rt.log(w).trim().split('\n').slice(-5).join('\n      ');
        } catch {
          return '(no pod)';
        }
      })();
      console.error(`    last lines of the ${w}:\n      ${tail}`);
    }
    // a demo that failed leaves nothing running but the cluster
    await stopControlPlane?.();
    process.exit(1);
  });
