// The egress proxy in the test's own process, on 127.0.0.1, for unit tests:
// the real createProxy with flags parsed by parseConfig, and its log lines
// kept as text. Only the address check is replaced: every allowed name
// resolves to 127.0.0.1 (which the real resolver refuses as loopback), so a
// loopback server stands in for a public destination.
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createLogger } from '../../lib/logger.ts';
import { AllowList } from '../../egress/allow-list.ts';
import { parseConfig } from '../../egress/config.ts';
import { createMetrics } from '../../egress/metrics.ts';
import { createProxy } from '../../egress/proxy.ts';
import type { DestinationResolver } from '../../egress/resolve-destination.ts';

export interface LoopbackProxy {
  port: number;
  proxy: ReturnType<typeof createProxy>;
  metrics: ReturnType<typeof createMetrics>;
  /** every log line so far, as written */
  logText(): string;
  close(): Promise<void>;
}

export async function startLoopbackProxy(flags: string[]): Promise<LoopbackProxy> {
  const config = parseConfig(['--port', '0', '--health-port', '0', '--metrics-port', '0', ...flags], { RLMESH_LISTEN_HOST: '127.0.0.1' });
  let text = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString('utf8');
      done();
    },
  });
  const logger = createLogger('egress', 'info', sink);
  const resolver = {
    resolve: async () => ({ outcome: 'addresses', addresses: ['127.0.0.1'], rule: 'public' }),
  } as unknown as DestinationResolver;
  const metrics = createMetrics();
  const proxy = createProxy({ config, allowList: new AllowList({ entries: config.allow, ports: config.ports }), resolver, metrics, logger });
  proxy.server.listen(0, '127.0.0.1');
  await once(proxy.server, 'listening');
  return {
    port: (proxy.server.address() as AddressInfo).port,
    proxy,
    metrics,
    logText: () => text,
    close: () => proxy.drain(0),
  };
}

export interface RawAnswer {
  /** everything the proxy sent back */
  text: string;
  status: number;
  headers: Record<string, string>;
}

/** Sends raw bytes to the proxy from `localAddress` and reads its answer: headers and body, or up to the 200 that opens a tunnel. */
export async function rawRequest(port: number, request: string, opts: { localAddress?: string } = {}): Promise<RawAnswer> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: opts.localAddress ?? '127.0.0.1' });
  socket.on('error', () => socket.destroy());
  socket.write(request);
  let data = '';
  socket.setEncoding('utf8');
  return new Promise((resolve) => {
    const done = () => {
      socket.destroy();
      const end = data.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = (end < 0 ? data : data.slice(0, end)).split('\r\n');
      const headers = Object.fromEntries(lines.map((h) => [h.slice(0, h.indexOf(':')).toLowerCase(), h.slice(h.indexOf(':') + 1).trim()]));
      resolve({ text: data, status: Number(statusLine.split(' ')[1]), headers });
    };
    socket.on('data', (d: string) => {
      data += d;
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = data.slice(0, end);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? NaN);
      const chunked = /\r\ntransfer-encoding: *chunked/i.test(head);
      // a 200 to CONNECT has no body: the tunnel is open, the answer complete
      if (/^HTTP\/1\.1 200 Connection Established/.test(data) || data.length - end - 4 >= length || (chunked && data.endsWith('\r\n0\r\n\r\n'))) done();
    });
    socket.once('close', done);
  });
}
