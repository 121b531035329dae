import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseIntervalSeconds } from './interval.ts';
import { tempDir } from '../test/support/temp.ts';

describe('--interval-seconds', () => {
  it('takes whole seconds', () => {
    expect(parseIntervalSeconds('600')).toBe(600_000);
    expect(parseIntervalSeconds('1')).toBe(1_000);
    expect(parseIntervalSeconds(' 30 ')).toBe(30_000);
  });

  it.each(['10m', '1h', '', '0', '-5', '1.5', '1e3', 'NaN', 'Infinity', '0x10', '99999999'])('refuses %j, naming the flag and what to write', (text) => {
    expect(() => parseIntervalSeconds(text)).toThrow(/^--interval-seconds '.*' is not a whole number of seconds from 1 to \d+; write the seconds alone, e\.g\. --interval-seconds 600/);
  });

  it('the program exits 2 at start-up instead of patching its node in a loop', async () => {
    // a kubeconfig whose API server is a closed loopback port: a loop would log one failed attempt after another
    const dir = tempDir('gpu-discovery-');
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
      clusters: [{ name: 'c', cluster: { server: 'http://127.0.0.1:9' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
      users: [{ name: 'u', user: { token: 'x' } }],
    }));
    const child = spawn(process.execPath, [join(import.meta.dirname, 'main.ts'), '--interval-seconds=10m', '--sysfs-root', dir], {
      env: { ...process.env, NODE_NAME: 'node-1', KUBECONFIG: kubeconfig },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 8_000);
    const [code] = (await once(child, 'exit')) as [number | null];
    clearTimeout(timer);
    expect(stdout).not.toContain('cannot label the node');
    expect(code).toBe(2);
    expect(stderr).toContain("--interval-seconds '10m' is not a whole number of seconds");
  });
});
