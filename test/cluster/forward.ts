// Serves TCP services of the local cluster that listen on 127.0.0.1 (the
// apiserver, the registry) on the host's address of the real nodes' bridge
// too: a process in a node's network namespace cannot reach the host's
// loopback. Plain byte forwarding (TLS stays end to end), both addresses local
// to this machine. test/cluster/real-node.ts starts it; test/cluster/down stops it.
//
//   node test/cluster/forward.ts LISTEN_HOST:PORT=TARGET_HOST:PORT ...
import { connect, createServer, type Socket } from 'node:net';

type Endpoint = { host: string; port: number };

function endpoint(s: string): Endpoint {
  const i = s.lastIndexOf(':');
  const port = Number(s.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`forward: ${JSON.stringify(s)} is not HOST:PORT`);
  return { host: s.slice(0, i), port };
}

const pairs = process.argv.slice(2).map((arg) => {
  const [listen, target] = arg.split('=');
  if (!listen || !target) throw new Error(`forward: ${JSON.stringify(arg)} is not LISTEN_HOST:PORT=TARGET_HOST:PORT`);
  return { listen: endpoint(listen), target: endpoint(target) };
});
if (pairs.length === 0) throw new Error('usage: node test/cluster/forward.ts LISTEN_HOST:PORT=TARGET_HOST:PORT ...');

function splice(a: Socket, b: Socket): void {
  const close = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', close).on('close', close);
  b.on('error', close).on('close', close);
  a.pipe(b);
  b.pipe(a);
}

await Promise.all(
  pairs.map(
    ({ listen, target }) =>
      new Promise<void>((resolve, reject) => {
        const server = createServer({ noDelay: true, keepAlive: true }, (client) => {
          splice(client, connect({ ...target, noDelay: true, keepAlive: true }));
        });
        server.once('error', reject);
        server.listen(listen.port, listen.host, () => resolve());
      }),
  ),
);
console.log(`forwarding ${pairs.map((p) => `${p.listen.host}:${p.listen.port} -> ${p.target.host}:${p.target.port}`).join(', ')}`);
