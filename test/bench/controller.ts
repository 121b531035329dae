// Benchmark: the controller against bare baselines, side by side in one run on
// the local cluster (test/cluster/up must be running).
//
//   node test/bench/controller.ts [--evaluations 1000] [--object-mib 256] [--rounds 5] [--fanout 50] [--parts fill,fanout,pods]
//
// 1. evaluations -> pods: the reconciler (as its ServiceAccount) turning N
//    evaluations into pods, vs a bare client creating the same N pods in a
//    loop (sequential, and with the controller's concurrency).
// 2. cache fill throughput: the filler's fetch path (ranged GETs, SHA-256,
//    temp file, fsync, rename) vs a raw GET of the same object from the same
//    server, over HTTPS (separate server process) and S3 (versitygw).
//    Then the fill's stages one at a time on top of the raw GET (SHA-256 alone,
//    the writes alone, the writes with their syncs), to show what each costs.
// 3. fan-out: `--fanout` evaluations wanting one artifact -> downloads counted.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { Agent, request } from 'undici';
import { ArtifactFetcher } from '../../controller/cache/fetch.ts';
import { hashesOffThread } from '../../controller/cache/hasher.ts';
import { ArtifactStore } from '../../controller/cache/store.ts';
import { BackgroundSync, PositionalWriter } from '../../controller/cache/writer.ts';
import { buildEvaluationPod } from '../../controller/pod-spec.ts';
import type { RLMeshEvaluation } from '../../lib/crds/types.ts';
import { adminKubeConfig, kubectl } from '../support/cluster.ts';
import { apply, createEvaluation, evaluation, metric, setupEnv, startController, waitForPhase, type Env } from '../controller/harness.ts';
import { startS3Server } from '../controller/s3-server.ts';

const { values } = parseArgs({
  options: {
    evaluations: { type: 'string', default: '1000' },
    'object-mib': { type: 'string', default: '256' },
    rounds: { type: 'string', default: '5' },
    fanout: { type: 'string', default: '50' },
    parts: { type: 'string', default: 'fill,fanout,pods' },
  },
});
const N = Number(values.evaluations);
const OBJECT = Number(values['object-mib']) * 1024 * 1024;
const ROUNDS = Number(values.rounds);
const FANOUT = Number(values.fanout);
const PARTS = new Set(values.parts.split(','));
const CONCURRENCY = 16;
const silent = pino({ level: 'silent' });
const results: string[] = [];
const report = (line: string): void => {
  console.log(line);
  results.push(line);
};

async function pool<T>(items: T[], concurrency: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (i < items.length) await fn(items[i++]!);
  }));
}

/** Resolves with the time the namespace holds `count` pods, counting ADDED events of a watch opened now. */
function podsAppear(namespace: string, count: number): Promise<number> {
  const kc = adminKubeConfig();
  const seen = new Set<string>();
  return new Promise((resolve, reject) => {
    const watch = new k8s.Watch(kc);
    let req: AbortController | undefined;
    void watch
      .watch(`/api/v1/namespaces/${namespace}/pods`, {}, (type, obj: k8s.V1Pod) => {
        if (type === 'ADDED') seen.add(obj.metadata!.name!);
        if (seen.size >= count) {
          req?.abort();
          resolve(performance.now());
        }
      }, (err) => {
        if (err && seen.size < count) reject(err);
      })
      .then((r) => (req = r));
  });
}

async function benchPods(env: Env): Promise<void> {
  const kc = adminKubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const evs = Array.from({ length: N }, (_, i) => evaluation(`bench-${i}`, { resources: { cpu: '10m', memory: '16Mi' } }, { duration: '100ms' }) as RLMeshEvaluation);
  const settings = { namespace: '', pullSecret: 'rlmesh-registry-pull', proxyUrl: 'http://rlmesh-egress-proxy.rlmesh-system.svc:3128', cache: { pvcName: 'rlmesh-artifact-cache', accessModes: ['ReadWriteOnce'] } };
  const barePods = (ns: string) =>
    evs.map((ev) => {
      const pod = buildEvaluationPod({ ...ev, metadata: { ...ev.metadata, uid: 'bench' } }, { ...settings, namespace: ns });
      pod.metadata!.ownerReferences = [];
      return pod;
    });

  const bare: Record<string, number> = {};
  for (const [label, conc] of [['sequential', 1], [`${CONCURRENCY} at once`, CONCURRENCY]] as const) {
    const ns = `${env.id}-bare-${conc}`;
    apply([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } }]);
    const pods = barePods(ns);
    const t0 = performance.now();
    await pool(pods, conc, (body) => core.createNamespacedPod({ namespace: ns, body }));
    const ms = performance.now() - t0;
    report(`bare client (${label}): ${N} pods in ${(ms / 1000).toFixed(2)} s = ${((N * 1000) / ms).toFixed(0)} pods/s`);
    bare[label] = ms;
    kubectl(['delete', 'namespace', ns, '--wait=false']);
  }

  // evaluations exist before the controller starts: its time runs from "reconciler started" to the Nth pod
  await pool(evs, 32, (ev) => createEvaluation(env, ev));
  const appeared = podsAppear(env.runs, N);
  const proc = await startController(env, 'reconciler', [`--concurrency=${CONCURRENCY}`], { LOG_LEVEL: 'info' });
  const startedAt = await new Promise<number>((resolve) => {
    const rl = createInterface({ input: proc.child.stdout! });
    rl.on('line', (l) => {
      if (l.includes('evaluation reconciler started')) resolve(performance.now());
    });
  });
  const doneAt = await appeared;
  const ms = doneAt - startedAt;
  report(`controller: ${N} evaluations -> ${N} pods in ${(ms / 1000).toFixed(2)} s = ${((N * 1000) / ms).toFixed(0)} pods/s (each: pod create + status write + Event)`);
  report(`ratio controller / bare sequential loop: ${(bare.sequential! / ms).toFixed(2)}x  (goal >= 0.8x)`);
  report(`ratio controller / bare client at concurrency ${CONCURRENCY}: ${(bare[`${CONCURRENCY} at once`]! / ms).toFixed(2)}x`);
  await proc.stop();
}

async function startServerProcess(size: number): Promise<{ child: ChildProcess; url: string; sha256: string; caFile: string; statsUrl: string; dispatcher: Agent }> {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'controller-artifact-server.ts'), String(size)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
  const info = JSON.parse(line) as { url: string; sha256: string; caFile: string; statsUrl: string };
  return { child, ...info, dispatcher: new Agent({ connect: { ca: readFileSync(info.caFile, 'utf8') }, connections: 8 }) };
}

async function drain(body: AsyncIterable<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of body) n += c.length;
  return n;
}

function statfsType(dir: string): string {
  const t = statfsSync(dir).type;
  return ({ 0xef53: 'ext4', 0x01021994: 'tmpfs', 0x58465342: 'xfs', 0x794c7630: 'overlayfs', 0x9123683e: 'btrfs' } as Record<number, string>)[t] ?? `filesystem 0x${t.toString(16)}`;
}

async function benchFill(): Promise<void> {
  const srv = await startServerProcess(OBJECT);
  const s3 = await startS3Server();
  try {
    const data = await drain((await request(srv.url, { dispatcher: srv.dispatcher })).body);
    await s3.put('bench', 'object.bin', Buffer.from(await (await request(srv.url, { dispatcher: srv.dispatcher })).body.arrayBuffer()));
    const mib = data / 1024 / 1024;
    const dir = mkdtempSync(join(tmpdir(), 'rlmesh-bench-cache-'));
    const store = new ArtifactStore(dir);
    await store.init();
    const fetcher = new ArtifactFetcher(store, silent, undefined, { dispatcher: srv.dispatcher });
    const ref = { name: 'object.bin', sha256: srv.sha256, sizeBytes: data };
    // rounds interleave the two sides so load from elsewhere on the machine hits both alike;
    // medians of each side, and the CPU each side used (this process, all its threads, plus
    // the HTTPS server's process), which load from elsewhere disturbs less than wall time
    const serverCpuMs = (): number => {
      const f = readFileSync(`/proc/${srv.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return (Number(f[11]) + Number(f[12])) * 10;
    };
    const cpuMs = (): number => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    };
    type Side = { ms: number[]; cpu: number[] };
    const timed = async (side: Side, fn: () => Promise<unknown>): Promise<void> => {
      const c0 = cpuMs();
      const t0 = performance.now();
      await fn();
      side.ms.push(performance.now() - t0);
      side.cpu.push(cpuMs() - c0);
    };
    const median = (xs: number[]): number => {
      const s = [...xs].sort((x, y) => x - y);
      return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    };
    const sideBySide = async (raw: () => Promise<unknown>, fill: () => Promise<unknown>): Promise<[Side, Side]> => {
      const r: Side = { ms: [], cpu: [] };
      const f: Side = { ms: [], cpu: [] };
      for (let i = 0; i < ROUNDS; i++) {
        // alternate which side goes first, so neither always inherits the other's dirty pages or warm caches
        const order = i % 2 ? [[f, fill], [r, raw]] as const : [[r, raw], [f, fill]] as const;
        for (const [side, fn] of order) {
          await store.remove(srv.sha256);
          await timed(side, fn);
        }
      }
      return [r, f];
    };
    const rate = (ms: number) => `${((mib * 1000) / ms).toFixed(0)} MiB/s`;
    const line = (what: string, rawName: string, [r, f]: [Side, Side]): void => {
      report(
        `${what}: ${rawName} ${rate(median(r.ms))} (best ${rate(Math.min(...r.ms))}, ${median(r.cpu).toFixed(0)} ms CPU), ` +
          `cache fill ${rate(median(f.ms))} (best ${rate(Math.min(...f.ms))}, ${median(f.cpu).toFixed(0)} ms CPU); ` +
          `ratio of medians ${(median(r.ms) / median(f.ms)).toFixed(2)}x, of bests ${(Math.min(...r.ms) / Math.min(...f.ms)).toFixed(2)}x`,
      );
    };
    const https = { kind: 'https' as const, url: srv.url };
    const rawGet = async () => drain((await request(srv.url, { dispatcher: srv.dispatcher })).body);
    report(`cache dir ${dir} on ${statfsType(dir)}; ${ROUNDS} interleaved rounds per line; fill = SHA-256 verified, temp file, fsync, rename; hashing ${hashesOffThread(data) ? 'on a worker' : 'inline'} (auto)`);
    const mode = data >= 256 * 1024 * 1024 ? 'parallel ranged GETs, 4 x 32 MiB' : 'one stream';
    const s0 = serverCpuMs();
    line(`HTTPS ${mib.toFixed(0)} MiB, fill with the defaults (${mode})`, 'raw GET', await sideBySide(rawGet, () => fetcher.fetch(ref, https)));
    const single = new ArtifactFetcher(store, silent, undefined, { dispatcher: srv.dispatcher, rangedThresholdBytes: Number.MAX_SAFE_INTEGER });
    line(`HTTPS ${mib.toFixed(0)} MiB, fill forced to one stream`, 'raw GET', await sideBySide(rawGet, () => single.fetch(ref, https)));
    const worker = new ArtifactFetcher(store, silent, undefined, { dispatcher: srv.dispatcher, rangedThresholdBytes: Number.MAX_SAFE_INTEGER, hashOffThread: true });
    line(`HTTPS ${mib.toFixed(0)} MiB, one stream, hashing forced onto a worker`, 'raw GET', await sideBySide(rawGet, () => worker.fetch(ref, https)));
    report(`HTTPS server process CPU over these ${6 * ROUNDS} transfers: ${((serverCpuMs() - s0) / (6 * ROUNDS)).toFixed(0)} ms each`);
    // the fill's stages one at a time on a raw GET, with the fill's own writer: each alone
    // must stay within the 10 % the goal allows for the whole fill to reach 0.9x
    const stage = (hash: boolean, write: 'no' | 'page cache' | 'synced') => async (): Promise<void> => {
      const h = hash ? createHash('sha256') : undefined;
      const file = join(dir, 'stage.tmp');
      const fh = write === 'no' ? undefined : await open(file, 'w');
      const sync = fh && write === 'synced' ? new BackgroundSync(fh, 32 * 1024 * 1024) : undefined;
      const writer = fh ? new PositionalWriter(fh, 0, sync ? { sync } : {}) : undefined;
      for await (const piece of (await request(srv.url, { dispatcher: srv.dispatcher })).body as AsyncIterable<Buffer>) {
        h?.update(piece);
        const wait = writer?.push(piece);
        if (wait) await wait;
      }
      h?.digest('hex');
      await writer?.end();
      await sync?.settle();
      if (sync) await fh!.sync();
      await fh?.close();
      if (fh) rmSync(file);
    };
    const stageLine = (what: string, [r, f]: [Side, Side]): void =>
      report(`  stage: raw GET + ${what}: ${rate(median(f.ms))}, ${median(f.cpu).toFixed(0)} ms CPU (raw GET ${rate(median(r.ms))}, ${median(r.cpu).toFixed(0)} ms CPU); ratio ${(median(r.ms) / median(f.ms)).toFixed(2)}x`);
    stageLine('SHA-256 inline', await sideBySide(rawGet, stage(true, 'no')));
    stageLine('writes to the page cache (no sync)', await sideBySide(rawGet, stage(false, 'page cache')));
    stageLine('writes, datasync every 32 MiB, fsync', await sideBySide(rawGet, stage(false, 'synced')));
    const creds = { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
    const s3src = { kind: 's3' as const, endpoint: s3.endpoint, region: 'us-east-1', bucket: 'bench', key: 'object.bin', credentials: creds };
    const rawS3 = async () => drain((await s3.client.send(new GetObjectCommand({ Bucket: 'bench', Key: 'object.bin' }))).Body as AsyncIterable<Uint8Array>);
    line(`S3 (versitygw) ${mib.toFixed(0)} MiB, fill with the defaults (${mode})`, 'raw GetObject', await sideBySide(rawS3, () => fetcher.fetch(ref, s3src)));
    line(`S3 (versitygw) ${mib.toFixed(0)} MiB, fill forced to one stream`, 'raw GetObject', await sideBySide(rawS3, () => single.fetch(ref, s3src)));
    rmSync(dir, { recursive: true, force: true });
  } finally {
    srv.child.kill('SIGTERM');
    await srv.dispatcher.close();
    await s3.close();
  }
}

async function benchFanout(env: Env): Promise<void> {
  const srv = await startServerProcess(32 * 1024 * 1024);
  const cacheDir = mkdtempSync(join(tmpdir(), 'rlmesh-bench-fanout-'));
  const reconciler = await startController(env, 'reconciler', [], { LOG_LEVEL: 'info' });
  const filler = await startController(env, 'cache-filler', [`--cache-dir=${cacheDir}`, '--node-name=kwok-cpu-0'], { NODE_EXTRA_CA_CERTS: srv.caFile, LOG_LEVEL: 'info' });
  try {
    const artifact = { name: 'shared.bin', sha256: srv.sha256, sizeBytes: 32 * 1024 * 1024, source: { httpsUrl: srv.url } };
    await pool(Array.from({ length: FANOUT }, (_, i) => i), FANOUT, (i) =>
      createEvaluation(env, evaluation(`fan-${i}`, { artifacts: [artifact] }, { duration: '100ms' })),
    );
    for (let i = 0; i < FANOUT; i++) await waitForPhase(env, `fan-${i}`, ['Succeeded'], 300_000);
    const stats = (await (await request(srv.statsUrl, { dispatcher: srv.dispatcher })).body.json()) as Record<string, number>;
    const downloads = await metric(filler, 'rlmesh_controller_cache_fetches_total{source="https",outcome="ok"}');
    report(`fan-out: ${FANOUT} evaluations wanting one 32 MiB artifact -> ${downloads} download(s), ${stats['/object.bin'] ?? 0} GET(s) at the source; all ${FANOUT} Succeeded`);
  } finally {
    await reconciler.stop();
    await filler.stop();
    srv.child.kill('SIGTERM');
    await srv.dispatcher.close();
    rmSync(cacheDir, { recursive: true, force: true });
  }
}

const env = await setupEnv();
try {
  if (PARTS.has('fill')) await benchFill();
  if (PARTS.has('fanout')) await benchFanout(env);
  if (PARTS.has('pods')) {
    kubectl(['-n', env.runs, 'delete', 'rlmeshevaluations', '--all', '--wait=true', '--timeout=120s'], { allowFail: true });
    kubectl(['-n', env.runs, 'delete', 'pods', '--all', '--wait=true', '--timeout=120s'], { allowFail: true });
    await benchPods(env);
  }
} finally {
  await env.cleanup();
}
console.log('\nsummary\n' + results.join('\n'));
process.exit(0);
