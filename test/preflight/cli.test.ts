// rlmesh preflight as a user runs it: a process with a kubeconfig and a
// values file, table and JSON output, exit 1 on a fail.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CHECK_IDS, OUTBOUND_CHECK_IDS } from '../../lib/preflight/run.ts';
import { clusterInfo, kubectl } from '../support/cluster.ts';
import { tempDir } from '../support/temp.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = tempDir('rlmesh-pf-cli-');
const values = join(dir, 'values.yaml');
writeFileSync(
  values,
  `controlPlane:
  apiHost: localhost
  registryHost: localhost
network:
  dnsPeers:
    - namespaceSelector:
        matchLabels: { kubernetes.io/metadata.name: rlmesh-pf-no-such-namespace }
`,
);

function preflight(args: string[]): { status: number | null; stdout: string; stderr: string } {
  // the cluster's helm first on PATH, as a user who installs with it has it
  const env = { ...process.env, PATH: `${clusterInfo().bin}:${process.env.PATH}` };
  const r = spawnSync(process.execPath, [join(root, 'cli/preflight.ts'), '--kubeconfig', clusterInfo().kubeconfig, '-f', values, ...args], { encoding: 'utf8', timeout: 60_000, env });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('rlmesh preflight', () => {
  it('prints JSON with every CLI check and exits 1 on a fail', () => {
    const r = preflight(['--output', 'json']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(1);
    const report = JSON.parse(r.stdout) as { mode: string; checks: { id: string; verdict: string; found: string; fix: string }[] };
    expect(report.mode).toBe('cli');
    expect(report.checks.map((c) => c.id)).toEqual(CHECK_IDS.filter((id) => !OUTBOUND_CHECK_IDS.includes(id)));
    for (const c of report.checks) {
      expect(['pass', 'warn', 'fail']).toContain(c.verdict);
      expect(c.found.length).toBeGreaterThan(0);
      expect(c.fix).toMatch(/\.$/);
    }
    const dns = report.checks.find((c) => c.id === 'dns-peers')!;
    expect(dns.verdict).toBe('fail');
    expect(dns.found).toContain('peer 1 (namespaces {kubernetes.io/metadata.name=rlmesh-pf-no-such-namespace}) matches no running pod');
    expect(report.checks.find((c) => c.id === 'install-rights')!.verdict).toBe('pass');
    expect(report.checks.find((c) => c.id === 'kubernetes-version')!.found).toBe(`Kubernetes ${clusterInfo().kubernetesVersion} (floor 1.34)`);
    const helmVersion = spawnSync(join(clusterInfo().bin, 'helm'), ['version', '--short'], { encoding: 'utf8' }).stdout.split('+')[0]!.trim();
    expect(report.checks.find((c) => c.id === 'helm-version')).toMatchObject({ verdict: 'pass', found: `Helm ${helmVersion} (floor 3.14)` });
  });

  it('reads the kubernetes EndpointSlice and Service and prints the network.apiServerAddresses line to add', () => {
    const report = JSON.parse(preflight(['--output', 'json']).stdout) as { checks: { id: string; verdict: string; found: string; fix: string }[] };
    const clusterIp = JSON.parse(kubectl(['-n', 'default', 'get', 'service', 'kubernetes', '-o', 'json']).stdout).spec.clusterIP as string;
    const endpoint = JSON.parse(kubectl(['-n', 'default', 'get', 'endpointslices', '-l', 'kubernetes.io/service-name=kubernetes', '-o', 'json']).stdout).items[0].endpoints[0].addresses[0] as string;
    const line = `--set network.apiServerAddresses={${endpoint}/32,${clusterIp}/32}`;
    expect(report.checks.find((c) => c.id === 'api-addresses')).toEqual({
      id: 'api-addresses',
      verdict: 'pass',
      found: `the Kubernetes API is at ${endpoint}/32, ${clusterIp}/32 (EndpointSlice and Service default/kubernetes); helm install and helm upgrade read them`,
      fix: `Rendering with helm template or a GitOps tool, which cannot read the cluster? Add ${line} (to both charts).`,
    });
  });

  // nothing should listen on localhost:443 here, but another test's server may, briefly
  it('prints a table with each fix under its check, and the outbound check on request', () => {
    const r = preflight(['--check-outbound']);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^PASS {2}kubernetes-version {3}Kubernetes v/);
    expect(r.stdout).toMatch(/\nFAIL {2}dns-peers {12}peer 1 .*\n {27}fix: Set network\.dnsPeers/);
    expect(r.stdout).toMatch(/\nWARN {2}outbound-443 {9}from this machine \(the cluster may differ; the agent checks again from inside\): localhost:443 (connection refused|TLS certificate not trusted)/);
    expect(r.stdout).toMatch(/\npreflight fail: \d+ fail \([a-z0-9-, ]*dns-peers[a-z0-9-, ]*\), .* fix every FAIL before installing\.\n$/);
  });
});
