// Ports on 127.0.0.1 for tests and benchmarks: a free one for a server that takes its port as a flag,
// and a closed one for a test that needs its connection refused.
import { readFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';

export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

const refused = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => (s.destroy(), resolve(false)));
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });

/**
 * A port nothing listens on. It lies below the kernel's ephemeral range, where listen(0) never
 * lands: a freePort() that is closed again could be taken by another test's server meanwhile.
 */
export async function closedPort(): Promise<number> {
  const lowest = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  for (let port = lowest - 1; port > 1024; port--) if (await refused(port)) return port;
  throw new Error(`no port below ${lowest} on 127.0.0.1 refuses connections: something listens on all of them`);
}
