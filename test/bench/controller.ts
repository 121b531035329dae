// Benchmark: the controller against bare baselines, side by side in one run on
// the local cluster (test/cluster/up must be running).
//
//   node test/bench/controller.ts [--evaluations 1000] [--object-mib 256] [--rounds 5] [--fanout 50] [--parts fill,fanout,pods]
//
// 1. evaluations -> pods: the reconciler (as its ServiceAccount) turning N
//    evaluations into pods, run as the image runs it (its bundle, compile
//    cache), vs its peer, a bare client creating the same N pods with the
//    controller's concurrency (and, for information, one at a time); plus the
//    API calls the controller made per evaluation (the API server's counters).
// 2. cache fill throughput: the filler's fetch path (ranged GETs, SHA-256,
//    temp file, fsync, rename) vs each of its stages alone on the same object
//    (raw GET, GET + SHA-256, GET + durable write) and vs what an operator
//    would script (`curl -s URL | tee FILE | sha256sum`; for S3, Debian's
//    rclone in the same pipeline), over HTTPS (separate server process) and S3
//    (versitygw); on shared CPUs, then pinned (servers on CPU 0, fetchers on 1).
// 3. fan-out: `--fanout` evaluations wanting one artifact -> downloads counted.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
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
import { GROUP, VERSION, type RLMeshEvaluation } from '../../lib/crds/types.ts';
import { buildApp } from './app-build.ts';
import { until } from '../support/until.ts';
import { adminKubeConfig, kubectl } from '../support/cluster.ts';
import { NODE, apply, createEvaluation, evaluation, metric, setupEnv, startController, waitForPhase, type ControllerProcess, type Env } from '../controller/harness.ts';
import { startS3Server } from '../controller/s3-server.ts';
import { allCpus, pin } from './pin.ts';
import { pool } from '../support/pool.ts';
import { tempDir } from '../support/temp.ts';

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

/** The controller as the image runs it: its bundle, with the code cache the image bakes in, written after `--help` as the image build does. */
/** The API server's request counters (apiserver_request_total) for what the reconciler calls, summed over codes. */
async function apiCalls(): Promise<Record<string, number>> {
  const text = kubectl(['get', '--raw', '/metrics']).stdout;
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    const what = CALLS.find((c) => c.group === labels.group && c.resource === labels.resource && c.subresource === labels.subresource && c.verb === labels.verb);
    if (what) out[what.name] = (out[what.name] ?? 0) + Number(line.split(' ').pop());
  }
  return out;
}
// core/v1 Events are the reconciler's (the scheduler writes events.k8s.io/v1 ones); pod GETs are its reads of a pod its informer has not shown yet
const CALLS = [
  { name: 'pod create', group: '', resource: 'pods', subresource: '', verb: 'POST' },
  { name: 'pod get', group: '', resource: 'pods', subresource: '', verb: 'GET' },
  { name: 'status patch', group: 'rlmesh.dev', resource: 'rlmeshevaluations', subresource: 'status', verb: 'PATCH' },
  { name: 'Event create', group: '', resource: 'events', subresource: '', verb: 'POST' },
  { name: 'Event patch', group: '', resource: 'events', subresource: '', verb: 'PATCH' },
];
const perEvaluation = (before: Record<string, number>, after: Record<string, number>): string =>
  CALLS.map(({ name }) => `${name} ${(((after[name] ?? 0) - (before[name] ?? 0)) / N).toFixed(2)}`).join(', ');

/** The samples of one metric of a controller process, with their labels. */
async function metricLines(proc: ControllerProcess, name: string): Promise<[Record<string, string>, number][]> {
  const line = readFileSync(proc.logFile, 'utf8').split('\n').find((l) => l.includes('"server":"metrics"'))!;
  const port = (JSON.parse(line) as { port: number }).port;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`))
    .map((l) => [Object.fromEntries([...l.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!])), Number(l.split(' ').pop())]);
}

/** User + system CPU milliseconds of a process so far (/proc/PID/stat, clock ticks of 10 ms). */
function processCpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

async function benchPods(env: Env): Promise<void> {
  // the peer (test/bench/bare-create.ts) talks to the API as the controller does: over kept-alive connections (lib/kube-transport.ts)
  const evs = Array.from({ length: N }, (_, i) => evaluation(`bench-${i}`, { resources: { cpu: '10m', memory: '16Mi' } }, { duration: '100ms' }) as RLMeshEvaluation);
  const settings = { namespace: '', pullSecret: 'rlmesh-registry-pull', proxyUrl: 'http://rlmesh-egress-proxy.rlmesh-system.svc:3128', cache: { pvcName: 'rlmesh-artifact-cache', accessModes: ['ReadWriteOnce'] } };
  const barePods = (ns: string) =>
    evs.map((ev) => {
      const pod = buildEvaluationPod({ ...ev, metadata: { ...ev.metadata, uid: 'bench' } }, { ...settings, namespace: ns });
      pod.metadata!.ownerReferences = [];
      return pod;
    });
  const bundle = await buildApp(mkdtempSync(join(tmpdir(), 'rlmesh-bench-controller-')), 'bundles', ['controller']);

  const bare: Record<string, number> = {};
  for (const [label, conc] of [['sequential', 1], [`${CONCURRENCY} at once`, CONCURRENCY]] as const) {
    const ns = `${env.id}-bare-${conc}`;
    apply([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } }]);
    const file = join(tempDir('bare-pods-'), 'pods.json');
    writeFileSync(file, JSON.stringify(barePods(ns)));
    // timed as the controller is: a process of its own, from its start to the Nth pod a watch of the namespace has seen
    const appeared = podsAppear(ns, N);
    const client = spawn(NODE, [join(import.meta.dirname, 'bare-create.ts'), file, ns, String(conc)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((resolve) => client.once('exit', resolve));
    const t0 = await new Promise<number>((resolve) => createInterface({ input: client.stdout! }).once('line', () => resolve(performance.now())));
    const ms = (await appeared) - t0;
    if ((await exited) !== 0) throw new Error(`the bare client exited with ${client.exitCode}`);
    report(`bare client (${label}): ${N} pods in ${(ms / 1000).toFixed(2)} s = ${((N * 1000) / ms).toFixed(0)} pods/s`);
    bare[label] = ms;
    // each candidate starts on a quiet cluster: the scheduler, kwok and the namespace's deletion of these pods are done first
    kubectl(['delete', 'namespace', ns, '--wait=true', '--timeout=600s']);
  }

  // evaluations exist before the controller starts: its time runs from "reconciler started" to the Nth pod
  await pool(evs, 32, (ev) => createEvaluation(env, ev));
  const appeared = podsAppear(env.runs, N);
  const calls0 = await apiCalls();
  const proc = await startController(env, 'reconciler', [`--concurrency=${CONCURRENCY}`], { LOG_LEVEL: 'info', ...bundle.env() }, bundle.main('controller'));
  const startedAt = await new Promise<number>((resolve) => {
    const rl = createInterface({ input: proc.child.stdout! });
    rl.on('line', (l) => {
      if (l.includes('evaluation reconciler started')) resolve(performance.now());
    });
  });
  const doneAt = await appeared;
  const calls1 = await apiCalls();
  const cpu = processCpuMs(proc.child.pid!);
  const ms = doneAt - startedAt;
  const peer = bare[`${CONCURRENCY} at once`]! / ms;
  report(`controller (its image bundle, --concurrency=${CONCURRENCY}): ${N} evaluations -> ${N} pods in ${(ms / 1000).toFixed(2)} s = ${((N * 1000) / ms).toFixed(0)} pods/s`);
  report(`ratio controller / bare client at concurrency ${CONCURRENCY}: ${peer.toFixed(2)}x  (goal >= 0.8x: ${peer >= 0.8 ? 'met' : 'not met'})`);
  report(`ratio controller / bare sequential loop: ${(bare.sequential! / ms).toFixed(2)}x  (for information)`);
  report(`  API calls per evaluation until the Nth pod: ${perEvaluation(calls0, calls1)}; controller CPU ${(cpu / 1000).toFixed(1)} s (since its start)`);
  // then every evaluation to its end, and the Events behind it: the calls one evaluation costs in all
  const finished = async (): Promise<number> => {
    const list = (await env.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: env.runs, plural: 'rlmeshevaluations' })) as { items: RLMeshEvaluation[] };
    return list.items.filter((e) => e.status?.phase === 'Succeeded').length;
  };
  await until(`all ${N} evaluations to succeed`, async () => ((await finished()) >= N ? true : undefined), { timeoutMs: 600_000, intervalMs: 1000 });
  let last = await apiCalls();
  for (;;) {
    await sleep(2000);
    const now = await apiCalls();
    if (JSON.stringify(now) === JSON.stringify(last)) break;
    last = now;
  }
  report(`  API calls per evaluation until all ${N} Succeeded: ${perEvaluation(calls0, last)}`);
  // what those were: the phases the controller wrote (all but the quiet PodCreated write count as transitions) and its Events
  const transitions = (await metricLines(proc, 'rlmesh_controller_phase_transitions_total')).map(([labels, v]) => `${labels.phase}/${labels.reason} ${(v / N).toFixed(2)}`);
  const events = (await env.core.listNamespacedEvent({ namespace: env.runs, fieldSelector: 'involvedObject.kind=RLMeshEvaluation' })).items;
  const byReason = new Map<string, { events: number; occurrences: number }>();
  for (const e of events) {
    const r = byReason.get(e.reason ?? '') ?? { events: 0, occurrences: 0 };
    r.events++;
    r.occurrences += e.count ?? 1;
    byReason.set(e.reason ?? '', r);
  }
  report(`  per evaluation: phase changes written ${transitions.join(', ')}; Events ${[...byReason].map(([reason, r]) => `${reason} ${(r.events / N).toFixed(2)}${r.occurrences > r.events ? ` (x${(r.occurrences / r.events).toFixed(2)})` : ''}`).join(', ')}`);
  await proc.stop();
  rmSync(bundle.dir, { recursive: true, force: true });
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

/** CPU milliseconds of this process (all its threads) and of its waited-for children (cutime + cstime). */
function cpuMs(): number {
  const u = process.cpuUsage();
  const f = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (u.user + u.system) / 1000 + (Number(f[13]) + Number(f[14])) * 10;
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** Runs a shell pipeline (what an operator would script) and returns the SHA-256 it printed. */
function pipeline(script: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  // the AWS SDK in rclone refuses an AWS_CA_BUNDLE of the machine's for a plain-HTTP endpoint
  const { AWS_CA_BUNDLE: _, ...inherited } = process.env;
  return new Promise((resolve, reject) => {
    execFile('bash', ['-o', 'pipefail', '-c', script], { env: { ...inherited, ...env }, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`pipeline failed: ${script}: ${stderr || err.message}`));
      else resolve(stdout.split(/\s/)[0]!);
    });
  });
}

// Every candidate of a comparison runs once per round, the order rotating from
// round to round, so load from elsewhere and dirty pages hit each alike.
type Candidate = { name: string; run: () => Promise<unknown>; ms: number[]; cpu: number[] };
const candidate = (name: string, run: () => Promise<unknown>): Candidate => ({ name, run, ms: [], cpu: [] });

async function interleave(cands: Candidate[], before: () => Promise<void>): Promise<void> {
  for (let i = 0; i < ROUNDS; i++) {
    for (let j = 0; j < cands.length; j++) {
      const c = cands[(i + j) % cands.length]!;
      await before();
      const c0 = cpuMs();
      const t0 = performance.now();
      await c.run();
      c.ms.push(performance.now() - t0);
      c.cpu.push(cpuMs() - c0);
    }
  }
}

async function benchFill(): Promise<void> {
  execFileSync('bash', [join(import.meta.dirname, 'install-rclone.sh')], { stdio: ['ignore', 'ignore', 'inherit'] });
  const srv = await startServerProcess(OBJECT);
  const s3 = await startS3Server();
  const dir = mkdtempSync(join(tmpdir(), 'rlmesh-bench-cache-'));
  try {
    const data = await drain((await request(srv.url, { dispatcher: srv.dispatcher })).body);
    await s3.put('bench', 'object.bin', Buffer.from(await (await request(srv.url, { dispatcher: srv.dispatcher })).body.arrayBuffer()));
    const mib = data / 1024 / 1024;
    const store = new ArtifactStore(dir);
    await store.init();
    const ref = { name: 'object.bin', sha256: srv.sha256, sizeBytes: data };
    const fetcher = new ArtifactFetcher(store, silent, undefined, { dispatcher: srv.dispatcher });
    const single = new ArtifactFetcher(store, silent, undefined, { dispatcher: srv.dispatcher, rangedThresholdBytes: Number.MAX_SAFE_INTEGER });
    const https = { kind: 'https' as const, url: srv.url };
    const creds = { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
    const s3src = { kind: 's3' as const, endpoint: s3.endpoint, region: 'us-east-1', bucket: 'bench', key: 'object.bin', credentials: creds };
    const rawGet = async (): Promise<AsyncIterable<Buffer>> => (await request(srv.url, { dispatcher: srv.dispatcher })).body as AsyncIterable<Buffer>;
    const rawS3 = async (): Promise<AsyncIterable<Buffer>> =>
      (await s3.client.send(new GetObjectCommand({ Bucket: 'bench', Key: 'object.bin' }))).Body as AsyncIterable<Buffer>;
    const stageFile = join(dir, 'stage.tmp');
    // one stage on top of a GET: nothing (the raw GET), SHA-256 alone, or the fill's own durable write alone
    // (its positional writer, datasync every 32 MiB, fsync at the end)
    const stage = (get: () => Promise<AsyncIterable<Buffer>>, what: 'get' | 'sha256' | 'durable write') => async (): Promise<void> => {
      const h = what === 'sha256' ? createHash('sha256') : undefined;
      const fh = what === 'durable write' ? await open(stageFile, 'w') : undefined;
      const sync = fh ? new BackgroundSync(fh, 32 * 1024 * 1024) : undefined;
      const writer = fh ? new PositionalWriter(fh, 0, { sync: sync! }) : undefined;
      for await (const piece of await get()) {
        h?.update(piece);
        const wait = writer?.push(piece);
        if (wait) await wait;
      }
      if (h && h.digest('hex') !== srv.sha256) throw new Error('the stage read a different object');
      if (fh) {
        await writer!.end();
        await sync!.settle();
        await fh.sync();
        await fh.close();
      }
    };
    const checked = (run: () => Promise<string>) => async (): Promise<void> => {
      const sha = await run();
      if (sha !== srv.sha256) throw new Error(`the pipeline printed SHA-256 ${sha}, not the object's`);
    };
    const pipeFile = join(dir, 'pipeline.out');
    const curl = `curl -s --cacert ${srv.caFile} ${srv.url} | tee ${pipeFile} | sha256sum`;
    // rclone (Debian's) as the S3 client an operator would script; its remote is configured from the environment
    const rcloneEnv = {
      RCLONE_CONFIG_BENCH_TYPE: 's3', RCLONE_CONFIG_BENCH_PROVIDER: 'Other', RCLONE_CONFIG_BENCH_ENDPOINT: s3.endpoint,
      RCLONE_CONFIG_BENCH_ACCESS_KEY_ID: s3.accessKeyId, RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY: s3.secretAccessKey, RCLONE_CONFIG_BENCH_REGION: 'us-east-1',
      RCLONE_CONFIG: '/dev/null',
    };
    const rcloneCat = `rclone cat bench:bench/object.bin | tee ${pipeFile} | sha256sum`;
    const clean = async (): Promise<void> => {
      await store.remove(srv.sha256);
      rmSync(stageFile, { force: true });
      rmSync(pipeFile, { force: true });
    };
    const rate = (c: Candidate) => (mib * 1000) / median(c.ms);
    const show = (label: string, cands: Candidate[]): void => {
      report(`  ${label}:`);
      for (const c of cands) report(`    ${c.name.padEnd(44)} ${rate(c).toFixed(0).padStart(5)} MiB/s (best ${((mib * 1000) / Math.min(...c.ms)).toFixed(0)}), ${median(c.cpu).toFixed(0)} ms CPU`);
      const fills = cands.filter((c) => c.name.startsWith('fill'));
      const stages = cands.filter((c) => c.name.startsWith('stage'));
      const pipes = cands.filter((c) => c.name.startsWith('pipeline'));
      const slowest = stages.reduce((a, b) => (rate(a) <= rate(b) ? a : b));
      for (const fill of fills) {
        const vsStage = rate(fill) / rate(slowest);
        report(`    ${fill.name}: ${vsStage.toFixed(2)}x the slowest stage (${slowest.name}; goal >= 0.95x: ${vsStage >= 0.95 ? 'met' : 'not met'})`);
        for (const p of pipes) {
          const vsPipe = rate(fill) / rate(p);
          report(`    ${fill.name}: ${vsPipe.toFixed(2)}x ${p.name} (goal >= 1.0x: ${vsPipe >= 1 ? 'met' : 'not met'})`);
        }
      }
    };
    const httpsCands = (): Candidate[] => [
      candidate('stage: raw GET', stage(rawGet, 'get')),
      candidate('stage: GET + SHA-256', stage(rawGet, 'sha256')),
      candidate('stage: GET + durable write', stage(rawGet, 'durable write')),
      candidate(`fill, defaults (${data >= 256 * 1024 * 1024 ? '4 ranged GETs' : 'one stream'})`, () => fetcher.fetch(ref, https)),
      candidate('fill, one stream', () => single.fetch(ref, https)),
      candidate('pipeline: curl -s | tee FILE | sha256sum', checked(() => pipeline(curl))),
    ];
    const s3Cands = (): Candidate[] => [
      candidate('stage: raw GetObject', stage(rawS3, 'get')),
      candidate('stage: GetObject + SHA-256', stage(rawS3, 'sha256')),
      candidate('stage: GetObject + durable write', stage(rawS3, 'durable write')),
      candidate(`fill, defaults (${data >= 256 * 1024 * 1024 ? '4 ranged GETs' : 'one stream'})`, () => fetcher.fetch(ref, s3src)),
      candidate('fill, one stream', () => single.fetch(ref, s3src)),
      candidate('pipeline: rclone cat | tee FILE | sha256sum', checked(() => pipeline(rcloneCat, rcloneEnv))),
    ];
    report(`cache fill, ${mib.toFixed(0)} MiB object, cache dir on ${statfsType(dir)}, ${ROUNDS} rounds, candidates interleaved; fill = ranged/streamed GET, SHA-256 verified, temp file, datasync, fsync, rename; hashing ${hashesOffThread(data) ? 'on a worker' : 'inline'} (auto); ${execFileSync('curl', ['--version'], { encoding: 'utf8' }).split(' ').slice(0, 2).join(' ')}, ${execFileSync('rclone', ['version'], { encoding: 'utf8' }).split('\n')[0]}`);
    report('  the pipelines write FILE to the page cache and do not sync it; the fill and the durable-write stage sync theirs');
    const all = allCpus();
    for (const mode of ['shared', 'pinned'] as const) {
      // pinned: the servers on CPU 0, everything that fetches (this process, its workers, the pipelines) on CPU 1
      for (const [pid, cpu] of [[srv.child.pid!, '0'], [s3.pid, '0'], [process.pid, '1']] as const) pin(pid, mode === 'pinned' ? cpu : all);
      const label = mode === 'pinned' ? 'pinned: server on CPU 0, fetcher on CPU 1' : 'shared CPUs';
      const h = httpsCands();
      await interleave(h, clean);
      show(`HTTPS, ${label}`, h);
      const s = s3Cands();
      await interleave(s, clean);
      show(`S3 (versitygw), ${label}`, s);
    }
    pin(process.pid, all);
  } finally {
    rmSync(dir, { recursive: true, force: true });
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
