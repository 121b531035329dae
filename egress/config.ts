// The proxy's settings: from the runtime config the chart renders (in the
// cluster), or from command-line flags so it runs on its own:
//
//   node egress/main.ts --listen 127.0.0.1:3128 --allow example.com \
//     --allow '*.example.org' --ports 443,80 --allow-range 198.18.0.0/15 --dns 127.0.0.1:5353
//
// With --config (or RLMESH_CONFIG) the runtime config is the base and flags
// add to it; with neither and no --allow, the chart's mounted config is read.
import { parseArgs } from 'node:util';
import { DEFAULT_CONFIG_PATH, loadRuntimeConfig } from '../lib/runtime-config.ts';

export interface HostPort {
  host: string;
  port: number;
}

export interface EgressConfig {
  listen: HostPort;
  healthListen: HostPort;
  metricsListen: HostPort;
  allow: string[];
  ports: number[];
  allowRanges: string[];
  /** resolver servers (`ip` or `ip:port`); empty = the system's resolv.conf servers */
  dns: string[];
  dnsTimeoutMs: number;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  headerTimeoutMs: number;
  maxHeaderBytes: number;
  maxTunnels: number;
  maxTunnelsPerClient: number;
  drainTimeoutMs: number;
}

export const USAGE = `usage: rlmesh-runtime egress [--help] [--config FILE] [--listen HOST:PORT] [--allow NAME]... [--ports 443,80]
  [--allow-range CIDR]... [--dns IP[:PORT]]... [--health-listen HOST:PORT] [--metrics-listen HOST:PORT]
  [--connect-timeout MS] [--idle-timeout MS] [--header-timeout MS] [--max-header-bytes N]
  [--max-tunnels N] [--max-tunnels-per-client N] [--drain-timeout MS] [--dns-timeout MS]`;

function hostPort(flag: string, text: string): HostPort {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = Number(m?.[3]);
  if (!m || !(port >= 0 && port <= 65535)) throw new Error(`--${flag} '${text}' is not HOST:PORT (e.g. 127.0.0.1:3128 or [::1]:3128)`);
  return { host: m[1] ?? m[2]!, port };
}

function positive(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${flag} '${text}' must be a positive whole number`);
  return n;
}

export function wantsHelp(argv: string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

export function parseConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): EgressConfig {
  const { values: v } = parseArgs({
    args: argv,
    strict: true,
    options: {
      config: { type: 'string' },
      help: { type: 'boolean', default: false },
      listen: { type: 'string' },
      'health-listen': { type: 'string' },
      'metrics-listen': { type: 'string' },
      allow: { type: 'string', multiple: true, default: [] },
      ports: { type: 'string' },
      'allow-range': { type: 'string', multiple: true, default: [] },
      dns: { type: 'string', multiple: true, default: [] },
      'dns-timeout': { type: 'string' },
      'connect-timeout': { type: 'string' },
      'idle-timeout': { type: 'string' },
      'header-timeout': { type: 'string' },
      'max-header-bytes': { type: 'string' },
      'max-tunnels': { type: 'string' },
      'max-tunnels-per-client': { type: 'string' },
      'drain-timeout': { type: 'string' },
    },
  });
  const configPath = v.config ?? env.RLMESH_CONFIG ?? (v.allow.length === 0 ? DEFAULT_CONFIG_PATH : undefined);
  const runtime = configPath === undefined ? undefined : loadRuntimeConfig(configPath);

  let ports = runtime?.egress.allowedPorts ?? [443];
  if (v.ports !== undefined) {
    ports = v.ports.split(',').map((p) => {
      const n = Number(p.trim());
      if (!Number.isInteger(n) || n < 1 || n > 65535) throw new Error(`--ports '${v.ports}' must list ports from 1 to 65535, e.g. 443,80`);
      return n;
    });
  }
  // in the cluster the proxy listens on the port of the proxy URL the chart hands to evaluation pods
  const proxyPort = runtime ? (new URL(runtime.egress.proxyUrl).port || '3128') : '3128';
  return {
    listen: hostPort('listen', v.listen ?? `0.0.0.0:${proxyPort}`),
    healthListen: hostPort('health-listen', v['health-listen'] ?? `0.0.0.0:${runtime?.ports.health ?? 8081}`),
    metricsListen: hostPort('metrics-listen', v['metrics-listen'] ?? `0.0.0.0:${runtime?.ports.metrics ?? 9090}`),
    allow: [...(runtime?.egress.allowedDomains ?? []), ...v.allow],
    ports,
    allowRanges: [...(runtime?.egress.allowRanges ?? []), ...v['allow-range']],
    dns: v.dns,
    dnsTimeoutMs: positive('dns-timeout', v['dns-timeout'], 5_000),
    connectTimeoutMs: positive('connect-timeout', v['connect-timeout'], 10_000),
    idleTimeoutMs: positive('idle-timeout', v['idle-timeout'], 300_000),
    headerTimeoutMs: positive('header-timeout', v['header-timeout'], 10_000),
    maxHeaderBytes: positive('max-header-bytes', v['max-header-bytes'], 16_384),
    maxTunnels: positive('max-tunnels', v['max-tunnels'], 10_000),
    maxTunnelsPerClient: positive('max-tunnels-per-client', v['max-tunnels-per-client'], 512),
    drainTimeoutMs: positive('drain-timeout', v['drain-timeout'], 25_000),
  };
}
