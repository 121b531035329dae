// A real HTTPS server on 127.0.0.1 with a freshly generated self-signed
// certificate, serving artifacts (with Range support) the way a presigned
// object-store URL does. It counts requests per path and can be told to fail
// the first requests, to stall, or to serve content other than asked for.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { Agent } from 'undici';
import { tempDir } from '../support/temp.ts';

export type Blob = { data: Buffer; sha256: string };

export function blob(size: number): Blob {
  const data = randomBytes(size);
  return { data, sha256: createHash('sha256').update(data).digest('hex') };
}

/** A certificate for 127.0.0.1 in a folder of its own (`dir`), which the caller removes. */
export function selfSignedCert(): { key: string; cert: string; caFile: string; dir: string } {
  const dir = tempDir('rlmesh-cert-');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ], { stdio: 'ignore' });
  return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), caFile: join(dir, 'cert.pem'), dir };
}

export type ArtifactServer = {
  url: (path: string) => string;
  put: (path: string, data: Buffer) => void;
  requests: Map<string, number>;
  /** Fail this many upcoming requests to a path with HTTP 503. */
  failNext: (path: string, n: number) => void;
  /** Delay each response body chunk of this path (ms per 64 KiB). */
  throttle: (path: string, msPer64k: number) => void;
  dispatcher: Agent;
  caFile: string;
  close: () => Promise<void>;
  server: Server;
};

export async function startArtifactServer(): Promise<ArtifactServer> {
  const tls = selfSignedCert();
  const files = new Map<string, Buffer>();
  const requests = new Map<string, number>();
  const failures = new Map<string, number>();
  const throttles = new Map<string, number>();
  const server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const path = new URL(req.url ?? '/', 'https://x').pathname;
    if (path === '/__stats') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(Object.fromEntries(requests)));
      return;
    }
    requests.set(path, (requests.get(path) ?? 0) + 1);
    const fail = failures.get(path) ?? 0;
    if (fail > 0) {
      failures.set(path, fail - 1);
      res.writeHead(503).end('the artifact store is unavailable');
      return;
    }
    const data = files.get(path);
    if (!data) {
      res.writeHead(404).end('NoSuchKey: the specified key does not exist');
      return;
    }
    let body = data;
    const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    if (m) {
      const start = Number(m[1]);
      const end = Math.min(Number(m[2]), data.length - 1);
      body = data.subarray(start, end + 1);
      res.writeHead(206, { 'content-length': body.length, 'content-range': `bytes ${start}-${end}/${data.length}`, 'accept-ranges': 'bytes' });
    } else {
      res.writeHead(200, { 'content-length': body.length, 'accept-ranges': 'bytes' });
    }
    const delay = throttles.get(path);
    if (!delay) {
      res.end(body);
      return;
    }
    let off = 0;
    const step = (): void => {
      if (res.destroyed) return;
      if (off >= body.length) {
        res.end();
        return;
      }
      res.write(body.subarray(off, off + 65536));
      off += 65536;
      setTimeout(step, delay);
    };
    step();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const dispatcher = new Agent({ connect: { ca: tls.cert } });
  return {
    url: (path) => `https://127.0.0.1:${port}${path}?X-Amz-Signature=secret-signature`,
    put: (path, data) => files.set(path, data),
    requests,
    failNext: (path, n) => failures.set(path, n),
    throttle: (path, ms) => throttles.set(path, ms),
    dispatcher,
    caFile: tls.caFile,
    server,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await dispatcher.close();
      rmSync(tls.dir, { recursive: true, force: true });
    },
  };
}
