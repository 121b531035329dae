// The local cluster's TCP forwarder (forward.ts) between loopback ports: what
// one side sends arrives whole at the other, even when the sender closes while
// the reader is still behind, and a half-close travels through.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { until } from '../support/until.ts';

const FORWARD = fileURLToPath(new URL('./forward.ts', import.meta.url));
const cleanup: (() => void)[] = [];

afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

async function serve(onConnection: (s: Socket) => void): Promise<number> {
  const server: Server = createServer({ allowHalfOpen: true }, onConnection);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(() => server.close());
  return (server.address() as AddressInfo).port;
}

/** starts forward.ts from a free loopback port to `target`, returns the port it listens on */
async function forward(target: number): Promise<number> {
  const child: ChildProcess = spawn(process.execPath, [FORWARD, `127.0.0.1:0=127.0.0.1:${target}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  cleanup.push(() => child.kill());
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const port = await until('forward.ts to print the port it listens on', () => /^forwarding 127\.0\.0\.1:(\d+) -> /.exec(out)?.[1], {
    timeoutMs: 10_000,
    intervalMs: 50,
    context: () => `exit ${child.exitCode}, stdout ${JSON.stringify(out)}, stderr ${err}`,
  });
  return Number(port);
}

async function readAll(s: Socket, pauseMs = 0): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of s) {
    chunks.push(c as Buffer);
    if (pauseMs) await sleep(pauseMs);
  }
  return Buffer.concat(chunks);
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('forward.ts', () => {
  it('delivers every byte a server sends and closes on, to a client that reads slowly', async () => {
    const payload = randomBytes(16 * 1024 * 1024);
    const port = await forward(await serve((s) => s.end(payload)));
    const client = connect({ host: '127.0.0.1', port });
    await once(client, 'connect');
    // the server has written and closed long before this reader is through, so the
    // forwarder gets the server's end while bytes still wait for the client
    const got = await readAll(client, 1);
    expect(got.length).toBe(payload.length);
    expect(sha(got)).toBe(sha(payload));
  });

  it('carries a half-close: the client ends its request and still gets the whole answer', async () => {
    const request = randomBytes(4 * 1024 * 1024);
    const port = await forward(
      await serve(async (s) => {
        const body = await readAll(s); // ends only when the client's FIN came through
        s.end(Buffer.from(sha(body)));
      }),
    );
    const client = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    await once(client, 'connect');
    client.end(request);
    expect((await readAll(client)).toString()).toBe(sha(request));
  });
});
