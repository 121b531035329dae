// A registry of the operator's own, beside the platform's: a second instance
// of the registry binary (Debian's docker-registry) that asks every client for
// Basic credentials from an htpasswd file, as a private corporate registry
// does. It listens on the host's address of the real nodes' bridge, where
// their containerd reaches it over plain HTTP through a certs.d entry
// (addRegistryHost in test/cluster/real-node.ts).
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { stopper } from './runtime.ts';
import { until } from './until.ts';
import type { RegistryCredentials } from './registry.ts';

export type PrivateRegistry = {
  /** host:port clients dial */
  address: string;
  creds: RegistryCredentials;
  /** pushes an OCI layout's tag to <repository>, keeping its digest */
  push(layout: { layout: string; tag: string }, repository: string): void;
  /** the registry's access log so far: one line per request, with the user it authenticated */
  log(): string;
  stop(): Promise<void>;
};

/** A free TCP port on `host`. */
async function freePortOn(host: string): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, host, resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** `anonymous`: no credentials asked (a pull-through mirror that serves any client of the network), `creds` unused. */
export async function startPrivateRegistry(host: string, opts: { anonymous?: boolean } = {}): Promise<PrivateRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-private-registry-'));
  const creds = { username: 'corp-puller', password: randomBytes(18).toString('base64url') };
  // bcrypt, the only scheme the registry's htpasswd accepts (htpasswd: Debian's apache2-utils)
  writeFileSync(join(dir, 'htpasswd'), execFileSync('htpasswd', ['-Bbn', creds.username, creds.password], { encoding: 'utf8' }));
  mkdirSync(join(dir, 'data'));
  const address = `${host}:${await freePortOn(host)}`;
  writeFileSync(
    join(dir, 'registry.yml'),
    [
      'version: 0.1',
      'log: { level: info, accesslog: { disabled: false } }',
      `storage: { filesystem: { rootdirectory: "${join(dir, 'data')}" } }`,
      `http: { addr: "${address}" }`,
      ...(opts.anonymous ? [] : [`auth: { htpasswd: { realm: corp-registry, path: "${join(dir, 'htpasswd')}" } }`]),
      '',
    ].join('\n'),
  );
  const logFile = join(dir, 'registry.log');
  const out = openSync(logFile, 'a');
  const proc = spawn('docker-registry', ['serve', join(dir, 'registry.yml')], { stdio: ['ignore', out, out] });
  const stop = stopper(proc);
  const log = () => readFileSync(logFile, 'utf8');
  await until(`the private registry on ${address}`, async () => (await fetch(`http://${address}/v2/`).catch(() => undefined))?.status === (opts.anonymous ? 200 : 401), { timeoutMs: 20_000, context: () => log() });
  return {
    address,
    creds,
    push(layout, repository) {
      execFileSync('skopeo', ['copy', '--quiet', '--dest-tls-verify=false', '--dest-creds', `${creds.username}:${creds.password}`, '--preserve-digests', `oci:${layout.layout}:${layout.tag}`, `docker://${address}/${repository}:${layout.tag}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    },
    log,
    async stop() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
