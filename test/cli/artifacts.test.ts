// The released CLI as a platform engineer gets it, without this repository:
// scripts/release/cli.ts builds the npm package and the single executable, the
// package is installed with `npm install -g --prefix`, and each artifact runs
// from a directory outside the repository with a PATH that holds nothing of it:
// a copy of the pinned Node.js binary for the npm package, nothing at all for
// the executable. Each claims a join token from a reference control plane and
// checks the local cluster.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, linkSync, mkdirSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, delimiter, join } from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { parseControlSecret, parsePullSecret } from '../../agent/credentials.ts';
import { CHECK_IDS, OUTBOUND_CHECK_IDS } from '../../lib/preflight/run.ts';
import { runChild, type ChildRun } from '../support/child.ts';
import { releaseInfo } from '../support/release.ts';
import { buildCli, CLI_PACKAGE_NAME, pinnedNodeBinary, type CliArtifacts } from '../../scripts/release/cli.ts';
import { clusterInfo } from '../support/cluster.ts';
import { openSession, startTestControlPlane, type TestControlPlane } from '../support/control-plane.ts';
import { api } from '../support/api.ts';
import { tempDir } from '../support/temp.ts';

const root = join(import.meta.dirname, '../..');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };

let dir: string;
let artifacts: CliArtifacts;
let buildSeconds: number;
let prefix: string;
let nodeBin: string; // holds only a copy (or hard link) of the pinned node binary
let emptyBin: string;
let cp: TestControlPlane;

beforeAll(async () => {
  dir = tempDir('rlmesh-cli-artifacts-');
  // the artifacts the test command's release built, as a user downloads them
  const released = releaseInfo().cli;
  artifacts = { ...released, version: releaseInfo().version };

  nodeBin = join(dir, 'node-bin');
  emptyBin = join(dir, 'empty-bin');
  mkdirSync(nodeBin);
  mkdirSync(emptyBin);
  try {
    linkSync(pinnedNodeBinary(), join(nodeBin, 'node'));
  } catch {
    copyFileSync(pinnedNodeBinary(), join(nodeBin, 'node'));
  }
  // npm itself comes from the machine's PATH less anything in this repository
  const machinePath = (process.env.PATH ?? '').split(delimiter).filter((p) => p !== '' && !realpath(p).startsWith(realpathSync(root)));
  prefix = join(dir, 'prefix');
  execFileSync('npm', ['install', '-g', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', artifacts.npmPackage], {
    cwd: dir,
    env: { PATH: [nodeBin, ...machinePath].join(delimiter), HOME: dir, npm_config_cache: join(dir, 'npm-cache'), npm_config_update_notifier: 'false' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });

  cp = await startTestControlPlane({ registryHost: 'registry.example.test' });
});

afterAll(async () => {
  await cp?.close();
  if (cp) rmSync(cp.dir, { recursive: true, force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function realpath(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');

type Run = ChildRun;

/** Runs an installed rlmesh outside the repository with only `path` on PATH (asynchronously: the control plane lives in this process). */
function exec(cmd: string, args: string[], path: string, input = ''): Promise<Run> {
  return runChild(cmd, args, { cwd: dir, env: { PATH: path, HOME: dir, KUBECONFIG: clusterInfo().kubeconfig }, input, timeoutMs: 120_000 });
}

const documents = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as Record<string, unknown>);
const meta = (d: Record<string, unknown>) => d.metadata as k8s.V1ObjectMeta;
/** What the apiserver stores for a manifest with stringData. */
function asStored(doc: Record<string, unknown>): k8s.V1Secret {
  const { stringData, ...rest } = doc as unknown as { stringData: Record<string, string> } & k8s.V1Secret;
  return { ...rest, data: Object.fromEntries(Object.entries(stringData).map(([k, v]) => [k, Buffer.from(v).toString('base64')])) };
}
const newToken = async (): Promise<string> => String((await api(cp, 'POST', '/v1/clusters', { name: 'cli-artifact' })).body.joinToken);

describe('the CLI artifacts', () => {
  it('are an npm package with one bundled file and no dependencies, and a linux/amd64 executable, both of the root version', () => {
    console.log(`released: ${artifacts.npmPackage} ${statSync(artifacts.npmPackage).size} B, ${artifacts.executable} ${statSync(artifacts.executable).size} B`);
    expect(artifacts.version).toBe(version);
    expect(basename(artifacts.npmPackage)).toBe(`rlmesh-cli-${version}.tgz`);
    expect(basename(artifacts.executable)).toBe(`rlmesh-${version}-linux-amd64`);

    const installed = join(prefix, 'lib/node_modules', CLI_PACKAGE_NAME);
    const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(pkg).toMatchObject({ name: '@rlmesh/cli', version, bin: { rlmesh: 'rlmesh.cjs' }, engines: { node: '>=24' } });
    expect(pkg).not.toHaveProperty('dependencies');
    expect(readdirSync(installed).sort()).toEqual(['README.md', 'THIRD-PARTY-NOTICES.txt', 'package.json', 'rlmesh.cjs']);
    expect(readFileSync(join(installed, 'rlmesh.cjs'), 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/);
    expect(readFileSync(join(installed, 'THIRD-PARTY-NOTICES.txt'), 'utf8')).toContain('@kubernetes/client-node 1.4.0 (Apache-2.0)');
    expect(realpathSync(join(prefix, 'bin/rlmesh'))).toBe(join(installed, 'rlmesh.cjs'));

    const exe = readFileSync(artifacts.executable);
    expect(exe.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(exe[18]).toBe(0x3e); // e_machine EM_X86_64
    expect(statSync(artifacts.executable).mode & 0o111).toBe(0o111);
  });

  it('run on the PATH they are given: the npm package finds no node on an empty one', async () => {
    const r = await exec(join(prefix, 'bin/rlmesh'), ['--version'], emptyBin);
    expect(r.status).toBe(127);
    expect(r.stderr).toContain('node');
  });

  it('are the same bytes when built again from the same commit', async () => {
    const started = performance.now();
    const again = await buildCli({ outDir: join(dir, 'again') });
    buildSeconds = (performance.now() - started) / 1000;
    console.log(`built again in ${buildSeconds.toFixed(1)} s`);
    expect(sha256(again.npmPackage)).toBe(sha256(artifacts.npmPackage));
    expect(sha256(again.executable)).toBe(sha256(artifacts.executable));
  });
});

describe.each([
  { artifact: 'npm package', command: () => join(prefix, 'bin/rlmesh'), path: () => nodeBin },
  { artifact: 'single executable', command: () => artifacts.executable, path: () => emptyBin },
])('rlmesh from the $artifact', ({ command, path }) => {
  const rlmesh = (args: string[], input?: string): Promise<Run> => exec(command(), args, path(), input);

  it('prints its version and its help', async () => {
    expect(await rlmesh(['--version'])).toEqual({ status: 0, stdout: `${version}\n`, stderr: '' });
    const help = await rlmesh(['--help']);
    expect(help).toMatchObject({ status: 0, stderr: '' });
    expect(help.stdout).toMatch(/^Usage: rlmesh <command> \[options\]\n/);
    for (const s of ['preflight', 'clusters join', '--version']) expect(help.stdout).toContain(s);
    expect(await rlmesh(['clusters', 'join', '--help'])).toMatchObject({ status: 0, stdout: expect.stringContaining('--format k8s-secret') });
    expect(await rlmesh(['nodes'])).toMatchObject({ status: 2, stderr: 'rlmesh: unknown command "nodes"; run rlmesh --help\n' });
  });

  it('clusters join writes the Secrets that the agent accepts and the control plane authenticates', async () => {
    const out = join(dir, `secrets-${Math.random().toString(36).slice(2)}.yaml`);
    const r = await rlmesh(['clusters', 'join', '--token', await newToken(), '--api', cp.url, '--ca-file', cp.caFile, '--format', 'k8s-secret', '--out', out]);
    expect(r.stderr).toContain('joined');
    expect(r.status).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const docs = documents(readFileSync(out, 'utf8'));
    expect(docs.map((d) => [d.kind, meta(d).namespace ?? null, meta(d).name, d.type ?? null])).toEqual([
      ['Namespace', null, 'rlmesh-system', null],
      ['Namespace', null, 'rlmesh-runs', null],
      ['Secret', 'rlmesh-system', 'rlmesh-secrets', 'Opaque'],
      ['Secret', 'rlmesh-system', 'rlmesh-registry-pull', 'kubernetes.io/dockerconfigjson'],
      ['Secret', 'rlmesh-runs', 'rlmesh-registry-pull', 'kubernetes.io/dockerconfigjson'],
    ]);
    const control = parseControlSecret(asStored(docs[2]!), 'rlmesh-system', 'rlmesh-secrets');
    if (!control.ok) throw new Error(control.problem);
    expect(control.value.clusterId).toMatch(/^c_/);
    expect(parsePullSecret(asStored(docs[3]!), 'rlmesh-system', 'rlmesh-registry-pull')).toEqual({ ok: true, value: true });
    expect(parsePullSecret(asStored(docs[4]!), 'rlmesh-runs', 'rlmesh-registry-pull')).toEqual({ ok: true, value: true });
    expect(JSON.parse((docs[3]!.stringData as Record<string, string>)['.dockerconfigjson']!)).toHaveProperty(['auths', 'registry.example.test', 'username'], control.value.clusterId);
    expect(r.stdout + r.stderr).not.toContain(control.value.control);

    const s = openSession(cp, control.value.control);
    expect((await s.waitFor('welcome')).sessionId).not.toBe('');
    s.close();
    await s.ended;

    // the token from standard input, the YAML to standard output
    const piped = await rlmesh(['clusters', 'join', '--token', '-', '--api', cp.url, '--ca-file', cp.caFile, '--format', 'k8s-secret', '--observability'], `${await newToken()}\n`);
    expect(piped.status).toBe(0);
    expect(documents(piped.stdout).map((d) => meta(d).name)).toEqual(['rlmesh-system', 'rlmesh-runs', 'rlmesh-secrets', 'rlmesh-registry-pull', 'rlmesh-registry-pull', 'rlmesh-cluster-relay-secret']);
  });

  it('preflight checks the local cluster of the kubeconfig', async () => {
    const values = join(dir, 'values.yaml');
    // a DNS peer that matches nothing: one sure fail, so exit 1
    writeFileSync(
      values,
      'controlPlane:\n  apiHost: localhost\n  registryHost: localhost\nnetwork:\n  dnsPeers:\n    - namespaceSelector:\n        matchLabels: { kubernetes.io/metadata.name: rlmesh-cli-no-such-namespace }\n',
    );
    expect(existsSync(clusterInfo().kubeconfig)).toBe(true);
    const r = await rlmesh(['preflight', '-f', values, '--output', 'json']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(1);
    const report = JSON.parse(r.stdout) as { mode: string; checks: { id: string; verdict: string; found: string; fix: string }[] };
    expect(report.mode).toBe('cli');
    expect(report.checks.map((c) => c.id)).toEqual(CHECK_IDS.filter((id) => !OUTBOUND_CHECK_IDS.includes(id)));
    for (const c of report.checks) expect(['pass', 'warn', 'fail']).toContain(c.verdict);
    expect(report.checks.find((c) => c.id === 'kubernetes-version')).toMatchObject({ verdict: 'pass', found: `Kubernetes ${clusterInfo().kubernetesVersion} (floor 1.34)` });
    expect(report.checks.find((c) => c.id === 'install-rights')!.verdict).toBe('pass');
    expect(report.checks.find((c) => c.id === 'dns-peers')).toMatchObject({ verdict: 'fail', found: expect.stringContaining('rlmesh-cli-no-such-namespace') });
  });
});
