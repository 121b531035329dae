// The rlmesh CLI as a child process against a real control plane on 127.0.0.1.
import { spawn } from 'node:child_process';
import { chmodSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { parseControlSecret, parsePullSecret } from '../agent/credentials.ts';
import { openSession, startTestControlPlane, type TestControlPlane } from '../test/support/control-plane.ts';
import { api } from '../test/support/api.ts';

const MAIN = join(import.meta.dirname, 'main.ts');
let cp: TestControlPlane;
let dir: string;

beforeAll(async () => {
  cp = await startTestControlPlane({ registryHost: 'registry.example.test' });
  dir = mkdtempSync(join(tmpdir(), 'rlmesh-cli-'));
});
afterAll(async () => {
  await cp.close();
  rmSync(cp.dir, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
});

type Run = { status: number | null; stdout: string; stderr: string };

/** Runs a command (asynchronously: the control plane lives in this process); `answer` types into stdin once stdout shows `prompt`. */
function exec(cmd: string, args: string[], input = '', answer?: { prompt: string; text: string }): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let answered = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.stdout.on('data', (d: Buffer) => {
      stdout += String(d);
      if (answer && !answered && stdout.includes(answer.prompt)) {
        answered = true;
        child.stdin.write(answer.text);
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    if (!answer) child.stdin.end(input);
  });
}
const rlmesh = (args: string[], input?: string): Promise<Run> => exec(process.execPath, [MAIN, ...args], input);
const newToken = async (): Promise<string> => String((await api(cp, 'POST', '/v1/clusters', { name: 'gitops' })).body.joinToken);
const joinArgs = (token: string, out: string, extra: string[] = []) => ['clusters', 'join', '--token', token, '--api', cp.url, '--ca-file', cp.caFile, '--format', 'k8s-secret', '--out', out, ...extra];

/** What the apiserver stores for a manifest with stringData. */
function asStored(doc: Record<string, unknown>): k8s.V1Secret {
  const { stringData, ...rest } = doc as unknown as { stringData: Record<string, string> } & k8s.V1Secret;
  return { ...rest, data: Object.fromEntries(Object.entries(stringData).map(([k, v]) => [k, Buffer.from(v).toString('base64')])) };
}
const documents = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as Record<string, unknown>);
const secrets = (file: string) => documents(readFileSync(file, 'utf8')).filter((d) => d.kind === 'Secret');

describe('rlmesh clusters join --format k8s-secret', () => {
  it('writes the control Secret and the pull Secret in both namespaces, which the agent accepts and the control plane authenticates', async () => {
    const token = await newToken();
    const out = join(dir, 'rlmesh-secrets.yaml');
    const r = await rlmesh(joinArgs(token, out));
    expect(r.stderr).toContain('joined');
    expect(r.status).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const docs = secrets(out);
    expect(docs.map((d) => [(d.metadata as k8s.V1ObjectMeta).namespace, (d.metadata as k8s.V1ObjectMeta).name, d.type])).toEqual([
      ['rlmesh-system', 'rlmesh-secrets', 'Opaque'],
      ['rlmesh-system', 'rlmesh-registry-pull', 'kubernetes.io/dockerconfigjson'],
      ['rlmesh-runs', 'rlmesh-registry-pull', 'kubernetes.io/dockerconfigjson'],
    ]);
    const control = parseControlSecret(asStored(docs[0]!), 'rlmesh-system', 'rlmesh-secrets');
    if (!control.ok) throw new Error(control.problem);
    expect(control.value.clusterId).toMatch(/^c_/);
    expect(parsePullSecret(asStored(docs[1]!), 'rlmesh-system', 'rlmesh-registry-pull')).toEqual({ ok: true, value: true });
    expect(parsePullSecret(asStored(docs[2]!), 'rlmesh-runs', 'rlmesh-registry-pull')).toEqual({ ok: true, value: true });
    expect(JSON.parse((docs[1]!.stringData as Record<string, string>)['.dockerconfigjson']!)).toHaveProperty(['auths', 'registry.example.test', 'username'], control.value.clusterId);
    expect(r.stderr + r.stdout).not.toContain(control.value.control);
    // the runs namespace comes first, adoptable by the chart's release (helm install finds it already there)
    const runsNs = documents(readFileSync(out, 'utf8')).find((d) => d.kind === 'Namespace' && (d.metadata as k8s.V1ObjectMeta).name === 'rlmesh-runs')!;
    expect((runsNs.metadata as k8s.V1ObjectMeta).annotations).toMatchObject({ 'meta.helm.sh/release-name': 'rlmesh', 'meta.helm.sh/release-namespace': 'rlmesh-system' });
    expect((runsNs.metadata as k8s.V1ObjectMeta).labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'Helm', 'pod-security.kubernetes.io/enforce': 'restricted' });

    const s = openSession(cp, control.value.control);
    expect((await s.waitFor('welcome')).sessionId).not.toBe('');
    s.close();
    await s.ended;
  });

  it('--out over an existing file readable by others: the file ends with mode 0600', async () => {
    const out = join(dir, 'was-0644.yaml');
    writeFileSync(out, 'old content\n');
    chmodSync(out, 0o644);
    const r = await rlmesh(joinArgs(await newToken(), out));
    expect(r.status, r.stderr).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(secrets(out)).toHaveLength(3);
  });

  it('--out that is a symlink is refused before the join: the file it leads to is untouched and the token still works', async () => {
    const elsewhere = join(dir, 'elsewhere.txt');
    writeFileSync(elsewhere, 'not for credentials\n');
    chmodSync(elsewhere, 0o644);
    const link = join(dir, 'link.yaml');
    symlinkSync(elsewhere, link);
    const token = await newToken();
    const r = await rlmesh(joinArgs(token, link));
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/refusing to write .*link\.yaml: it is a symbolic link.*; remove it or pass another --out; the join token was not used/);
    expect(readFileSync(elsewhere, 'utf8')).toBe('not for credentials\n');
    expect(statSync(elsewhere).mode & 0o777).toBe(0o644);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    const again = await rlmesh(joinArgs(token, join(dir, 'after-refusal.yaml')));
    expect(again.status, again.stderr).toBe(0);
  });

  it('names the Secrets as asked and adds the relay Secret with --observability', async () => {
    const out = join(dir, 'named.yaml');
    const r = await rlmesh(joinArgs(await newToken(), out, ['--observability', '--control-secret', 'my-control', '--pull-secret', 'my-pull']));
    expect(r.status).toBe(0);
    const docs = secrets(out);
    expect(docs.map((d) => (d.metadata as k8s.V1ObjectMeta).name)).toEqual(['my-control', 'my-pull', 'my-pull', 'rlmesh-cluster-relay-secret']);
    expect((docs[3]!.stringData as Record<string, string>)['relay-secret']).toMatch(/^rlm_rs_/);
  });

  it('reads the token from standard input with --token -', async () => {
    const token = await newToken();
    const r = await rlmesh(['clusters', 'join', '--token', '-', '--api', cp.url, '--ca-file', cp.caFile, '--format', 'k8s-secret'], `${token}\n`);
    expect(r.status).toBe(0);
    expect(documents(r.stdout).filter((d) => d.kind === 'Secret')).toHaveLength(3);
  });

  it('prompts for the token in a terminal without echoing it', async () => {
    const token = await newToken();
    const out = join(dir, 'prompted.yaml');
    const cmd = [process.execPath, MAIN, ...joinArgs('-', out)].map((a) => `'${a}'`).join(' ');
    // script(1) gives the CLI a real pseudo-terminal; the token is typed into it
    const r = await exec('script', ['-qec', cmd, '/dev/null'], '', { prompt: 'rlmesh join token (input hidden):', text: `${token}\r` });
    expect(r.stdout).toContain('rlmesh join token (input hidden):');
    expect(r.stdout).not.toContain(token);
    expect(r.status).toBe(0);
    expect(secrets(out)).toHaveLength(3);

    // no --token at all in a terminal prompts the same way
    const out2 = join(dir, 'prompted2.yaml');
    const cmd2 = [process.execPath, MAIN, ...joinArgs('', out2).filter((a) => a !== '--token' && a !== '')].map((a) => `'${a}'`).join(' ');
    const token2 = await newToken();
    const r2 = await exec('script', ['-qec', cmd2, '/dev/null'], '', { prompt: 'rlmesh join token (input hidden):', text: `${token2}\r` });
    expect(r2.stdout).not.toContain(token2);
    expect(r2.status).toBe(0);
    expect(secrets(out2)).toHaveLength(3);
  });

  it('a used, expired or invalid token gives the control plane\'s reason and what to do', async () => {
    const token = await newToken();
    expect((await rlmesh(joinArgs(token, join(dir, 'a.yaml')))).status).toBe(0);
    const used = await rlmesh(joinArgs(token, join(dir, 'b.yaml')));
    expect(used.status).toBe(1);
    expect(used.stderr).toContain('join refused (token_used)');
    expect(used.stderr).toContain('a used or expired token needs a new install command');

    const late = await newToken();
    cp.clock.advance(61 * 60_000);
    const expired = await rlmesh(joinArgs(late, join(dir, 'c.yaml')));
    expect(expired.stderr).toContain('token_expired');

    const bogus = await rlmesh(joinArgs('rlm_jt_short', join(dir, 'd.yaml')));
    expect(bogus.status).toBe(1);
    expect(bogus.stderr).toContain('not a join token');
    for (const r of [used, expired, bogus]) expect(r.stderr).not.toContain('    at '); // no stack traces
  });

  it('an untrusted certificate or an unreachable API says what to pass', async () => {
    const token = await newToken();
    const untrusted = await rlmesh(['clusters', 'join', '--token', token, '--api', cp.url, '--format', 'k8s-secret']);
    expect(untrusted.status).toBe(1);
    expect(untrusted.stderr).toContain('--ca-file');
    const closed = await rlmesh(['clusters', 'join', '--token', token, '--api', 'https://127.0.0.1:1', '--format', 'k8s-secret']);
    expect(closed.stderr).toContain('cannot reach the control plane at https://127.0.0.1:1');
    const noToken = await rlmesh(['clusters', 'join', '--api', cp.url, '--format', 'k8s-secret']);
    expect(noToken.status).toBe(2);
    expect(noToken.stderr).toContain('--token -');
  });

  it('has --help for every command', async () => {
    expect(await rlmesh(['--help'])).toMatchObject({ status: 0, stdout: expect.stringContaining('clusters join') });
    expect(await rlmesh(['clusters', '--help'])).toMatchObject({ status: 0, stdout: expect.stringContaining('join') });
    expect(await rlmesh(['clusters', 'join', '--help'])).toMatchObject({ status: 0, stdout: expect.stringContaining('--format k8s-secret') });
    expect(await rlmesh(['preflight', '--help'])).toMatchObject({ status: 0, stdout: expect.stringContaining('rlmesh preflight') });
    expect(await rlmesh(['nodes'])).toMatchObject({ status: 2, stderr: expect.stringContaining('rlmesh --help') });
    expect(await rlmesh(['clusters', 'join', '--format', 'json'])).toMatchObject({ status: 2, stderr: expect.stringContaining('k8s-secret') });
  });

  it('prints the version of package.json with --version and exits 0', async () => {
    const { version } = JSON.parse(readFileSync(join(import.meta.dirname, '../package.json'), 'utf8')) as { version: string };
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await rlmesh(['--version'])).toEqual({ status: 0, stdout: `${version}\n`, stderr: '' });
    expect((await rlmesh(['--help'])).stdout).toContain('--version');
  });
});
