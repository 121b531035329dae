// RBAC proven on the real apiserver: each ServiceAccount's token is minted with
// TokenRequest and every row of the README's table (RBAC_TABLE) is asked with
// `kubectl auth can-i`, once as the ServiceAccount itself and once with --as.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { canIArgs, RBAC_TABLE } from '../../scripts/generators/rbac-rights.ts';
import { clusterInfo, helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
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

beforeAll(async () => {
  helm(['upgrade', '--install', 'rlmesh', CHART, '-n', SYS, '--create-namespace', '--set', `joinToken=${TOKEN}`, '--set', 'observability.enabled=true', ...HOOK_ON_KWOK]);
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

/** kubectl with a kubeconfig of its own; ok and what it printed (stderr on failure). */
function as(kubeconfig: string, args: string[]): { ok: boolean; out: string } {
  try {
    return { ok: true, out: execFileSync(join(clusterInfo().bin, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }) };
  } catch (err) {
    return { ok: false, out: String((err as { stderr?: string }).stderr) };
  }
}

/** Waits until the apiserver enforces the chart's admission policies (they take effect a moment after creation). */
async function enforced(kubeconfig: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  const end = Date.now() + 30_000;
  for (;;) {
    const r = as(kubeconfig, args);
    if (!r.ok || Date.now() > end) return r;
    await new Promise((done) => setTimeout(done, 500));
  }
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
    expect(as(kc, ['-n', 'rlmesh-runs', 'create', 'secret', 'generic', 'ev-1-sources', '--from-literal=accessKeyId=a', '--dry-run=server']).ok).toBe(true);
    expect(as(kc, ['-n', 'rlmesh-runs', 'create', 'secret', 'generic', 'ev-1-other', '--from-literal=a=b', '--dry-run=server']).ok).toBe(false);
  });

  it('GPU discovery labels only its own node, and only with rlmesh.dev/gpu.* labels', async () => {
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
    // a token bound to no pod names no node, so it may label none
    const unbound = as(kubeconfigs.get('rlmesh-gpu-feature-discovery')!, ['label', 'node', own, 'rlmesh.dev/gpu.test=yes', '--dry-run=server']);
    expect(unbound.ok).toBe(false);
    expect(unbound.out).toContain('its token names no node');
  });
});
