// rlmesh reference control plane: a real (if small) platform side for local
// runs, tests and self-hosting. Prints one JSON line {url, caFile, adminToken,
// …} on stdout when it is ready; logs go to stderr. See controlplane/README.md.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { REDACT_PATHS } from '../lib/logger.ts';
import { mint, PREFIX, sha256Hex } from './secrets.ts';
import { startControlPlane } from './server.ts';
import type { Clock } from './store.ts';
import { ensureTls, readTls } from './tls.ts';
import { errorMessage } from '../lib/error-fields.ts';

const HELP = `rlmesh reference control plane

Usage: rlmesh-runtime controlplane --data-dir <dir> [options]

  --data-dir <dir>            where state lives (controlplane.db, admin-token); created if missing
  --listen <host:port>        address to listen on (default 127.0.0.1:8443; port 0 picks a free one)
  --generate-tls <dir>        make (or reuse) a CA and a server certificate in <dir>: ca.crt, tls.crt, tls.key
  --tls-host <name>           extra DNS name or IP for the generated certificate (repeatable)
  --tls-cert <file>           server certificate (PEM), instead of --generate-tls
  --tls-key <file>            server private key (PEM), with --tls-cert
  --ca-file <file>            CA that signed --tls-cert, reported as caFile in the ready line
  --admin-token <token>       bearer token of the admin API (default: $RLMESH_ADMIN_TOKEN, else one kept in <data-dir>/admin-token)
  --advertise-host <host>     gRPC host /v1/info announces (default: the listen host)
  --advertise-port <port>     gRPC port /v1/info announces (default: the listen port)
  --registry-host <host>      registry the pull credential is for (default registry.rlmesh.dev)
  --registry-stores-dir <dir> announce this store to the registry's token service there (controlplane/registry-auth)
  --output-host <host>        output host /v1/info and each session announce (repeatable; PUT /v1/output-hosts changes them)
  --chart-ref <oci ref>       chart in install commands (default oci://registry.rlmesh.dev/rlmesh/charts/rlmesh-runtime)
  --chart-version <v>         chart version in install commands (default: this package's version)
  --ping-interval <seconds>   session ping interval (default 15)
  --silence-timeout <seconds> close a session whose agent sent nothing for this long (default 45)
  --test-clock                enable POST /v1/test/clock/advance {ms} (tests of expiry and overlap only)
  --test-ignore-drain         send new evaluations to a draining cluster anyway, as a buggy or hostile
                              platform would (tests of the cluster's own drain only; never in production)
  -h, --help                  this help

When ready it prints one JSON line on stdout:
  {"url":"https://127.0.0.1:8443","caFile":"…/ca.crt","adminToken":"rlm_admin_…","grpc":{…},"dbFile":"…"}
`;

function fail(message: string): never {
  process.stderr.write(`rlmesh control plane: ${message}\n`);
  process.exit(2);
}

function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(value);
  if (!m) fail(`--listen ${value} is not host:port (e.g. 127.0.0.1:8443 or [::1]:0)`);
  return { host: (m[1] ?? m[2])!, port: Number(m[3]) };
}

function positive(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) fail(`${flag} ${value} must be a positive number of seconds`);
  return n;
}

async function main(): Promise<void> {
  let args;
  try {
    args = parseArgs({
      options: {
        'data-dir': { type: 'string' },
        listen: { type: 'string', default: '127.0.0.1:8443' },
        'generate-tls': { type: 'string' },
        'tls-host': { type: 'string', multiple: true, default: [] },
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        'ca-file': { type: 'string' },
        'admin-token': { type: 'string' },
        'advertise-host': { type: 'string' },
        'advertise-port': { type: 'string' },
        'registry-host': { type: 'string' },
        'registry-stores-dir': { type: 'string' },
        'output-host': { type: 'string', multiple: true, default: [] },
        'chart-ref': { type: 'string' },
        'chart-version': { type: 'string' },
        'ping-interval': { type: 'string' },
        'silence-timeout': { type: 'string' },
        'test-clock': { type: 'boolean', default: false },
        'test-ignore-drain': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    fail(`${errorMessage(err)}; see --help`);
  }
  if (args.help) {
    process.stdout.write(HELP);
    return;
  }
  const dataDir = args['data-dir'];
  if (!dataDir) fail('--data-dir <dir> is required (state persists there across restarts); see --help');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const { host, port } = parseListen(args.listen);

  let tls: { cert: string; key: string; caFile: string | null };
  if (args['generate-tls']) {
    const t = await ensureTls(resolve(args['generate-tls']), args['tls-host']);
    tls = { cert: t.cert, key: t.key, caFile: t.caFile };
  } else if (args['tls-cert'] && args['tls-key']) {
    const caFile = args['ca-file'] ? resolve(args['ca-file']) : undefined;
    const t = readTls({ certFile: args['tls-cert'], keyFile: args['tls-key'], caFile: caFile ?? '' });
    tls = { cert: t.cert, key: t.key, caFile: caFile ?? null };
  } else {
    fail('TLS is required: pass --generate-tls <dir> for a local CA, or --tls-cert <file> --tls-key <file>');
  }

  const adminToken = args['admin-token'] ?? process.env.RLMESH_ADMIN_TOKEN ?? persistedAdminToken(dataDir);

  let offsetMs = 0;
  const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };
  const log = pino({ level: process.env.LOG_LEVEL ?? 'info', base: { component: 'controlplane' }, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination(2));

  const advertisePort = args['advertise-port'] === undefined ? undefined : Number(args['advertise-port']);
  const cp = await startControlPlane({
    dbFile: join(dataDir, 'controlplane.db'),
    tls,
    host,
    port,
    adminToken,
    log,
    ...(args['advertise-host'] ? { advertiseHost: args['advertise-host'] } : {}),
    ...(advertisePort !== undefined ? { advertisePort } : {}),
    ...(args['registry-host'] ? { registryHost: args['registry-host'] } : {}),
    outputHosts: args['output-host'],
    ...(args['chart-ref'] ? { chartRef: args['chart-ref'] } : {}),
    ...(args['chart-version'] ? { chartVersion: args['chart-version'] } : {}),
    pingIntervalMs: positive('--ping-interval', args['ping-interval'], 15) * 1000,
    silenceTimeoutMs: positive('--silence-timeout', args['silence-timeout'], 45) * 1000,
    clock,
    ...(args['test-clock'] ? { advanceClock: (ms: number) => ((offsetMs += ms), clock.now()) } : {}),
    ...(args['test-ignore-drain'] ? { ignoreDrain: true } : {}),
  }).catch((err: Error) => fail(`cannot start: ${err.message}`));

  const info = await fetchInfo(cp.url, tls.caFile);
  if (args['registry-stores-dir']) announceStore(resolve(args['registry-stores-dir']), join(resolve(dataDir), 'controlplane.db'));
  process.stdout.write(`${JSON.stringify({ url: cp.url, caFile: tls.caFile, adminToken, grpc: info.grpc, registryHost: info.registryHost, dbFile: join(resolve(dataDir), 'controlplane.db') })}\n`);

  const stop = (signal: string): void => {
    log.info({ signal }, 'shutting down');
    void cp.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

/** The admin token survives restarts so scripts that read it once keep working. */
function persistedAdminToken(dataDir: string): string {
  const file = join(dataDir, 'admin-token');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const token = mint(PREFIX.admin);
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return token;
}

/** The registry's token service judges pull credentials and join tokens by this store (read-only); the file names it. */
function announceStore(dir: string, dbFile: string): void {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${sha256Hex(dbFile).slice(0, 16)}.json`);
  writeFileSync(`${file}.tmp`, JSON.stringify({ db: dbFile }));
  renameSync(`${file}.tmp`, file);
}

/** Reads /v1/info from the running server: proves it answers before the ready line goes out. */
async function fetchInfo(url: string, caFile: string | null): Promise<{ grpc: unknown; registryHost: string }> {
  const { Agent, request } = await import('undici');
  const dispatcher = new Agent({ connect: caFile ? { ca: readFileSync(caFile, 'utf8') } : {} });
  const res = await request(`${url}/v1/info`, { dispatcher });
  const body = (await res.body.json()) as { grpc: unknown; registryHost: string };
  await dispatcher.close();
  return body;
}

await main();
