// RBAC proven on the real apiserver: each ServiceAccount's token is minted with
// TokenRequest and every row of the README's table (RBAC_TABLE) is asked with
// `kubectl auth can-i`, once as the ServiceAccount itself and once with --as.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { canIArgs, RBAC_TABLE } from '../../scripts/generators/values-rbac-table.ts';
import { clusterInfo, helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { CHART, TOKEN } from './chart.ts';

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
  helm(['upgrade', '--install', 'rlmesh', CHART, '-n', SYS, '--create-namespace', '--set', `joinToken=${TOKEN}`, '--set', 'observability.enabled=true']);
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
    const k = (args: string[]) => {
      try {
        return { ok: true, out: execFileSync(join(clusterInfo().bin, 'kubectl'), ['--kubeconfig', kc, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }) };
      } catch (err) {
        return { ok: false, out: String((err as { stderr?: string }).stderr) };
      }
    };
    expect(k(['-n', SYS, 'create', 'secret', 'generic', 'rlmesh-cluster-control', '--from-literal=control=x', '--from-literal=cluster-id=c']).ok).toBe(true);
    expect(k(['-n', SYS, 'get', 'secret', 'rlmesh-cluster-control']).ok).toBe(true);
    const other = k(['-n', SYS, 'get', 'secret', 'rbac-test-other']);
    expect(other.ok).toBe(false);
    expect(other.out).toMatch(/forbidden/i);
    kubectl(['-n', SYS, 'delete', 'secret', 'rlmesh-cluster-control', 'rbac-test-other', '--ignore-not-found']);
  });
});
