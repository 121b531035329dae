// controlplane/main.ts as a child process, the way scripts and the agent's
// tests start it: one JSON line on stdout when ready.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, expect, it } from 'vitest';
import { api } from '../test/support/api.ts';

type Ready = { url: string; caFile: string; adminToken: string; grpc: { host: string; port: number; tls: boolean }; dbFile: string };

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function startMain(args: string[]): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'main.ts'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += String(d)));
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once('line', (line) => resolve({ child, ready: JSON.parse(line) as Ready }));
    child.once('exit', (code) => reject(new Error(`control plane exited ${code} before it was ready: ${stderr}`)));
  });
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

it('prints {url, caFile, adminToken} when ready and keeps CA, admin token and state across restarts', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-cp-main-'));
  dirs.push(dir);
  const args = ['--data-dir', join(dir, 'data'), '--listen', '127.0.0.1:0', '--generate-tls', join(dir, 'tls'), '--test-clock', '--ping-interval', '1'];
  const first = await startMain(args);
  expect(first.ready.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  expect(first.ready.adminToken).toMatch(/^rlm_admin_/);
  expect(first.ready.grpc).toEqual({ host: '127.0.0.1', port: Number(new URL(first.ready.url).port), tls: true });
  const ca = readFileSync(first.ready.caFile, 'utf8');
  const cp1 = { url: first.ready.url, caFile: first.ready.caFile, adminToken: first.ready.adminToken };
  const created = await api(cp1, 'POST', '/v1/clusters', { name: 'restart-me' });
  expect(created.status).toBe(201);

  // the test clock moves time for expiry tests run against the child process
  const moved = await api(cp1, 'POST', '/v1/test/clock/advance', { ms: 61 * 60_000 });
  expect(moved.status).toBe(200);
  const expired = await api(cp1, 'POST', '/v1/clusters/join', { token: created.body.joinToken }, false);
  expect(expired.body.code).toBe('token_expired');
  expect(await stop(first.child)).toBe(0);

  const second = await startMain(args);
  expect(second.ready.adminToken).toBe(first.ready.adminToken);
  expect(readFileSync(second.ready.caFile, 'utf8')).toBe(ca);
  const list = await api({ url: second.ready.url, caFile: second.ready.caFile, adminToken: second.ready.adminToken }, 'GET', '/v1/clusters');
  expect(list.body.clusters).toMatchObject([{ id: created.body.clusterId, name: 'restart-me', status: 'Pending' }]);
  expect(await stop(second.child)).toBe(0);
});

it('refuses to start without TLS, saying what to pass', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-cp-main-'));
  dirs.push(dir);
  await expect(startMain(['--data-dir', dir, '--listen', '127.0.0.1:0'])).rejects.toThrow(/--generate-tls <dir>/);
});
