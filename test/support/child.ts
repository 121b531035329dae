// A program run as a child process without blocking this one (a server the test
// started may live in this process): its exit status and everything it printed.
import { spawn } from 'node:child_process';

export type ChildRun = { status: number | null; stdout: string; stderr: string };

export function runChild(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string; timeoutMs: number }): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
    child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    child.stdin.on('error', () => {}); // EPIPE when it exits without reading (or cannot start)
    child.stdin.end(opts.input ?? '');
  });
}
