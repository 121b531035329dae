// Upstream servers for the egress tests and benchmark, run inside a test
// network namespace: `node upstream-server.ts <bind-v4> <bind-v6> <cert> <key>`.
//   443  HTTPS, answers "upstream <local address> <path>"
//   80   HTTP, the same
//   7000 source: writes data until the client closes (bulk throughput)
//   7001 echo (setup latency)
//   7002 banner: speaks first ("banner from <address>\n"), then echoes
//   7003 recorder: keeps every byte each connection sends; 300 ms after the
//        first request head it answers 200 "recorded" and closes
//   7004 HTTP, GET / answers the recorder's connections so far as JSON
//        (a list of base64 strings, oldest first)
// Prints one JSON line when every port listens.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

const [v4, v6, certFile, keyFile] = process.argv.slice(2) as [string, string, string, string];
const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
  res.writeHead(200, { 'content-type': 'text/plain' }).end(`upstream ${req.socket.localAddress} ${req.headers.host} ${req.url}\n`);
};
const chunk = Buffer.alloc(256 * 1024, 0x61);
const servers: net.Server[] = [];
const recorded: Buffer[][] = [];
for (const host of [v4, v6]) {
  servers.push(https.createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, handler).listen(443, host));
  servers.push(http.createServer(handler).listen(80, host));
  servers.push(net.createServer((s) => {
    s.on('error', () => s.destroy());
    const pump = () => {
      while (s.writable && s.write(chunk));
    };
    s.on('drain', pump);
    pump();
  }).listen(7000, host));
  servers.push(net.createServer((s) => {
    s.on('error', () => s.destroy());
    s.pipe(s);
  }).listen(7001, host));
  servers.push(net.createServer((s) => {
    s.on('error', () => s.destroy());
    s.write(`banner from ${s.localAddress}\n`);
    s.pipe(s);
  }).listen(7002, host));
  servers.push(net.createServer((s) => {
    s.on('error', () => s.destroy());
    const got: Buffer[] = [];
    recorded.push(got);
    let answered = false;
    s.on('data', (d: Buffer) => {
      got.push(d);
      if (answered || !Buffer.concat(got).includes('\r\n\r\n')) return;
      answered = true;
      setTimeout(() => s.end('HTTP/1.1 200 OK\r\ncontent-length: 9\r\nconnection: close\r\n\r\nrecorded\n'), 300);
    });
  }).listen(7003, host));
  servers.push(http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(recorded.map((c) => Buffer.concat(c).toString('base64'))));
  }).listen(7004, host));
}
await Promise.all(servers.map((s) => (s.listening ? undefined : once(s, 'listening'))));
console.log(JSON.stringify({ ready: true, v4, v6 }));
