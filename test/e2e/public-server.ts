// A "public" HTTPS server for the end-to-end suite: on the harness's own
// benchmarking address (198.18.0.1, on the real nodes' bridge), port 443,
// under the names CoreDNS gives it (inputs.public.test, other.public.test).
// Pods reach it only through the egress proxy, and only when a test lets that
// range through (egress.allowRanges). It serves its own CA as an artifact
// (/ca.pem, so an evaluation can trust it from the cache), a probe (/probe) and
// takes uploads (PUT /outputs/<name>, as an output host does), and records who
// asked for what.
import { createServer, type Server } from 'node:https';
import { createHash } from 'node:crypto';
import { ensureTls } from '../../controlplane/tls.ts';
import { HARNESS_HOSTS } from '../cluster/addons.ts';
import { NET } from '../cluster/real-node.ts';
import { tempDir } from '../support/temp.ts';

export type PublicServer = {
  /** the names pods resolve to this server */
  hosts: string[];
  ca: string;
  caSha256: string;
  requests: { method: string; host: string; path: string; from: string }[];
  close: () => Promise<void>;
};

export async function startPublicServer(): Promise<PublicServer> {
  const hosts = Object.keys(HARNESS_HOSTS).filter((h) => HARNESS_HOSTS[h] === NET.publicAddress);
  const tls = await ensureTls(tempDir('rlmesh-public-'), hosts);
  const requests: PublicServer['requests'] = [];
  const server: Server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    requests.push({ method: req.method ?? '', host: String(req.headers.host ?? ''), path: req.url ?? '', from: req.socket.remoteAddress ?? '' });
    if (req.method === 'PUT' && req.url?.startsWith('/outputs/')) {
      req.resume().on('end', () => res.writeHead(201).end());
    } else if (req.url === '/ca.pem') {
      res.writeHead(200, { 'content-type': 'application/x-pem-file', 'content-length': Buffer.byteLength(tls.ca) }).end(tls.ca);
    } else if (req.url === '/probe') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('reached\n');
    } else res.writeHead(404).end();
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(443, NET.publicAddress, ok);
  });
  return {
    hosts,
    ca: tls.ca,
    caSha256: createHash('sha256').update(tls.ca).digest('hex'),
    requests,
    close: () => new Promise((ok) => server.close(() => ok())),
  };
}
