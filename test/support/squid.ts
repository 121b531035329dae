// Debian's Squid as the corporate proxy of the tests: basic auth required
// (basic_ncsa_auth over an htpasswd file), every CONNECT by an authenticated
// client allowed (but to the ranges a test makes it refuse, as a corporate
// proxy's rules for private destinations do), names resolved from a hosts file
// of the test's own, and an access log the tests read to see each connection.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { until } from './until.ts';
import { tempDir } from './temp.ts';

export type Squid = {
  /** http://host:port, no credentials */
  url: string;
  username: string;
  password: string;
  /** lines of the access log (squid's native format: time, elapsed, client, code/status, bytes, method, URL, user, ...) */
  accessLog(): string[];
  stop(): Promise<void>;
};

export type SquidOptions = {
  listen: { host: string; port: number };
  /** name → address, the only names Squid resolves */
  hosts: Record<string, string>;
  username?: string;
  password?: string;
  /** CIDRs Squid refuses to connect to (403, TCP_DENIED), whoever asks: a corporate proxy that refuses private destinations */
  refuse?: string[];
};

const NCSA_AUTH = '/usr/lib/squid/basic_ncsa_auth';

export async function startSquid(o: SquidOptions): Promise<Squid> {
  const username = o.username ?? 'platform-team';
  const password = o.password ?? execFileSync('openssl', ['rand', '-hex', '12'], { encoding: 'utf8' }).trim();
  const work = tempDir('rlmesh-squid-');
  // Squid drops to the proxy user: it must read the configuration and write the logs
  chmodSync(work, 0o777);
  const hash = execFileSync('openssl', ['passwd', '-apr1', '-stdin'], { input: password, encoding: 'utf8' }).trim();
  writeFileSync(join(work, 'passwd'), `${username}:${hash}\n`, { mode: 0o644 });
  writeFileSync(join(work, 'hosts'), Object.entries(o.hosts).map(([name, address]) => `${address} ${name}\n`).join(''), { mode: 0o644 });
  writeFileSync(
    join(work, 'squid.conf'),
    [
      `http_port ${o.listen.host}:${o.listen.port}`,
      `auth_param basic program ${NCSA_AUTH} ${join(work, 'passwd')}`,
      'auth_param basic children 2',
      'auth_param basic realm corporate proxy',
      'acl authenticated proxy_auth REQUIRED',
      ...(o.refuse?.length ? [`acl refused_destinations dst ${o.refuse.join(' ')}`, 'http_access deny refused_destinations'] : []),
      'http_access allow authenticated',
      'http_access deny all',
      `hosts_file ${join(work, 'hosts')}`,
      // nothing outside the hosts file resolves
      'dns_nameservers 127.0.0.1',
      'cache deny all',
      'cache_mem 8 MB',
      `access_log stdio:${join(work, 'access.log')}`,
      `cache_log ${join(work, 'cache.log')}`,
      `pid_filename ${join(work, 'squid.pid')}`,
      `coredump_dir ${work}`,
      'shutdown_lifetime 1 second',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const squid: ChildProcess = spawn('squid', ['-N', '-f', join(work, 'squid.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  squid.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  // a squid that never listens takes its folder with it
  const started = until(
    `squid listening on ${o.listen.host}:${o.listen.port}`,
    async () => {
      if (squid.exitCode !== null) throw new Error(`squid exited with ${squid.exitCode}: ${stderr}${existsSync(join(work, 'cache.log')) ? readFileSync(join(work, 'cache.log'), 'utf8') : ''}`);
      return new Promise<boolean>((resolve) => {
        const s = connect(o.listen.port, o.listen.host, () => resolve(s.destroy() && true)).once('error', () => resolve(false));
      });
    },
    { timeoutMs: 20_000 },
  );
  await started.catch((err: unknown) => {
    squid.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
    throw err;
  });
  return {
    url: `http://${o.listen.host}:${o.listen.port}`,
    username,
    password,
    accessLog: () => (existsSync(join(work, 'access.log')) ? readFileSync(join(work, 'access.log'), 'utf8').split('\n').filter(Boolean) : []),
    stop: async () => {
      if (squid.exitCode === null) {
        const exited = new Promise((r) => squid.once('exit', r));
        squid.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (squid.exitCode === null) squid.kill('SIGKILL');
      }
      rmSync(work, { recursive: true, force: true });
    },
  };
}
