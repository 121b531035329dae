// Where a component listens, and how a host and port are written down, on
// IPv4-only, IPv6-only and dual-stack pods alike.
//
// The default listen host is none at all: Node then binds the unspecified IPv6
// address `::` with IPV6_V6ONLY off (libuv clears it whatever the sysctl
// net.ipv6.bindv6only says), which accepts IPv4 too, and falls back to 0.0.0.0
// when the kernel has no IPv6. An explicit `::` would fail there, and 0.0.0.0
// would shut out an IPv6-only pod's kubelet probes and clients.
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

export const LISTEN_HOST_ENV = 'RLMESH_LISTEN_HOST';

/**
 * The listen host from RLMESH_LISTEN_HOST (`127.0.0.1`, `::1`, `[::1]`, a name), or
 * undefined for every interface of every address family the pod has.
 */
export function listenHost(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const raw = env[LISTEN_HOST_ENV]?.trim();
  if (!raw) return undefined;
  const unbracketed = raw.startsWith('[') && raw.endsWith(']') ? raw.slice(1, -1) : raw;
  if (unbracketed.includes(':') && isIP(unbracketed) !== 6) {
    throw new Error(`${LISTEN_HOST_ENV}='${raw}' is not an IPv6 address; set an IP address (0.0.0.0, ::, 127.0.0.1, ::1) or a host name, or unset it to listen on every interface`);
  }
  return unbracketed;
}

/** A host as it goes in a URL or a `host:port`: an IPv6 literal bracketed, anything else (already bracketed too) as it is. */
export function urlHost(host: string): string {
  return isIP(host) === 6 ? `[${host}]` : host;
}

/** `host:port`, the IPv6 literal bracketed. */
export function hostPort(host: string, port: number | string): string {
  return `${urlHost(host)}:${port}`;
}

/** Where a server listens, for logs and messages: `[::1]:8081`, or `every interface, port 8081` without a host. */
export function shownListen(host: string | undefined, port: number): string {
  return host === undefined ? `every interface, port ${port}` : hostPort(host, port);
}

/**
 * A peer's address as the peer knows it: on a dual-stack `::` socket an IPv4 client
 * shows as `::ffff:10.1.2.3`; this gives `10.1.2.3`, so logs and per-client limits
 * read the same whichever way the server was bound.
 */
export function peerAddress(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  const m = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return m ? m[1]! : address;
}

type Interfaces = ReturnType<typeof networkInterfaces>;

/**
 * The pod's own address: its first non-loopback IPv4 address, else (an IPv6-only
 * pod) its first non-loopback IPv6 address that is not link-local, else undefined.
 */
export function podAddress(interfaces: Interfaces = networkInterfaces()): string | undefined {
  const all = Object.values(interfaces).flatMap((list) => list ?? []).filter((a) => !a.internal);
  return (
    all.find((a) => a.family === 'IPv4')?.address ??
    all.find((a) => a.family === 'IPv6' && !/^fe[89ab]/i.test(a.address) && !a.address.includes('%'))?.address
  );
}
