// Benchmark: the egress proxy vs a direct connection vs Squid (Debian's
// squid, with the equivalent allow-list: one name, the same ports) vs Stripe's
// smokescreen (built from its Go module by test/bench/build-smokescreen.sh,
// with an ACL allowing the one name; it has no port list), measured side by
// side in one run. Upstreams live in a network namespace on a veth
// pair (198.18.20.0/24); the proxies listen on 127.0.0.1.
//
//   node test/bench/egress.ts [--seconds 3] [--rounds 7] [--connects 400] [--idle 2000]
//
// Prints bulk CONNECT throughput in two modes, connection setup latency
// p50/p99 (added over direct), and RSS with N idle tunnels open, as ratios.
// Bulk modes: "shared", every process on every CPU; "pinned" (taskset), the
// bench client and the upstream server on CPU 0 and each relay alone on
// CPU 1, as when the proxy runs as its own pod on its own node. In pinned
// mode "direct" is the client and the upstream alone on CPU 0.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync, chmodSync } from 'node:fs';
import net from 'node:net';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startDnsServer } from '../egress/dns-server.ts';
import { createNetns } from '../egress/netns.ts';
import { allCpus, pin } from './pin.ts';
import { tempDir } from '../support/temp.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '7' },
    connects: { type: 'string', default: '400' },
    idle: { type: 'string', default: '2000' },
  },
});
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const CONNECTS = Number(values.connects);
const IDLE = Number(values.idle);

const ROOT = join(import.meta.dirname, '../..');
const NAME = 'bench.egress.test';
// resolves like NAME but is on no allow-list: every relay must refuse it, or its configuration is not the equivalent
const UNLISTED = 'unlisted.egress.test';
const PROXY_PORT = 24128;
const SQUID_PORT = 24129;
const SMOKESCREEN_PORT = 24132;
const work = tempDir('egress-bench-');
chmodSync(work, 0o777);

type Mode = 'direct' | 'proxy' | 'squid' | 'smokescreen';
type Relay = Exclude<Mode, 'direct'>;
const MODES: Mode[] = ['direct', 'proxy', 'squid', 'smokescreen'];
const RELAY_PORT: Record<Relay, number> = { proxy: PROXY_PORT, squid: SQUID_PORT, smokescreen: SMOKESCREEN_PORT };
const perMode = <T>(make: () => T): Record<Mode, T> => Object.fromEntries(MODES.map((m) => [m, make()])) as Record<Mode, T>;
const children: ChildProcess[] = [];
const ns = createNetns('egb', 20);

function cleanup(): void {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  ns.destroy();
}
process.on('exit', cleanup);
process.on('SIGINT', () => process.exit(130));

async function waitForPort(port: number, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const s = net.connect({ host: '127.0.0.1', port });
      await once(s, 'connect');
      s.destroy();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`${what} did not listen on 127.0.0.1:${port}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Opens a TCP stream to the upstream port, directly or through a proxy's CONNECT. */
async function open(mode: Mode, port: number, host = NAME): Promise<net.Socket> {
  if (mode === 'direct') {
    const s = net.connect({ host: ns.nsAddress, port, noDelay: true });
    await once(s, 'connect');
    return s;
  }
  const s = net.connect({ host: '127.0.0.1', port: RELAY_PORT[mode], noDelay: true });
  await once(s, 'connect');
  s.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
  let buf = '';
  for (;;) {
    const [chunk] = (await once(s, 'data')) as [Buffer];
    buf += chunk.toString('latin1');
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) continue;
    if (!/^HTTP\/1\.[01] 200/.test(buf)) throw new Error(`${mode} refused CONNECT: ${buf.split('\r\n')[0]}`);
    if (buf.length > end + 4) s.unshift(Buffer.from(buf.slice(end + 4), 'latin1'));
    return s;
  }
}

/** CPU seconds (user + system) a process has used so far. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

/** Machine-wide CPU seconds so far from /proc/stat: idle (idle + iowait), softirq, and the total over all CPUs. */
function machineSeconds(): { idle: number; softirq: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  return { idle: (f[3]! + f[4]!) / 100, softirq: f[6]! / 100, total: f.reduce((a, b) => a + b, 0) / 100 };
}

const relayPid: Partial<Record<Mode, number>> = {};
let upstreamPid = 0;
// per mode, over all bulk rounds: bytes, and the CPU seconds of each party (the bench client is this process)
// and of the machine, so the report shows what each relayed GiB costs and whether the CPUs were the limit
interface Spent { bytes: number; client: number; upstream: number; relay: number; softirq: number; idle: number; machine: number }
const nothingSpent = (): Spent => ({ bytes: 0, client: 0, upstream: 0, relay: 0, softirq: 0, idle: 0, machine: 0 });
type BulkMode = 'shared' | 'pinned';
const spentIn: Record<BulkMode, Record<Mode, Spent>> = { shared: perMode(nothingSpent), pinned: perMode(nothingSpent) };

async function throughput(mode: Mode, spent: Record<Mode, Spent>): Promise<number> {
  const s = await open(mode, 7000);
  let bytes = 0;
  const pid = relayPid[mode];
  const relayBefore = pid ? cpuSeconds(pid) : 0;
  const upstreamBefore = cpuSeconds(upstreamPid);
  const clientBefore = process.cpuUsage();
  const machineBefore = machineSeconds();
  const started = performance.now();
  s.on('data', (d: Buffer) => {
    bytes += d.length;
  });
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const elapsed = (performance.now() - started) / 1000;
  const client = process.cpuUsage(clientBefore);
  const machine = machineSeconds();
  const x = spent[mode];
  x.bytes += bytes;
  x.client += (client.user + client.system) / 1e6;
  x.upstream += cpuSeconds(upstreamPid) - upstreamBefore;
  x.relay += pid ? cpuSeconds(pid) - relayBefore : 0;
  x.softirq += machine.softirq - machineBefore.softirq;
  x.idle += machine.idle - machineBefore.idle;
  x.machine += machine.total - machineBefore.total;
  s.destroy();
  return bytes / elapsed / 2 ** 20;
}

/** Interleaves the modes connection by connection, so load on the machine affects each alike. */
async function setupLatencies(modes: Mode[]): Promise<Record<Mode, number[]>> {
  const out = perMode<number[]>(() => []);
  for (let i = 0; i < CONNECTS; i++) {
    for (const mode of modes) {
      const started = performance.now();
      const s = await open(mode, 7001);
      s.write('x');
      await once(s, 'data');
      out[mode].push(performance.now() - started);
      s.destroy();
    }
  }
  for (const m of modes) out[m].sort((a, b) => a - b);
  return out;
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}
function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
}
function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN) / 1024;
}

async function idleTunnels(mode: Relay, pid: number): Promise<{ before: number; after: number }> {
  const before = rssMiB(pid);
  const sockets: net.Socket[] = [];
  for (let i = 0; i < IDLE; i += 100) {
    sockets.push(...(await Promise.all(Array.from({ length: Math.min(100, IDLE - i) }, () => open(mode, 7001)))));
  }
  await new Promise((r) => setTimeout(r, 1000));
  const after = rssMiB(pid);
  for (const s of sockets) s.destroy();
  await new Promise((r) => setTimeout(r, 1000));
  return { before, after };
}

const loadAtStart = loadavg().map((l) => l.toFixed(2)).join(' ');

async function main(): Promise<void> {
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', `/CN=${NAME}`,
    '-keyout', join(work, 'key.pem'), '-out', join(work, 'cert.pem')]);
  const upstream = await ns.spawnNode(join(ROOT, 'test/egress/upstream-server.ts'), [ns.nsAddress, ns.nsAddress6, join(work, 'cert.pem'), join(work, 'key.pem')]);
  children.push(upstream.child);
  upstreamPid = upstream.child.pid!; // `ip netns exec` execs node in place
  const dns = await startDnsServer({ [NAME]: { A: [ns.nsAddress], ttl: 30 }, [UNLISTED]: { A: [ns.nsAddress], ttl: 30 } });

  const proxy = spawn(process.execPath, [join(ROOT, 'egress/main.ts'),
    '--port', String(PROXY_PORT), '--health-port', '24130', '--metrics-port', '24131',
    '--allow', NAME, '--ports', '7000,7001', '--allow-range', '198.18.0.0/15', '--dns', dns.address,
    '--max-tunnels', String(IDLE + 100), '--max-tunnels-per-client', String(IDLE + 100), '--idle-timeout-ms', '600000',
    // the idle tunnels all come from this one address, and each holds a 16 KiB read buffer against its
    // client's share (a thirty-second of the memory limit); 1024 MiB also keeps the 16 MiB free-buffer
    // pools the bulk figures were measured with
    '--memory-limit-mib', String(Math.max(1024, Math.ceil(((IDLE + 100) * 16 * 32) / 1024))),
  ], { env: { ...process.env, RLMESH_LISTEN_HOST: '127.0.0.1' }, stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(proxy);

  writeFileSync(join(work, 'hosts'), `${ns.nsAddress} ${NAME}\n`);
  writeFileSync(join(work, 'squid.conf'), [
    `http_port 127.0.0.1:${SQUID_PORT}`,
    `acl allowed_dst dstdomain ${NAME}`,
    'acl allowed_ports port 7000 7001',
    'acl CONNECT method CONNECT',
    'http_access deny !allowed_ports',
    'http_access allow CONNECT allowed_dst',
    'http_access deny all',
    `hosts_file ${join(work, 'hosts')}`,
    'dns_nameservers 127.0.0.1',
    'cache deny all',
    'cache_mem 8 MB',
    `access_log stdio:${join(work, 'access.log')}`,
    `cache_log ${join(work, 'cache.log')}`,
    `pid_filename ${join(work, 'squid.pid')}`,
    `coredump_dir ${work}`,
    'max_filedescriptors 16384',
    'shutdown_lifetime 1 second',
    '',
  ].join('\n'));
  const squid = spawn('squid', ['-N', '-f', join(work, 'squid.conf')], { stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(squid);
  // smokescreen: the same name allowed (its default ACL, since bench clients present no role), the benchmarking range
  // re-opened as for the proxy, the bench's own resolver; statsd to a discard port on loopback
  writeFileSync(join(work, 'smokescreen-acl.yaml'), `---\nversion: v1\nservices: []\ndefault:\n  project: bench\n  action: enforce\n  allowed_domains:\n    - ${NAME}\n`);
  writeFileSync(join(work, 'smokescreen.yaml'), [
    'allow_missing_role: true', `acl_file: ${join(work, 'smokescreen-acl.yaml')}`, 'allow_ranges: ["198.18.0.0/15"]',
    `resolver_addresses: ["${dns.address}"]`, 'statsd_address: 127.0.0.1:9', 'idle_timeout: 600s', '',
  ].join('\n'));
  const smokescreenBin = execFileSync('bash', [join(ROOT, 'test/bench/build-smokescreen.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
  const smokescreen = spawn(smokescreenBin, ['--config-file', join(work, 'smokescreen.yaml'), '--listen-ip', '127.0.0.1', '--listen-port', String(SMOKESCREEN_PORT)], { stdio: ['ignore', 'ignore', 'ignore'] });
  children.push(smokescreen);
  relayPid.proxy = proxy.pid!;
  relayPid.squid = squid.pid!;
  relayPid.smokescreen = smokescreen.pid!;
  await waitForPort(PROXY_PORT, 'the egress proxy');
  await waitForPort(SQUID_PORT, 'squid');
  await waitForPort(SMOKESCREEN_PORT, 'smokescreen');

  const modes = MODES;
  for (const relay of ['proxy', 'squid', 'smokescreen'] as const) {
    const refused = await open(relay, 7000, UNLISTED).then((sock) => (sock.destroy(), false), () => true);
    if (!refused) throw new Error(`${relay} let ${UNLISTED} through: its allow-list is not the one the others enforce`);
  }
  const tputIn: Record<BulkMode, Record<Mode, number[]>> = { shared: perMode(() => []), pinned: perMode(() => []) };
  for (let r = 0; r < ROUNDS; r++) for (const m of modes) tputIn.shared[m].push(await throughput(m, spentIn.shared));
  const all = allCpus();
  pin(process.pid, '0');
  pin(upstreamPid, '0');
  for (const relay of ['proxy', 'squid', 'smokescreen'] as const) pin(relayPid[relay]!, '1');
  for (let r = 0; r < ROUNDS; r++) for (const m of modes) tputIn.pinned[m].push(await throughput(m, spentIn.pinned));
  for (const pid of [process.pid, upstreamPid, ...Object.values(relayPid)]) pin(pid, all);
  await setupLatencies(modes); // warm-up
  const lat = await setupLatencies(modes);
  const idleProxy = await idleTunnels('proxy', proxy.pid!);
  const idleSquid = await idleTunnels('squid', squid.pid!);
  const idleSmokescreen = await idleTunnels('smokescreen', smokescreen.pid!);

  const p = (m: Mode, q: number) => pct(lat[m], q);
  const f = (x: number, d = 2) => x.toFixed(d);
  console.log(`\negress proxy benchmark (${new Date().toISOString()}, node ${process.version}, squid ${squidVersion()}, ${ROUNDS}×${SECONDS}s bulk per mode, ${CONNECTS} setups, ${IDLE} idle tunnels)`);
  console.log(`machine: ${cpus().length} CPUs, load average at start ${loadAtStart}, at end ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const bulk = (label: string, tput: Record<Mode, number[]>, spent: Record<Mode, Spent>): void => {
    const t = perMode(() => 0);
    for (const m of modes) t[m] = median(tput[m]);
    console.log(`\nbulk CONNECT throughput, ${label}, median MiB/s`);
    console.log(`  direct ${f(t.direct, 0)}  proxy ${f(t.proxy, 0)}  squid ${f(t.squid, 0)}  smokescreen ${f(t.smokescreen, 0)}`);
    for (const m of modes) console.log(`    ${m} rounds: ${tput[m].map((x) => f(x, 0)).join(' ')}`);
    console.log(`  proxy/direct ${f(t.proxy / t.direct)}×   proxy/squid ${f(t.proxy / t.squid)}×   proxy/smokescreen ${f(t.proxy / t.smokescreen)}×   (goal ≥ 0.9×, ≥ 1.2× squid)`);
    const perGiB = (m: Mode, k: keyof Spent) => spent[m][k] / (spent[m].bytes / 2 ** 30);
    console.log(`  relay CPU per GiB: proxy ${f(perGiB('proxy', 'relay'), 3)} s, squid ${f(perGiB('squid', 'relay'), 3)} s, smokescreen ${f(perGiB('smokescreen', 'relay'), 3)} s (proxy/squid ${f(perGiB('proxy', 'relay') / perGiB('squid', 'relay'))}×, proxy/smokescreen ${f(perGiB('proxy', 'relay') / perGiB('smokescreen', 'relay'))}× (goal ≤ 1×); less is better, independent of machine load)`);
    console.log('  CPU seconds per GiB delivered (client = this bench; softirq = kernel packet work not charged to a process), and the machine\'s idle CPUs:');
    for (const m of modes) {
      const x = spent[m];
      const parts = (['client', 'upstream', 'relay', 'softirq'] as const).map((k) => `${k} ${f(perGiB(m, k), 3)}`).join(', ');
      const total = perGiB(m, 'client') + perGiB(m, 'upstream') + perGiB(m, 'relay') + perGiB(m, 'softirq');
      console.log(`    ${m.padEnd(11)} ${parts}; sum ${f(total, 3)} s/GiB; idle ${f((x.idle / x.machine) * cpus().length)} of ${cpus().length} CPUs`);
    }
  };
  bulk('shared CPUs', tputIn.shared, spentIn.shared);
  bulk('pinned: client + upstream on CPU 0, the relay alone on CPU 1', tputIn.pinned, spentIn.pinned);
  console.log('\nconnection setup to first echoed byte, ms (p50 / p99)');
  for (const m of modes) console.log(`  ${m.padEnd(11)} ${f(p(m, 50), 3)} / ${f(p(m, 99), 3)}`);
  console.log(`  added by proxy: p50 ${f(p('proxy', 50) - p('direct', 50), 3)} ms, p99 ${f(p('proxy', 99) - p('direct', 99), 3)} ms (goal p50 ≤ 0.5 ms)`);
  console.log(`  added by squid: p50 ${f(p('squid', 50) - p('direct', 50), 3)} ms, p99 ${f(p('squid', 99) - p('direct', 99), 3)} ms`);
  console.log(`  added by smokescreen: p50 ${f(p('smokescreen', 50) - p('direct', 50), 3)} ms, p99 ${f(p('smokescreen', 99) - p('direct', 99), 3)} ms`);
  console.log(`\nRSS with ${IDLE} idle tunnels, MiB (before → with tunnels)`);
  console.log(`  proxy ${f(idleProxy.before, 0)} → ${f(idleProxy.after, 0)}   squid ${f(idleSquid.before, 0)} → ${f(idleSquid.after, 0)}   smokescreen ${f(idleSmokescreen.before, 0)} → ${f(idleSmokescreen.after, 0)}   (goal ≤ 300 MiB)`);
  await dns.close();
  cleanup();
  process.exit(0);
}

function squidVersion(): string {
  return /Version (\S+)/.exec(execFileSync('squid', ['-v'], { encoding: 'utf8' }))?.[1] ?? '?';
}

function run(cmd: string, args: string[]): Promise<void> {
  const c = spawn(cmd, args, { stdio: 'ignore' });
  return once(c, 'exit').then(([code]) => {
    if (code !== 0) throw new Error(`${cmd} exited with ${code}`);
  });
}

main().catch((err: Error) => {
  console.error(`egress benchmark failed: ${err.message}`);
  cleanup();
  process.exit(1);
});
