// A real S3-compatible server on loopback (or a harness address): versitygw
// (POSIX backend) built from its Go module by test/controller/build-s3-server.sh,
// over HTTPS with a CA of its own when `tls` names its hosts.
import { execFileSync, spawn } from 'node:child_process';
import { Agent } from 'node:https';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, ListBucketsCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { ensureTls } from '../../controlplane/tls.ts';
import { tempDir } from '../support/temp.ts';

const here = dirname(fileURLToPath(import.meta.url));

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

export type S3Server = { endpoint: string; pid: number; caFile?: string; ca?: string; certFile?: string; keyFile?: string; root: string; accessKeyId: string; secretAccessKey: string; client: S3Client; put: (bucket: string, key: string, body: Buffer) => Promise<void>; close: () => Promise<void> };

/** The versitygw binary, built once per machine by build-s3-server.sh. */
export function versitygwBinary(): string {
  try {
    return execFileSync('bash', [join(here, 'build-s3-server.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
  } catch (err) {
    throw new Error(`cannot build the S3 test server (versitygw) with test/controller/build-s3-server.sh: ${(err as Error).message}; it needs Go and the Go module proxy`);
  }
}

export async function startS3Server(opts: { host?: string; port?: number; tls?: { hosts: string[] } } = {}): Promise<S3Server> {
  const bin = versitygwBinary();
  const root = tempDir('rlmesh-s3-');
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? (await freePort());
  const tls = opts.tls ? await ensureTls(join(root, '.tls'), opts.tls.hosts) : undefined;
  const accessKeyId = `AK${randomBytes(8).toString('hex').toUpperCase()}`;
  const secretAccessKey = randomBytes(20).toString('hex');
  const tlsArgs = tls ? ['--cert', tls.certFile, '--key', tls.keyFile] : [];
  const child = spawn(bin, ['--port', `${host}:${port}`, ...tlsArgs, '--access', accessKeyId, '--secret', secretAccessKey, 'posix', '--nometa', root], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const endpoint = tls ? `https://${opts.tls!.hosts[0]}:${port}` : `http://${host}:${port}`;
  // the test's own client reaches the server by its address, trusting its CA
  const client = new S3Client({
    region: 'us-east-1', endpoint: `${tls ? 'https' : 'http'}://${host}:${port}`, forcePathStyle: true, credentials: { accessKeyId, secretAccessKey },
    ...(tls ? { requestHandler: new NodeHttpHandler({ httpsAgent: new Agent({ ca: tls.ca, servername: opts.tls!.hosts[0] }) }) } : {}),
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await client.send(new ListBucketsCommand({}));
      break;
    } catch (err) {
      if (child.exitCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`versitygw did not start on ${endpoint}: ${(err as Error).message}; stderr: ${stderr.slice(-500)}`);
      }
      await sleep(200);
    }
  }
  const buckets = new Set<string>();
  return {
    endpoint,
    pid: child.pid!,
    // the POSIX backend's folder (a bucket per folder, --nometa) and the TLS files: a second server (a pod) may serve the same objects
    root,
    ...(tls ? { caFile: tls.caFile, ca: tls.ca, certFile: tls.certFile, keyFile: tls.keyFile } : {}),
    accessKeyId,
    secretAccessKey,
    client,
    put: async (bucket, key, body) => {
      if (!buckets.has(bucket)) {
        await client.send(new CreateBucketCommand({ Bucket: bucket })).catch((err: unknown) => {
          if (!/BucketAlreadyOwnedByYou|BucketAlreadyExists/.test((err as Error).name)) throw err;
        });
        buckets.add(bucket);
      }
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
    },
    close: async () => {
      client.destroy();
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}
