// Serves TCP services of the local cluster that listen on 127.0.0.1 (the
// apiserver, the registry) on the host's address of the real nodes' bridge
// too: a process in a node's network namespace cannot reach the host's
// loopback. Plain byte forwarding (TLS stays end to end), both addresses local
// to this machine. test/cluster/real-node.ts starts it; test/cluster/down stops it.
//
//   node test/cluster/forward.ts LISTEN_HOST:PORT=TARGET_HOST:PORT ...
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

type Endpoint = { host: string; port: number };

/** HOST:PORT; a listen address may ask for any free port with 0 (the line printed at start names it) */
function endpoint(s: string, listening = false): Endpoint {
  const i = s.lastIndexOf(':');
  const port = Number(s.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port < (listening ? 0 : 1) || port > 65535) throw new Error(`forward: ${JSON.stringify(s)} is not HOST:PORT`);
  return { host: s.slice(0, i), port };
}

const pairs = process.argv.slice(2).map((arg) => {
  const [listen, target] = arg.split('=');
  if (!listen || !target) throw new Error(`forward: ${JSON.stringify(arg)} is not LISTEN_HOST:PORT=TARGET_HOST:PORT`);
  return { listen: endpoint(listen, true), target: endpoint(target) };
});
if (pairs.length === 0) throw new Error('usage: node test/cluster/forward.ts LISTEN_HOST:PORT=TARGET_HOST:PORT ...');

// Half-closes travel through (allowHalfOpen): when one side has sent everything,
// pipe() ends the other side's writing half only after what is queued for it has
// gone out. This used to destroy both sockets on the first close, which cut the
// answer to any client that half-closed and could drop bytes still queued for a
// reader; only an error tears both down now.
function splice(a: Socket, b: Socket): void {
  const destroyBoth = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', destroyBoth);
  b.on('error', destroyBoth);
  a.pipe(b);
  b.pipe(a);
}

const listening = await Promise.all(
  pairs.map(
    ({ listen, target }) =>
      new Promise<string>((resolve, reject) => {
        const server = createServer({ noDelay: true, keepAlive: true, allowHalfOpen: true }, (client) => {
          splice(client, connect({ ...target, noDelay: true, keepAlive: true, allowHalfOpen: true }));
        });
        server.once('error', reject);
        server.listen(listen.port, listen.host, () => {
          const { address, port } = server.address() as AddressInfo;
          resolve(`${address}:${port} -> ${target.host}:${target.port}`);
        });
      }),
  ),
);
console.log(`forwarding ${listening.join(', ')}`);
