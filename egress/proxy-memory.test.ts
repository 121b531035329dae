// One client cannot make the proxy hold more than its share of buffers: its
// tunnels write a request and never read while the destination streams as
// fast as it can, and the proxy stops reading from the destination instead of
// queueing for the client; a second client's download still completes. The
// same for uploads to a destination that never reads. What was held is given
// back when the tunnels close.
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bufferLimits, MiB, MIN_READ_BYTES } from './buffer-budget.ts';
import { rawRequest, startLoopbackProxy, type LoopbackProxy } from '../test/egress/loopback-proxy.ts';
import { until } from '../test/support/until.ts';

const HOG = '127.0.0.2';
const OTHER = '127.0.0.3';
const UPLOADER = '127.0.0.4';
const HOG_TUNNELS = 40;
const MEMORY_LIMIT_MIB = 64;

let proxy: LoopbackProxy;
let source: net.Server;
let port: number;
let sink: net.Server;
let sinkPort: number;
const sinkSockets = new Set<net.Socket>();
let sent = 0;
const open = new Set<net.Socket>();

/** A destination that streams 256 KiB writes, as fast as its reader takes them, once the client has sent its request. */
function startSource(): net.Server {
  const chunk = Buffer.alloc(256 * 1024, 0x61);
  return net.createServer((s) => {
    open.add(s);
    s.on('error', () => s.destroy());
    s.once('close', () => open.delete(s));
    const pump = () => {
      while (s.writable) {
        sent += chunk.length;
        if (!s.write(chunk)) return;
      }
    };
    s.on('drain', pump);
    s.once('data', pump);
  });
}

beforeAll(async () => {
  source = startSource();
  source.listen(0, '127.0.0.1');
  await once(source, 'listening');
  port = (source.address() as AddressInfo).port;
  // a destination that accepts and never reads
  sink = net.createServer((s) => {
    open.add(s);
    sinkSockets.add(s);
    s.pause();
    s.on('error', () => s.destroy());
    s.once('close', () => open.delete(s));
  });
  sink.listen(0, '127.0.0.1');
  await once(sink, 'listening');
  sinkPort = (sink.address() as AddressInfo).port;
  proxy = await startLoopbackProxy(['--allow', 'bulk.test', '--ports', `${port},${sinkPort}`, '--memory-limit-mib', String(MEMORY_LIMIT_MIB)]);
});

afterAll(async () => {
  await proxy?.close();
  for (const s of open) s.destroy();
  source?.close();
  sink?.close();
});

function tunnelRequest(to = port): string {
  return `CONNECT bulk.test:${to} HTTP/1.1\r\nHost: bulk.test:${to}\r\n\r\nGET /big HTTP/1.1\r\nHost: bulk.test\r\n\r\n`;
}

/** Polls until `progress` has not moved for ten looks in a row and `ready` holds, keeping the most `measure` gave meanwhile. */
async function untilStill(what: string, progress: () => number, ready: () => boolean, measure: () => number): Promise<number> {
  let most = 0;
  let last = -1;
  let still = 0;
  await until(what, () => {
    most = Math.max(most, measure());
    still = progress() === last ? still + 1 : 0;
    last = progress();
    return still >= 10 && ready();
  }, { timeoutMs: 60_000, intervalMs: 100, context: () => `held so far: at most ${most} bytes` });
  return most;
}

function connectFrom(localAddress: string): net.Socket {
  const s = net.connect({ host: '127.0.0.1', port: proxy.port, localAddress });
  open.add(s);
  s.on('error', () => s.destroy());
  return s;
}

/** Opens a tunnel from `localAddress`, sends the request through it, and reads `bytes` of the download. */
async function download(localAddress: string, bytes: number): Promise<number> {
  const socket = net.connect({ host: '127.0.0.1', port: proxy.port, localAddress });
  open.add(socket);
  socket.write(tunnelRequest());
  let got = 0;
  for await (const d of socket as AsyncIterable<Buffer>) {
    got += d.length;
    if (got >= bytes) break;
  }
  socket.destroy();
  return got;
}

describe('a client that writes and never reads', () => {
  it('holds at most its share of the proxy\'s buffers, gets 429 for more, and another client still downloads', async () => {
    const { perClientBytes } = bufferLimits(MEMORY_LIMIT_MIB * MiB);
    // its share, plus at most one smallest read buffer per tunnel and the request bytes on their way (buffer-budget.ts)
    const bound = perClientBytes + HOG_TUNNELS * (MIN_READ_BYTES + 1024);
    // the proxy's side of the hog's connections: what it queues for the client, seen from outside the relay
    const hogSockets: net.Socket[] = [];
    proxy.proxy.server.on('connection', (s: net.Socket) => {
      if (s.remoteAddress === HOG) hogSockets.push(s);
    });
    const queued = () => hogSockets.reduce((sum, s) => sum + (s.destroyed ? 0 : s.writableLength), 0);
    const hog = Array.from({ length: HOG_TUNNELS }, () => connectFrom(HOG));
    for (const s of hog) s.write(tunnelRequest());
    let mostQueued = 0;
    // until the hog is at its share and the destination has stopped sending
    const mostHeld = await untilStill('the hog\'s tunnels to stop moving data', () => sent, () => proxy.proxy.bufferedBytes(HOG) >= perClientBytes, () => {
      mostQueued = Math.max(mostQueued, queued());
      return proxy.proxy.bufferedBytes(HOG);
    });

    const seen = `the destination sent ${(sent / MiB).toFixed(1)} MiB; the proxy held at most ${(mostHeld / MiB).toFixed(2)} MiB for the hog ` +
      `(${(mostQueued / MiB).toFixed(2)} MiB queued in its sockets); bound ${(bound / MiB).toFixed(2)} MiB`;
    expect(mostHeld, seen).toBeLessThanOrEqual(bound);
    expect(mostQueued, seen).toBeLessThanOrEqual(bound);

    expect(await download(OTHER, 16 * MiB)).toBeGreaterThanOrEqual(16 * MiB);
    const refused = await rawRequest(proxy.port, tunnelRequest(), { localAddress: HOG });
    expect(refused.status).toBe(429);
    expect(refused.headers['x-rlmesh-egress-error']).toBe('client-buffer-share');
    expect(refused.text).toContain(`${HOG} holds`);
    expect(await proxy.metrics.registry.metrics()).toMatch(/rlmesh_egress_decisions_total\{outcome="limited",rule="client-buffer-share"\} [1-9]/);

    for (const s of hog) s.destroy();
    await until('the hog\'s buffers to be given back', () => proxy.proxy.bufferedBytes() === 0, { timeoutMs: 10_000, intervalMs: 50 });
  });
});

describe('a client that uploads to a destination that never reads', () => {
  it('holds at most its share of the proxy\'s buffers, and gives it back when its tunnels close at both ends', async () => {
    const tunnels = 12;
    const { perClientBytes } = bufferLimits(MEMORY_LIMIT_MIB * MiB);
    // its share, plus per tunnel: one smallest download buffer, one read from the client (64 KiB) and a paused socket's read-ahead (64 + 64 KiB)
    const bound = perClientBytes + tunnels * (MIN_READ_BYTES + 192 * 1024);
    const chunk = Buffer.alloc(64 * 1024, 0x62);
    let written = 0;
    const uploads = Array.from({ length: tunnels }, () => {
      const s = connectFrom(UPLOADER);
      s.write(tunnelRequest(sinkPort));
      const pump = () => {
        while (!s.destroyed) {
          written += chunk.length;
          if (!s.write(chunk)) return;
        }
      };
      s.on('drain', pump);
      pump();
      return s;
    });
    const mostHeld = await untilStill('the uploads to stop moving data', () => written, () => proxy.proxy.bufferedBytes(UPLOADER) >= perClientBytes,
      () => proxy.proxy.bufferedBytes(UPLOADER));
    expect(mostHeld, `held at most ${(mostHeld / MiB).toFixed(2)} MiB for the uploader; bound ${(bound / MiB).toFixed(2)} MiB`).toBeLessThanOrEqual(bound);
    expect((await rawRequest(proxy.port, tunnelRequest(), { localAddress: UPLOADER })).status).toBe(429);

    // the proxy would go on flushing to the destination after the client has gone (until the idle timeout)
    for (const s of [...uploads, ...sinkSockets]) s.destroy();
    await until('the uploader\'s buffers to be given back', () => proxy.proxy.bufferedBytes() === 0, { timeoutMs: 10_000, intervalMs: 50 });
  });
});
