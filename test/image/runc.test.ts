// The released runtime image, run the way a kubelet would run it: pulled by
// digest from the local registry (what the test command's release step
// published, test/support/release.ts), unpacked into a runc bundle by umoci
// from the image's own config, then started by Debian's runc as 65532:65532
// with a read-only root filesystem, no capabilities, no new privileges and a
// tmpfs /tmp (the chart's securityContext). Every entrypoint must print its
// own help text; the image must hold no shell.
//
// Then the egress proxy from the image serves real traffic. Two network
// namespaces, nothing else reachable:
//
//   rlm-rnu (createNetns)                      rlm-rnc (the container's)
//   198.18.30.2  HTTPS upstream         <-->   198.18.31.2  egress proxy :3128 (runc)
//   198.18.31.1  curl -x 198.18.31.2:3128      127.0.0.1:53 test DNS server
//
// The proxy resolves the allowed name like a pod does, through the
// /etc/resolv.conf mounted into the container (the chart passes no --dns),
// checks the answer against --allow-range 198.18.0.0/15 and tunnels curl's
// CONNECT to the upstream. The image's own node then fetches through the
// proxy and verifies the upstream's certificate with NODE_EXTRA_CA_CERTS, as
// the chart sets it for a private CA bundle.
import { execFile, spawn, spawnSync, type ChildProcess, type SpawnSyncOptions } from 'node:child_process';
import { once } from 'node:events';
import { lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterInfo, registryAuthFile } from '../support/cluster.ts';
import { releaseInfo, type PublishedImage } from '../support/release.ts';
import { createNetns, type Netns } from '../egress/netns.ts';
import { until, type UntilOptions } from '../support/until.ts';
import { CODE_CACHE_SUFFIX } from '../../bin/run-bundle.ts';
import { COMPONENTS } from '../../bin/components.ts';
import { AGENT_NODE_OPTIONS } from '../../lib/values-schema.ts';
import { tempDir } from '../support/temp.ts';

const ROOT = join(import.meta.dirname, '../..');
const IMAGE = 'rlmesh-runtime';
const NONROOT = 65532;
const execFileAsync = promisify(execFile);

type Mount = { destination: string; type: string; source: string; options?: string[] };
type Spec = {
  process: {
    terminal?: boolean;
    user: { uid: number; gid: number; additionalGids?: number[] };
    args: string[];
    env: string[];
    cwd: string;
    capabilities?: Record<string, string[]>;
    noNewPrivileges?: boolean;
    oomScoreAdj?: number;
  };
  root: { path: string; readonly?: boolean };
  hostname?: string;
  mounts: Mount[];
  linux: { namespaces: { type: string; path?: string }[] } & Record<string, unknown>;
} & Record<string, unknown>;
type ImageConfig = { config: { User?: string; Entrypoint?: string[]; Cmd?: string[]; Env?: string[]; WorkingDir?: string } };

let work: string;
let published: PublishedImage;
let pulledDigest: string;
let imageConfig: ImageConfig;
let unpacked: Spec; // the config.json umoci wrote from the image config
let rootfs: string;
const containers = new Set<string>();
let serial = 0;

function sh(cmd: string, args: string[], opts: SpawnSyncOptions = {}): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.error) throw r.error;
  return { status: r.status ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
}

function must(cmd: string, args: string[]): string {
  const r = sh(cmd, args);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

type Run = { args: string[]; env?: Record<string, string>; netns?: string; mounts?: Mount[]; user?: { uid: number; gid: number } };

/**
 * A bundle for one container: the image's config as umoci unpacked it, with
 * the hardening a restricted pod gets (and no terminal), sharing the one
 * unpacked root filesystem read-only. Returns its id and folder.
 */
function bundle(name: string, run: Run): { id: string; dir: string } {
  const id = `rlmesh-runc-${process.pid}-${++serial}-${name}`;
  const dir = join(work, 'bundles', id);
  mkdirSync(dir, { recursive: true });
  const spec = structuredClone(unpacked);
  const none: string[] = [];
  spec.process = {
    ...spec.process,
    terminal: false,
    user: run.user ?? { uid: NONROOT, gid: NONROOT },
    args: run.args,
    env: [...spec.process.env.filter((e) => !e.startsWith('TERM=')), ...Object.entries(run.env ?? {}).map(([k, v]) => `${k}=${v}`)],
    capabilities: { bounding: none, effective: none, inheritable: none, permitted: none, ambient: none },
    noNewPrivileges: true,
  };
  delete spec.process.oomScoreAdj; // the VM withholds CAP_SYS_RESOURCE
  spec.root = { path: rootfs, readonly: true };
  spec.hostname = name;
  spec.mounts = [
    ...spec.mounts.filter((m) => m.destination !== '/tmp'),
    { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777', 'size=16m'] },
    ...(run.mounts ?? []),
  ];
  // a fresh network namespace (no network at all) unless told to join one
  spec.linux.namespaces = [
    ...spec.linux.namespaces.filter((n) => n.type !== 'network'),
    run.netns ? { type: 'network', path: `/var/run/netns/${run.netns}` } : { type: 'network' },
  ];
  writeFileSync(join(dir, 'config.json'), JSON.stringify(spec, null, 2));
  containers.add(id);
  return { id, dir };
}

/** runs a container to its end (runc removes it when its process exits) */
function runContainer(name: string, run: Run): { status: number; stdout: string; stderr: string } {
  const { id, dir } = bundle(name, run);
  const r = sh('runc', ['run', '--bundle', dir, id], { timeout: 60_000 });
  sh('runc', ['delete', '--force', id]);
  containers.delete(id);
  return r;
}

// a pod's args (the chart's `args: [egress]`) replace the image's Cmd and follow its Entrypoint
const entrypoint = (): string[] => imageConfig.config.Entrypoint ?? [];
const ro = (source: string, destination: string): Mount => ({ destination, type: 'bind', source, options: ['bind', 'ro', 'nosuid', 'nodev'] });

beforeAll(() => {
  // what the release step published; fails (never skips) if it did not run
  published = releaseInfo().images[IMAGE]!;
  if (!published) throw new Error(`the release published no ${IMAGE} image: ${JSON.stringify(releaseInfo().images)}`);
  work = tempDir('rlmesh-runc-');
  const oci = join(work, 'oci');
  // by digest, from the local registry only
  expect(published.ref).toBe(`${clusterInfo().registry}/${published.repository}@${published.digest}`);
  must('skopeo', ['copy', '--quiet', '--retry-times', '3', '--src-tls-verify=false', '--src-authfile', registryAuthFile(), `docker://${published.ref}`, `oci:${oci}:img`]);
  const index = JSON.parse(readFileSync(join(oci, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
  pulledDigest = index.manifests[0]!.digest;
  const blob = (digest: string) => readFileSync(join(oci, 'blobs', ...digest.split(':')), 'utf8');
  const manifest = JSON.parse(blob(pulledDigest)) as { config: { digest: string } };
  imageConfig = JSON.parse(blob(manifest.config.digest)) as ImageConfig;
  // umoci writes a runtime bundle: rootfs from the layers (owners kept), config.json from the image config
  const image = join(work, 'image');
  must('umoci', ['unpack', '--image', `${oci}:img`, image]);
  rootfs = join(image, 'rootfs');
  unpacked = JSON.parse(readFileSync(join(image, 'config.json'), 'utf8')) as Spec;
}, 180_000);

afterAll(() => {
  for (const id of containers) sh('runc', ['delete', '--force', id]);
  // umoci's rootfs keeps the image's owners and modes; root removes it all the same
  if (work) rmSync(work, { recursive: true, force: true });
});

describe(`the released ${IMAGE} image`, () => {
  it('is pulled by the digest the release published, from the local registry', () => {
    expect(published.ref).toMatch(new RegExp(`^${clusterInfo().registry.replace(/\./g, '\\.')}/rlmesh/rlmesh-runtime@sha256:[0-9a-f]{64}$`));
    expect(pulledDigest).toBe(published.digest);
  });

  it('runs as 65532:65532 with its entrypoint, and umoci carried that config into the bundle', () => {
    expect(imageConfig.config.User).toBe('65532:65532');
    expect(imageConfig.config.Entrypoint).toEqual(['/usr/local/bin/node', '--disable-warning=DEP0169', '--disable-warning=DEP0005', '--disable-warning=DEP0040', '/app/bin/rlmesh-runtime.js']);
    expect(imageConfig.config.WorkingDir).toBe('/app');
    expect(unpacked.process.user).toMatchObject({ uid: NONROOT, gid: NONROOT });
    expect(unpacked.process.args).toEqual([...entrypoint(), ...(imageConfig.config.Cmd ?? [])]);
    expect(unpacked.process.cwd).toBe('/app');
    for (const e of imageConfig.config.Env ?? []) expect(unpacked.process.env).toContain(e);
  });

  it('holds no shell: no /bin/sh, and no sh, bash, dash, ash or busybox anywhere', () => {
    for (const p of ['bin/sh', 'usr/bin/sh', 'bin/bash']) {
      expect(() => lstatSync(join(rootfs, p)), `/${p} exists in the image`).toThrow(/ENOENT/);
    }
    const shells = new Set(['sh', 'bash', 'dash', 'ash', 'busybox', 'zsh', 'ksh']);
    const found: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (shells.has(e.name)) found.push(p.slice(rootfs.length));
      }
    };
    walk(rootfs);
    expect(found).toEqual([]);
    // and the runtime agrees: there is nothing to exec
    const r = runContainer('shell', { args: ['/bin/sh', '-c', 'true'] });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/\/bin\/sh.*(no such file|not found)/i);
  });

  it('carries Debian\'s CA bundle at /etc/ssl/certs/ca-certificates.crt, which is the image\'s node\'s system store', () => {
    const bundleText = readFileSync(join(rootfs, 'etc/ssl/certs/ca-certificates.crt'), 'utf8');
    const count = bundleText.match(/-----BEGIN CERTIFICATE-----/g)?.length ?? 0;
    expect(count).toBeGreaterThan(100);
    // what NODE_USE_SYSTEM_CA=1 / --use-system-ca would trust: exactly that file's certificates
    const r = runContainer('system-ca', { args: ['/usr/local/bin/node', '-p', `require('node:tls').getCACertificates('system').length`] });
    expect({ status: r.status, stderr: r.stderr, system: Number(r.stdout.trim()) }).toEqual({ status: 0, stderr: '', system: count });
  });

  it.each(COMPONENTS)('%s --help prints that component\'s help text under runc, as 65532 on a read-only root', (component) => {
    // the text the component prints when started from the sources
    const source = sh(process.execPath, [join(ROOT, component, 'main.ts'), '--help'], { cwd: ROOT });
    expect(source.status).toBe(0);
    expect(source.stdout.trim().length).toBeGreaterThan(0);
    const r = runContainer(`help-${component}`, { args: [...entrypoint(), component, '--help'] });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.stdout, `${component} --help from the image printed ${r.stdout ? 'another text' : 'nothing'}`).toBe(source.stdout);
  });

  it.each(COMPONENTS)('%s: V8 accepts the code cache beside its bundle, with the entrypoint\'s flags and the agent\'s NODE_OPTIONS', (component) => {
    const file = `/app/${component}/main.js`;
    const probe = `const { Script } = require('node:vm'); const { readFileSync } = require('node:fs');
      const s = new Script(readFileSync('${file}', 'latin1'), { filename: '${file}', cachedData: readFileSync('${file}${CODE_CACHE_SUFFIX}') });
      console.log(JSON.stringify({ rejected: s.cachedDataRejected }));`;
    const [node, ...flags] = entrypoint().slice(0, -1);
    const r = runContainer(`cache-${component}`, { args: [node!, ...flags, '-e', probe], env: { NODE_OPTIONS: AGENT_NODE_OPTIONS } });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toEqual({ rejected: false });
  });

  it('gets no capabilities, no new privileges, a read-only root and a writable /tmp', () => {
    const probe = `
      const fs = require('node:fs');
      const status = Object.fromEntries(fs.readFileSync('/proc/self/status', 'utf8').split('\\n').map((l) => l.split(':\\t')));
      const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); return 'ok'; } catch (e) { return e.code; } };
      console.log(JSON.stringify({
        uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(),
        capEff: status.CapEff, capPrm: status.CapPrm, capBnd: status.CapBnd, noNewPrivs: status.NoNewPrivs,
        app: tryWrite('/app/probe'), etc: tryWrite('/etc/probe'), tmp: tryWrite('/tmp/probe'),
      }));`;
    const r = runContainer('probe', { args: ['/usr/local/bin/node', '-e', probe] });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({
      uid: NONROOT, gid: NONROOT, groups: [NONROOT],
      capEff: '0000000000000000', capPrm: '0000000000000000', capBnd: '0000000000000000', noNewPrivs: '1',
      app: 'EROFS', etc: 'EROFS', tmp: 'ok',
    });
  });

  it('lets 65532 reach its HOME (the /etc/passwd home a runtime sets)', () => {
    expect(unpacked.process.env).toContain('HOME=/home/nonroot');
    const r = runContainer('home', { args: ['/usr/local/bin/node', '-e', `require('node:fs').accessSync(require('node:os').homedir(), require('node:fs').constants.R_OK | require('node:fs').constants.X_OK); console.log('ok')`] });
    const modes = ['home', 'home/nonroot'].map((p) => `/${p} ${(statSync(join(rootfs, p)).mode & 0o7777).toString(8)} ${statSync(join(rootfs, p)).uid}`);
    expect({ status: r.status, stdout: r.stdout.trim() }, `HOME is not reachable by 65532 (${modes.join(', ')}): ${r.stderr.trim()}`).toEqual({ status: 0, stdout: 'ok' });
  });

  // OpenShift's restricted-v2 SCC (chart value podSecurity.arbitraryUid): a UID from the namespace's range, not in /etc/passwd, group 0
  it.each(COMPONENTS)('%s --help runs as an arbitrary UID with group 0, and that user can use HOME', (component) => {
    const user = { uid: 1000770000 + Math.floor(Math.random() * 10000), gid: 0 };
    const r = runContainer(`any-uid-${component}`, { args: [...entrypoint(), component, '--help'], user });
    expect({ status: r.status, stderr: r.stderr.trim() }, `${component} --help as ${user.uid}:0`).toEqual({ status: 0, stderr: '' });
    const home = statSync(join(rootfs, 'home/nonroot'));
    expect({ gid: home.gid, mode: (home.mode & 0o070).toString(8) }, 'HOME is group 0\'s, group-writable').toEqual({ gid: 0, mode: '70' });
    const probe = `const fs=require('node:fs');fs.accessSync('/home/nonroot',fs.constants.R_OK|fs.constants.X_OK);fs.accessSync('/tmp',fs.constants.W_OK);console.log(process.getuid(),process.getgid())`;
    const p = runContainer(`any-uid-home-${component}`, { args: ['/usr/local/bin/node', '-e', probe], user });
    expect({ status: p.status, stdout: p.stdout.trim(), stderr: p.stderr.trim() }).toEqual({ status: 0, stdout: `${user.uid} 0`, stderr: '' });
  });
});

describe('the egress proxy from the image, in a network namespace', () => {
  const NS = 'rlm-rnc'; // the container's namespace
  const LINK = { ns: '198.18.31.2', upstreamSide: '198.18.31.1' };
  const PROXY = `http://${LINK.ns}:3128`;
  let upstreamNs: Netns;
  let dns: ChildProcess;
  const dnsQueries: { query: string; type: string }[] = [];
  let proxy: ChildProcess;
  let proxyId: string;
  const proxyLog: Record<string, unknown>[] = [];
  const proxyStderr: string[] = [];
  let certDir: string;

  const ip = (...args: string[]) => must('ip', args);
  const dropContainerNetns = () => {
    sh('ip', ['netns', 'del', NS]);
    sh('ip', ['link', 'del', 'rnc-p']); // a pair left on the host by a run that died half-way
  };

  // what the proxy logged explains a wait that timed out
  const soon: UntilOptions = { timeoutMs: 10_000, intervalMs: 50, context: () => `proxy log ${JSON.stringify(proxyLog.slice(-5))}, stderr ${proxyStderr.join('')}` };

  async function curl(url: string): Promise<{ code: string; body: string; stderr: string }> {
    const args = ['netns', 'exec', upstreamNs.name, 'curl', '-sS', '-v', '-p', '--max-time', '10', '--cacert', join(certDir, 'cert.pem'), '-x', PROXY, '-w', '\n%{http_code}', url];
    const { stdout, stderr } = await execFileAsync('ip', args).catch((err: { stdout: string; stderr: string }) => ({ stdout: `${err.stdout}`, stderr: `${err.stderr}` }));
    const lines = stdout.split('\n');
    return { code: lines.pop()!, body: lines.join('\n').trimEnd(), stderr };
  }

  beforeAll(async () => {
    certDir = join(work, 'tls');
    mkdirSync(certDir);
    must('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
      '-subj', '/CN=ok.runc.test', '-addext', 'subjectAltName=DNS:ok.runc.test',
      '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem'),
    ]);

    // the upstream's namespace (also joined to the host, which this test never uses)
    upstreamNs = createNetns('rnu', 30);
    await upstreamNs.spawnNode(join(ROOT, 'test/egress/upstream-server.ts'), [upstreamNs.nsAddress, upstreamNs.nsAddress6, join(certDir, 'cert.pem'), join(certDir, 'key.pem')]);

    // the container's namespace, linked to the upstream's only
    dropContainerNetns();
    ip('netns', 'add', NS);
    ip('link', 'add', 'rnc-p', 'type', 'veth', 'peer', 'name', 'rnc-u');
    ip('link', 'set', 'rnc-p', 'netns', NS);
    ip('link', 'set', 'rnc-u', 'netns', upstreamNs.name);
    ip('-n', NS, 'addr', 'add', `${LINK.ns}/24`, 'dev', 'rnc-p');
    ip('-n', upstreamNs.name, 'addr', 'add', `${LINK.upstreamSide}/24`, 'dev', 'rnc-u');
    ip('-n', NS, 'link', 'set', 'lo', 'up');
    ip('-n', NS, 'link', 'set', 'rnc-p', 'up');
    ip('-n', upstreamNs.name, 'link', 'set', 'rnc-u', 'up');
    ip('-n', NS, 'route', 'add', `${upstreamNs.nsAddress}/32`, 'via', LINK.upstreamSide);

    // DNS on 127.0.0.1:53 of the container's namespace, for its /etc/resolv.conf
    dns = spawn('ip', ['netns', 'exec', NS, process.execPath, join(ROOT, 'test/image/netns-dns.ts'), JSON.stringify({
      'ok.runc.test': { A: [upstreamNs.nsAddress] },
      'notlisted.runc.test': { A: [upstreamNs.nsAddress] },
    })], { stdio: ['ignore', 'pipe', 'inherit'] });
    const dnsLines = createInterface({ input: dns.stdout! });
    dnsLines.on('line', (l) => {
      const m = JSON.parse(l) as { query?: string; type?: string };
      if (m.query) dnsQueries.push({ query: m.query, type: m.type! });
    });
    await Promise.race([
      once(dnsLines, 'line'),
      once(dns, 'exit').then(([code]) => {
        throw new Error(`the DNS server in ${NS} exited with ${code} before it was ready`);
      }),
    ]);
    writeFileSync(join(work, 'resolv.conf'), 'nameserver 127.0.0.1\noptions timeout:2 attempts:2\n');

    // the proxy, as the chart starts it (args [egress]) plus flags for this test's names
    const b = bundle('egress', {
      netns: NS,
      args: [...entrypoint(), 'egress',
        '--port', '3128', '--health-port', '8081', '--metrics-port', '9090',
        '--allow', 'ok.runc.test', '--ports', '443', '--allow-range', '198.18.0.0/15'],
      mounts: [ro(join(work, 'resolv.conf'), '/etc/resolv.conf')],
    });
    proxyId = b.id;
    proxy = spawn('runc', ['run', '--bundle', b.dir, b.id], { stdio: ['ignore', 'pipe', 'pipe'] });
    createInterface({ input: proxy.stdout! }).on('line', (l) => {
      try {
        proxyLog.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        proxyLog.push({ raw: l });
      }
    });
    proxy.stderr!.on('data', (d: Buffer) => proxyStderr.push(d.toString()));
    await until('the egress proxy in runc ready', () => {
      if (proxy.exitCode !== null) throw new Error(`the egress container exited with ${proxy.exitCode}: ${proxyStderr.join('')} ${JSON.stringify(proxyLog)}`);
      return proxyLog.find((l) => l.msg === 'egress proxy ready');
    }, soon);
  }, 120_000);

  afterAll(async () => {
    if (proxyId) {
      sh('runc', ['delete', '--force', proxyId]);
      containers.delete(proxyId);
    }
    if (proxy && proxy.exitCode === null) await Promise.race([once(proxy, 'exit'), new Promise((r) => setTimeout(r, 5_000))]);
    if (dns && dns.exitCode === null) dns.kill('SIGKILL');
    dropContainerNetns();
    upstreamNs?.destroy();
  });

  it('tunnels one allowed CONNECT to the upstream, resolved through the container\'s resolv.conf, and logs the allow decision', async () => {
    const r = await curl('https://ok.runc.test/through-runc');
    expect(r.stderr).toMatch(/CONNECT ok\.runc\.test:443 HTTP\/1\.1/);
    // the upstream names its own address: the bytes came from it, through the tunnel, TLS verified by curl
    expect({ code: r.code, body: r.body }).toEqual({ code: '200', body: `upstream ${upstreamNs.nsAddress} ok.runc.test /through-runc` });
    expect(dnsQueries).toContainEqual({ query: 'ok.runc.test', type: 'A' });
    const line = await until('the allow decision', () => proxyLog.findLast((l) => l.host === 'ok.runc.test' && l.decision === 'allowed'), soon);
    expect(line).toMatchObject({ host: 'ok.runc.test', port: 443, client: LINK.upstreamSide, decision: 'allowed', rule: 'allow-range', address: upstreamNs.nsAddress });
  });

  it('refuses a name that is not on its allow-list, and logs that decision', async () => {
    const r = await curl('https://notlisted.runc.test/');
    expect(r.code).not.toBe('200');
    expect(r.stderr).toMatch(/< HTTP\/1\.1 403/);
    expect(r.stderr).toMatch(/x-rlmesh-egress-refused: not-allowed/i);
    const line = await until('the refusal', () => proxyLog.findLast((l) => l.host === 'notlisted.runc.test'), soon);
    expect(line).toMatchObject({ decision: 'refused', rule: 'not-allowed', client: LINK.upstreamSide });
  });

  it('the image\'s node verifies the upstream\'s TLS certificate through the proxy with NODE_EXTRA_CA_CERTS, and refuses it without', async () => {
    const fetchScript = `fetch('https://ok.runc.test/from-image-node')
      .then(async (r) => console.log(JSON.stringify({ status: r.status, body: await r.text() })))
      .catch((e) => console.log(JSON.stringify({ error: e.cause?.code ?? String(e) })));`;
    const caMount = ro(join(certDir, 'cert.pem'), '/etc/rlmesh/ca/ca.crt'); // where the chart mounts a private CA bundle
    const env = { NODE_USE_ENV_PROXY: '1', HTTPS_PROXY: 'http://127.0.0.1:3128' };
    const trusted = runContainer('fetch-ca', { netns: NS, mounts: [caMount], args: ['/usr/local/bin/node', '-e', fetchScript], env: { ...env, NODE_EXTRA_CA_CERTS: '/etc/rlmesh/ca/ca.crt' } });
    expect(trusted.stderr).toBe('');
    expect(JSON.parse(trusted.stdout)).toEqual({ status: 200, body: `upstream ${upstreamNs.nsAddress} ok.runc.test /from-image-node\n` });
    const untrusted = runContainer('fetch-noca', { netns: NS, mounts: [caMount], args: ['/usr/local/bin/node', '-e', fetchScript], env });
    expect(JSON.parse(untrusted.stdout)).toEqual({ error: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    // both went through the proxy in the other container
    const fromNode = (l: Record<string, unknown>) => l.host === 'ok.runc.test' && l.decision === 'allowed' && l.client === '127.0.0.1';
    await until('two tunnels from the image\'s node', () => (proxyLog.filter(fromNode).length >= 2 ? true : undefined), soon);
    expect(proxyLog.filter(fromNode)).toHaveLength(2);
  });
});

