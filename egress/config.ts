// The proxy's settings: from the runtime config the chart renders (in the
// cluster), or from command-line flags so it runs on its own:
//
//   node egress/main.ts --listen 127.0.0.1:3128 --allow example.com \
//     --allow '*.example.org' --ports 443,80 --allow-range 198.18.0.0/15 --dns 127.0.0.1:5353
//
// With --config (or RLMESH_CONFIG) the runtime config is the base and flags
// add to it; with neither and no --allow, the chart's mounted config is read.
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { DEFAULT_CONFIG_PATH, loadRuntimeConfig } from '../lib/runtime-config.ts';
import { MOUNTS } from '../lib/fixed-names.ts';

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
  /** the cluster's own pod, Service and node ranges (CIDR): refused whatever else the address is */
  clusterRanges: string[];
  /** more of them, one CIDR per line, re-read while the proxy runs (the agent's ConfigMap rlmesh-cluster-ranges) */
  clusterRangesFile?: string;
  /** resolver servers (`ip` or `ip:port`); empty = the system's resolv.conf servers */
  dns: string[];
  dnsTimeoutMs: number;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  headerTimeoutMs: number;
  maxHeaderBytes: number;
  maxTunnels: number;
  maxTunnelsPerClient: number;
  /** accepted client connections in total, counted from accept (before any header is read) */
  maxConnections: number;
  /** accepted client connections per client address, counted from accept */
  maxConnectionsPerClient: number;
  drainTimeoutMs: number;
}

export const CLUSTER_RANGES_FILE = MOUNTS.clusterRangesFile;

export const USAGE = `usage: rlmesh-runtime egress [--help] [--config FILE] [--listen HOST:PORT] [--allow NAME]... [--ports 443,80]
  [--allow-range CIDR]... [--cluster-range CIDR]... [--cluster-ranges-file FILE] [--dns IP[:PORT]]... [--health-listen HOST:PORT] [--metrics-listen HOST:PORT]
  [--connect-timeout MS] [--idle-timeout MS] [--header-timeout MS] [--max-header-bytes N]
  [--max-tunnels N] [--max-tunnels-per-client N] [--max-connections N] [--max-connections-per-client N]
  [--drain-timeout MS] [--dns-timeout MS]`;

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
      'cluster-range': { type: 'string', multiple: true, default: [] },
      'cluster-ranges-file': { type: 'string' },
      dns: { type: 'string', multiple: true, default: [] },
      'dns-timeout': { type: 'string' },
      'connect-timeout': { type: 'string' },
      'idle-timeout': { type: 'string' },
      'header-timeout': { type: 'string' },
      'max-header-bytes': { type: 'string' },
      'max-tunnels': { type: 'string' },
      'max-tunnels-per-client': { type: 'string' },
      'max-connections': { type: 'string' },
      'max-connections-per-client': { type: 'string' },
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
  const proxyPort = runtime ? listenPortOf(runtime.egress.proxyUrl) : 3128;
  const maxTunnels = positive('max-tunnels', v['max-tunnels'], 10_000);
  const maxTunnelsPerClient = positive('max-tunnels-per-client', v['max-tunnels-per-client'], 512);
  // connections are counted from accept, tunnels once their headers are in: a
  // connection limit below the tunnel limit would hide the tunnel limit's answer
  const maxConnections = atLeast('max-connections', v['max-connections'], 'max-tunnels', maxTunnels);
  const maxConnectionsPerClient = atLeast('max-connections-per-client', v['max-connections-per-client'], 'max-tunnels-per-client', maxTunnelsPerClient);
  // in the cluster, ConfigMap rlmesh-cluster-ranges as the chart mounts it (templates/egress-proxy.yaml)
  const clusterRangesFile = v['cluster-ranges-file'] ?? (runtime ? CLUSTER_RANGES_FILE : undefined);
  return {
    listen: hostPort('listen', v.listen ?? `0.0.0.0:${proxyPort}`),
    healthListen: hostPort('health-listen', v['health-listen'] ?? `0.0.0.0:${runtime?.ports.health ?? 8081}`),
    metricsListen: hostPort('metrics-listen', v['metrics-listen'] ?? `0.0.0.0:${runtime?.ports.metrics ?? 9090}`),
    allow: [...(runtime?.egress.allowedDomains ?? []), ...v.allow],
    ports,
    allowRanges: [...(runtime?.egress.allowRanges ?? []), ...v['allow-range']],
    clusterRanges: [...(runtime?.egress.clusterRanges ?? []), ...v['cluster-range'], ...kubernetesServiceRange(env)],
    ...(clusterRangesFile ? { clusterRangesFile } : {}),
    dns: v.dns,
    dnsTimeoutMs: positive('dns-timeout', v['dns-timeout'], 5_000),
    connectTimeoutMs: positive('connect-timeout', v['connect-timeout'], 10_000),
    idleTimeoutMs: positive('idle-timeout', v['idle-timeout'], 300_000),
    headerTimeoutMs: positive('header-timeout', v['header-timeout'], 10_000),
    maxHeaderBytes: positive('max-header-bytes', v['max-header-bytes'], 16_384),
    maxTunnels,
    maxTunnelsPerClient,
    maxConnections,
    maxConnectionsPerClient,
    drainTimeoutMs: positive('drain-timeout', v['drain-timeout'], 25_000),
  };
}

/**
 * The port to listen on for a proxy URL. `new URL()` leaves `port` empty when
 * it is the scheme's default, so `http://…:80` means 80 (not a fallback).
 */
export function listenPortOf(proxyUrl: string): number {
  let url: URL;
  try {
    url = new URL(proxyUrl);
  } catch {
    throw new Error(`egress.proxyUrl '${proxyUrl}' in the runtime config is not a URL; it should be http://<service>:<egress.port>`);
  }
  if (url.protocol !== 'http:') {
    throw new Error(`egress.proxyUrl '${proxyUrl}' in the runtime config is not http://: the egress proxy speaks plain HTTP (TLS passes through CONNECT)`);
  }
  return url.port === '' ? 80 : Number(url.port);
}

/** Connection limits default to their tunnel limit plus a quarter, for connections still sending headers or idle between requests. */
function atLeast(flag: string, text: string | undefined, floorFlag: string, floor: number): number {
  const n = positive(flag, text, Math.ceil(floor * 1.25));
  if (n < floor) {
    throw new Error(`--${flag} ${n} is below --${floorFlag} ${floor}: every tunnel is also a connection; raise --${flag} or lower --${floorFlag}`);
  }
  return n;
}

/**
 * Kubernetes gives every pod the `kubernetes` Service's ClusterIP in
 * KUBERNETES_SERVICE_HOST (with or without a ServiceAccount token): the API
 * server, an address of the cluster's Service range. The range's width is not
 * exposed there, so only that address is added.
 */
function kubernetesServiceRange(env: NodeJS.ProcessEnv): string[] {
  const host = env.KUBERNETES_SERVICE_HOST?.trim() ?? '';
  const family = isIP(host);
  return family === 0 ? [] : [`${host}/${family === 4 ? 32 : 128}`];
}
