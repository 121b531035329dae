// The test evaluation image (test/images/evaluation): built reproducibly with
// the engine-free image library, served by the local registry by digest, and
// its program (taken out of the image) keeping the contract kwok plays for
// simulated pods: exit TEST_EXIT_CODE after TEST_DURATION, report the artifact
// TEST_ARTIFACT, a GET of TEST_PROBE_URL through the proxy and directly, and a PUT to TEST_UPLOAD_URL.
// Everything here stays on loopback: an HTTPS server and a CONNECT proxy that
// refuses any destination other than the server.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureTls } from '../../controlplane/tls.ts';
import { MEDIA, readImage, type BuiltImage } from '../../scripts/image/oci-layout.ts';
import { sourceFacts } from '../../scripts/image/source.ts';
import { clusterInfo } from '../support/cluster.ts';
import { registryGet } from '../support/registry.ts';
import { buildEvaluationImage } from './evaluation/build.ts';
import { publishEvaluationImage } from './evaluation/publish.ts';
import { tempDir } from '../support/temp.ts';

const BINARY_PATH = 'usr/local/bin/rlmesh-test-evaluation';
// one source for every build here: a concurrent commit or edit elsewhere in
// the checkout changes the revision label, not what this file compares
const source = sourceFacts();
type Step = Record<string, unknown> & { step: string };

let work: string;
let first: BuiltImage; // built once for every test here
let binary: string; // its program, taken out of it

/** Copies the program out of the image's last layer, so the test runs what the image holds. */
async function binaryFromImage(layout: string, to: string): Promise<void> {
  const { manifest } = readImage(layout);
  const layer = manifest.layers.at(-1)!;
  const chunks: Buffer[] = [];
  const tar = extract();
  tar.on('entry', (header, stream, next) => {
    if (header.name === BINARY_PATH) stream.on('data', (c) => chunks.push(c as Buffer));
    stream.on('end', next);
    stream.resume();
  });
  await pipeline(Readable.from([readFileSync(join(layout, 'blobs/sha256', layer.digest.slice(7)))]), createGunzip(), tar);
  if (chunks.length === 0) throw new Error(`${BINARY_PATH} is not in the image's last layer`);
  writeFileSync(to, Buffer.concat(chunks));
  chmodSync(to, 0o755);
}

/** Runs the program with exactly `env` (nothing inherited, so no host proxy settings leak in). */
async function runProgram(env: Record<string, string>): Promise<{ code: number | null; ms: number; steps: Step[]; stderr: string }> {
  const t0 = performance.now();
  const child = spawn(binary, [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  const ms = performance.now() - t0;
  const steps = stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Step);
  return { code, ms, steps, stderr };
}

beforeAll(async () => {
  work = tempDir('rlmesh-evaluation-image-');
  first = await buildEvaluationImage(join(work, 'a'), source);
  binary = join(work, 'rlmesh-test-evaluation');
  await binaryFromImage(first.layout, binary);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('test evaluation image', () => {
  it('builds to the same digest twice, runs as 65532, and is small', async () => {
    const a = first;
    const b = await buildEvaluationImage(join(work, 'b'), source);
    expect(b.digest).toBe(a.digest);
    expect(b.layers.map((l) => l.digest)).toEqual(a.layers.map((l) => l.digest));
    const { config } = readImage(a.layout);
    expect(config.config.User).toBe('65532:65532');
    expect(config.config.Entrypoint).toEqual([`/${BINARY_PATH}`]);
    expect(a.layers.reduce((s, l) => s + l.size, 0)).toBeLessThan(16 * 2 ** 20);
  });

  it('is served by the local registry by digest', async () => {
    const { ref, digest } = await publishEvaluationImage();
    const { registry } = clusterInfo();
    expect(ref).toBe(`${registry}/rlmesh-test/evaluation@${digest}`);
    // a public image: an anonymous token pulls it
    const res = await registryGet('rlmesh-test/evaluation', `manifests/${digest}`, { accept: MEDIA.manifest });
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    expect(`sha256:${createHash('sha256').update(body).digest('hex')}`).toBe(digest);
    expect((JSON.parse(body.toString()) as { mediaType: string }).mediaType).toBe(MEDIA.manifest);
    // a second publish reuses the build and gives the same reference
    expect((await publishEvaluationImage()).ref).toBe(ref);
  });

  it('reads its artifact and exits with the chosen code after the chosen time', async () => {
    const artifact = join(work, 'artifact.bin');
    const data = Buffer.from('an artifact from the cache\n'.repeat(1000));
    writeFileSync(artifact, data);
    const r = await runProgram({ TEST_EXIT_CODE: '3', TEST_DURATION: '200ms', TEST_ARTIFACT: artifact });
    expect(r.code, r.stderr).toBe(3);
    expect(r.ms).toBeGreaterThanOrEqual(200);
    expect(r.steps.find((s) => s.step === 'artifact')).toEqual({ step: 'artifact', path: artifact, sha256: createHash('sha256').update(data).digest('hex'), size: data.length });
    expect(r.steps.at(-1)).toMatchObject({ step: 'exit', code: 3 });

    const missing = await runProgram({ TEST_DURATION: '', TEST_ARTIFACT: join(work, 'absent') });
    expect(missing.code).toBe(0); // defaults: exit 0 after 500ms
    expect(missing.ms).toBeGreaterThanOrEqual(500);
    expect(missing.steps.find((s) => s.step === 'artifact')?.error).toMatch(/no such file/);

    const bad = await runProgram({ TEST_EXIT_CODE: 'three' });
    expect(bad.code).toBe(2);
    expect(bad.steps[0]).toMatchObject({ step: 'config', env: 'TEST_EXIT_CODE' });
  });

  it('probes the URL through the proxy, then directly', async () => {
    const tls = await ensureTls(join(work, 'tls'));
    const served: number[] = []; // client port of each request the server answered
    const uploads: { url: string; body: string }[] = [];
    const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
      if (req.method === 'PUT') {
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString()));
        req.on('end', () => {
          uploads.push({ url: req.url ?? '', body });
          res.writeHead(201).end();
        });
        return;
      }
      served.push(req.socket.remotePort!);
      res.end('probe ok\n');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    // the tiny CONNECT proxy: tunnels to that server only
    const connects: string[] = [];
    const tunnelPorts: number[] = []; // its own ports towards the server
    const sockets = new Set<net.Socket>();
    const proxy = http.createServer((_req, res) => res.writeHead(405).end());
    proxy.on('connect', (req: http.IncomingMessage, client: net.Socket) => {
      connects.push(req.url ?? '');
      sockets.add(client);
      client.on('error', () => client.destroy());
      if (req.url !== `LOCALHOST:${port}`) return void client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      const upstream = net.connect(port, '127.0.0.1', () => {
        tunnelPorts.push(upstream.localPort!);
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.pipe(client).pipe(upstream);
      });
      sockets.add(upstream);
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
    });
    proxy.listen(0, '127.0.0.1');
    await once(proxy, 'listening');
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      // Go never proxies "localhost" or a loopback IP (http.ProxyFromEnvironment
      // compares the name case-sensitively), but it proxies "LOCALHOST", and
      // dialling it directly resolves it from /etc/hosts (case-insensitively)
      // with no DNS query; the certificate's name localhost matches it
      const url = `https://LOCALHOST:${port}/probe`;
      const r = await runProgram({ TEST_DURATION: '0s', TEST_PROBE_URL: url, TEST_PROBE_TIMEOUT: '5s', TEST_CA_FILE: tls.caFile, HTTPS_PROXY: proxyUrl });
      expect(r.code, JSON.stringify(r.steps) + r.stderr).toBe(0);
      const probes = r.steps.filter((s) => s.step === 'probe');
      expect(probes).toEqual([
        expect.objectContaining({ via: 'proxy', url, proxy: proxyUrl, status: 200, bytes: 9 }),
        expect.objectContaining({ via: 'direct', url, status: 200, bytes: 9 }),
      ]);
      expect(connects).toEqual([`LOCALHOST:${port}`]);
      // the first request came through the tunnel, the second straight from the program
      expect(served).toHaveLength(2);
      expect(tunnelPorts).toContain(served[0]);
      expect(tunnelPorts).not.toContain(served[1]);

      // an upload goes through the proxy only: a PUT of the result document
      const put = await runProgram({ TEST_DURATION: '0s', TEST_UPLOAD_URL: `https://LOCALHOST:${port}/outputs/e1`, TEST_PROBE_TIMEOUT: '5s', TEST_CA_FILE: tls.caFile, HTTPS_PROXY: proxyUrl });
      expect(put.code, JSON.stringify(put.steps) + put.stderr).toBe(0);
      expect(put.steps.filter((s) => s.step === 'upload')).toEqual([expect.objectContaining({ url: `https://LOCALHOST:${port}/outputs/e1`, status: 201 })]);
      expect(uploads).toEqual([{ url: '/outputs/e1', body: expect.stringContaining('"result":"done"') }]);
      expect(connects).toEqual([`LOCALHOST:${port}`, `LOCALHOST:${port}`]);

      // without the CA the program reports the TLS error of each attempt and still exits as told
      const untrusted = await runProgram({ TEST_DURATION: '0s', TEST_EXIT_CODE: '7', TEST_PROBE_URL: url, HTTPS_PROXY: proxyUrl });
      expect(untrusted.code).toBe(7);
      const errors = untrusted.steps.filter((s) => s.step === 'probe').map((s) => s.error);
      expect(errors).toEqual([expect.stringMatching(/certificate/), expect.stringMatching(/certificate/)]);
    } finally {
      for (const s of sockets) s.destroy();
      proxy.closeAllConnections();
      server.closeAllConnections();
      await Promise.all([new Promise((r) => proxy.close(r)), new Promise((r) => server.close(r))]);
    }
  });
});
