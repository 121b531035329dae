// The proxy's settings: from the runtime config the chart renders (in the
// cluster), or from command-line flags so it runs on its own:
//
//   RLMESH_LISTEN_HOST=127.0.0.1 node egress/main.ts --port 3128 --allow example.com \
//     --allow '*.example.org' --ports 443,80 --allow-range 198.18.0.0/15 --dns 127.0.0.1:5353
//
// With --config (or RLMESH_CONFIG) the runtime config is the base and flags
// add to it; with neither and no --allow, the chart's mounted config is read.
// As for every component: the listen host is RLMESH_LISTEN_HOST (default every
// interface), and every duration flag names its unit. The memory limit, which
// sizes the relay buffers and the default tunnel limits, is --memory-limit-mib,
// else RLMESH_MEMORY_LIMIT_MIB (the chart sets it from the container's
// limits.memory), else 256.
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import type { OutboundProxySettings } from '../lib/outbound-proxy.ts';
import { DEFAULT_CONFIG_PATH, loadRuntimeConfig, type RuntimeConfig } from '../lib/runtime-config.ts';
import { MOUNTS } from '../lib/fixed-names.ts';
import { listenHost } from '../lib/listen-address.ts';
import { bufferLimits, MiB, type BufferLimits } from './buffer-budget.ts';

export interface HostPort {
  /** undefined: every interface, IPv4 and IPv6 (lib/listen-address.ts) */
  host?: string;
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
  /** the platform's output hosts, one per line, re-read while the proxy runs (the agent's ConfigMap rlmesh-output-hosts) */
  outputHostsFile?: string;
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
  /** relay buffer budget and shares, from the memory limit */
  buffers: BufferLimits;
  /** the corporate proxy upstream connections go through (controlPlane.proxy, or --parent-proxy); unset: direct */
  parentProxy?: OutboundProxySettings;
}

export const MEMORY_LIMIT_ENV = 'RLMESH_MEMORY_LIMIT_MIB';
const DEFAULT_MEMORY_LIMIT_MIB = 256;

export const CLUSTER_RANGES_FILE = MOUNTS.clusterRangesFile;
export const OUTPUT_HOSTS_FILE = MOUNTS.outputHostsFile;

export const USAGE = `usage: rlmesh-runtime egress [--help] [--config FILE] [--port N] [--allow NAME]... [--ports 443,80]
  [--allow-range CIDR]... [--cluster-range CIDR]... [--cluster-ranges-file FILE] [--output-hosts-file FILE] [--dns IP[:PORT]]... [--health-port N] [--metrics-port N]
  [--connect-timeout-ms MS] [--idle-timeout-ms MS] [--header-timeout-ms MS] [--max-header-bytes N]
  [--max-tunnels N] [--max-tunnels-per-client N] [--max-connections N] [--max-connections-per-client N]
  [--drain-timeout-ms MS] [--dns-timeout-ms MS] [--memory-limit-mib N]
  [--parent-proxy URL [--parent-proxy-credentials DIR] [--no-proxy LIST] [--parent-proxy-pass-unresolved-names]]
The listen host is RLMESH_LISTEN_HOST (default every interface, IPv4 and IPv6); the memory limit defaults to $RLMESH_MEMORY_LIMIT_MIB, else 256.`;

function port(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!/^\d{1,5}$/.test(text) || n > 65535) throw new Error(`--${flag} '${text}' is not a port from 0 to 65535 (0: any free port)`);
  return n;
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
      port: { type: 'string' },
      'health-port': { type: 'string' },
      'metrics-port': { type: 'string' },
      allow: { type: 'string', multiple: true, default: [] },
      ports: { type: 'string' },
      'allow-range': { type: 'string', multiple: true, default: [] },
      'cluster-range': { type: 'string', multiple: true, default: [] },
      'cluster-ranges-file': { type: 'string' },
      'output-hosts-file': { type: 'string' },
      dns: { type: 'string', multiple: true, default: [] },
      'dns-timeout-ms': { type: 'string' },
      'connect-timeout-ms': { type: 'string' },
      'idle-timeout-ms': { type: 'string' },
      'header-timeout-ms': { type: 'string' },
      'max-header-bytes': { type: 'string' },
      'max-tunnels': { type: 'string' },
      'max-tunnels-per-client': { type: 'string' },
      'max-connections': { type: 'string' },
      'max-connections-per-client': { type: 'string' },
      'drain-timeout-ms': { type: 'string' },
      'memory-limit-mib': { type: 'string' },
      'parent-proxy': { type: 'string' },
      'parent-proxy-credentials': { type: 'string' },
      'no-proxy': { type: 'string' },
      'parent-proxy-pass-unresolved-names': { type: 'boolean' },
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
  const buffers = bufferLimits(memoryLimitMib(v['memory-limit-mib'], env) * MiB);
  const maxTunnels = positive('max-tunnels', v['max-tunnels'], buffers.maxTunnels);
  const maxTunnelsPerClient = positive('max-tunnels-per-client', v['max-tunnels-per-client'], buffers.maxTunnelsPerClient);
  // connections are counted from accept, tunnels once their headers are in: a
  // connection limit below the tunnel limit would hide the tunnel limit's answer
  const maxConnections = atLeast('max-connections', v['max-connections'], 'max-tunnels', maxTunnels);
  const maxConnectionsPerClient = atLeast('max-connections-per-client', v['max-connections-per-client'], 'max-tunnels-per-client', maxTunnelsPerClient);
  // in the cluster, ConfigMap rlmesh-cluster-ranges as the chart mounts it (templates/egress-proxy.yaml)
  const clusterRangesFile = v['cluster-ranges-file'] ?? (runtime ? CLUSTER_RANGES_FILE : undefined);
  // and ConfigMap rlmesh-output-hosts
  const outputHostsFile = v['output-hosts-file'] ?? (runtime ? OUTPUT_HOSTS_FILE : undefined);
  const host = listenHost(env);
  const at = host === undefined ? {} : { host };
  const parentProxy = parentProxyOf(runtime, v['parent-proxy'], v['parent-proxy-credentials'], v['no-proxy'], v['parent-proxy-pass-unresolved-names']);
  return {
    listen: { ...at, port: port('port', v.port, proxyPort) },
    healthListen: { ...at, port: port('health-port', v['health-port'], runtime?.ports.health ?? 8081) },
    metricsListen: { ...at, port: port('metrics-port', v['metrics-port'], runtime?.ports.metrics ?? 9090) },
    allow: [...(runtime?.egress.allowedDomains ?? []), ...v.allow],
    ports,
    allowRanges: [...(runtime?.egress.allowRanges ?? []), ...v['allow-range']],
    clusterRanges: [...(runtime?.egress.clusterRanges ?? []), ...v['cluster-range'], ...kubernetesServiceRange(env)],
    ...(clusterRangesFile ? { clusterRangesFile } : {}),
    ...(outputHostsFile ? { outputHostsFile } : {}),
    dns: v.dns,
    dnsTimeoutMs: positive('dns-timeout-ms', v['dns-timeout-ms'], 5_000),
    connectTimeoutMs: positive('connect-timeout-ms', v['connect-timeout-ms'], 10_000),
    idleTimeoutMs: positive('idle-timeout-ms', v['idle-timeout-ms'], 300_000),
    headerTimeoutMs: positive('header-timeout-ms', v['header-timeout-ms'], 10_000),
    maxHeaderBytes: positive('max-header-bytes', v['max-header-bytes'], 16_384),
    maxTunnels,
    maxTunnelsPerClient,
    maxConnections,
    maxConnectionsPerClient,
    drainTimeoutMs: positive('drain-timeout-ms', v['drain-timeout-ms'], 25_000),
    buffers,
    ...(parentProxy ? { parentProxy } : {}),
  };
}

/**
 * The parent proxy: controlPlane.proxy from the runtime config, or the flags.
 * --parent-proxy replaces the configured one with its credentials: the
 * Secret's username and password are never sent to a proxy named elsewhere.
 */
function parentProxyOf(runtime: RuntimeConfig | undefined, url?: string, credentialsDir?: string, noProxy?: string, passUnresolvedNames?: boolean): OutboundProxySettings | undefined {
  const configured = runtime?.controlPlane.proxy;
  const base = url === undefined ? configured : { url, noProxy: [] };
  if (!base?.url) {
    const flag = credentialsDir !== undefined ? '--parent-proxy-credentials' : noProxy !== undefined ? '--no-proxy'
      : passUnresolvedNames !== undefined ? '--parent-proxy-pass-unresolved-names' : undefined;
    if (flag) throw new Error(`${flag} needs a parent proxy: give --parent-proxy URL (or controlPlane.proxy.url in the runtime config)`);
    return undefined;
  }
  let parsed: URL | undefined;
  try {
    parsed = new URL(base.url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.username || parsed.password || parsed.pathname !== '/') {
    // shown without what might be a password
    const shownUrl = parsed ? ` (${parsed.protocol}//${parsed.host}${parsed.username || parsed.password ? ' with credentials' : ''})` : '';
    throw new Error(`${url === undefined ? 'controlPlane.proxy.url in the runtime config' : '--parent-proxy'}${shownUrl} is not http(s)://host:port without credentials or path; ` +
      'name the corporate proxy like http://proxy.corp.example:3128 and give its username and password as files (--parent-proxy-credentials DIR, or the Secret controlPlane.proxy.existingSecret)');
  }
  return {
    ...base,
    ...(credentialsDir !== undefined ? { credentialsDir } : {}),
    ...(noProxy !== undefined ? { noProxy: noProxy.split(',').map((e) => e.trim()).filter(Boolean) } : {}),
    ...(passUnresolvedNames !== undefined ? { passUnresolvedNames } : {}),
  };
}

function memoryLimitMib(flag: string | undefined, env: NodeJS.ProcessEnv): number {
  if (flag !== undefined) return positive('memory-limit-mib', flag, DEFAULT_MEMORY_LIMIT_MIB);
  const text = env[MEMORY_LIMIT_ENV]?.trim();
  if (!text) return DEFAULT_MEMORY_LIMIT_MIB;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) {
    throw new Error(`${MEMORY_LIMIT_ENV} '${text}' must be the container's memory limit in MiB, a positive whole number (the chart sets it from resources.limits.memory)`);
  }
  return n;
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
