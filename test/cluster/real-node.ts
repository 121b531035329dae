// Real nodes for the local cluster, beside the kwok nodes: kubelet (built by
// build-binaries.sh) + Debian's containerd, runc and CNI plugins (bridge,
// host-local, loopback, portmap), each node in a network namespace of its own
// that this module creates, joined by a veth to the bridge rlmesh0 on the host.
//
// Contained: no namespace has a default route or NAT. The only addresses are
// the harness's own: the node link 10.213.0.0/24 (host 10.213.0.1, node i at
// 10.213.0.(10+i)), pod subnets 10.214.i.0/24, and the Service range. The
// apiserver, the registry and its token service listen on 127.0.0.1, which a
// namespace cannot reach, so forward.ts serves them on 10.213.0.1 too (the apiserver's serving
// certificate names that address: test/cluster/up).
//
// Each kubelet authenticates as system:node:<name> (client certificate from the
// cluster CA, group system:nodes) under the Node authorizer and NodeRestriction.
// containerd pulls registry.rlmesh.dev/... from the local registry through a
// hosts.toml mirror. Every process of a node (containerd, shims, kubelet, the
// containers) lives under the cgroup /rlmesh-<name>, so stopping it kills
// exactly those pids; then it unmounts what the kubelet and containerd
// mounted, and removes the pod namespaces, the node namespace, its veth, its
// routes and its cgroups.
//
//   node test/cluster/real-node.ts start NAME...        (test/cluster/up, RLMESH_REAL_NODES)
//   node test/cluster/real-node.ts host-network         (the bridge and the forwarder alone: test/cluster/up, first)
//   node test/cluster/real-node.ts stop NAME... | --all (test/cluster/down does --all)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, rmdirSync, rmSync, statSync, unlinkSync, writeFileSync, closeSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publishPauseImage } from '../images/pause/build.ts';
import { until } from '../support/until.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '../..');

/** The harness's own addresses; nothing else is routed anywhere a real node or pod can see. */
export const NET = {
  bridge: 'rlmesh0',
  hostAddress: '10.213.0.1',
  /** the platform's registry (registry.rlmesh.dev) over TLS on 443, as pods reach it: the local registry's TLS listener */
  registryAddress: '10.213.0.2',
  linkSubnet: '10.213.0.0/24',
  podSupernet: '10.214.0.0/16',
  serviceRange: '10.96.0.0/16',
  /** "public" servers of the tests: on the host's bridge, let through by the egress tests' own allow-ranges */
  publicSubnet: '198.18.0.0/24',
  publicAddress: '198.18.0.1',
  /** the kube-dns Service (CoreDNS, test/cluster/cluster-dns.ts) */
  dnsService: '10.96.0.10',
  /** the apiserver's port on the host's bridge: the kubernetes Service's endpoint, a port the chart's NetworkPolicies allow */
  apiserverPort: 6443,
} as const;
export const nodeAddress = (index: number): string => `10.213.0.${10 + index}`;
export const podSubnet = (index: number): string => `10.214.${index}.0/24`;
/** Every destination a real node or pod may have a route to. */
export const HARNESS_SUBNETS = [NET.linkSubnet, NET.podSupernet, NET.serviceRange, NET.publicSubnet];
export const SANDBOX_REGISTRY = 'registry.rlmesh.dev';
const CNI_BIN = '/usr/lib/cni';
const CGROUP_ROOT = '/sys/fs/cgroup';

export type Taint = { key: string; value?: string; effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute' };

export type RealNode = {
  name: string;
  index: number;
  netns: string;
  hostVeth: string;
  address: string;
  podSubnet: string;
  dir: string;
  kubeconfig: string;
  containerdSocket: string;
  cgroup: string;
  /** seconds from the start of startRealNode to each step's end */
  timings?: Record<string, number>;
};

type Info = { dir: string; kubeconfig: string; caFile: string; registry: string; bin: string; ports: { apiserver: number; registry: number; registryToken: number; registryTls: number } };

const clusterDir = (): string => process.env.RLMESH_CLUSTER_DIR ?? join(homedir(), '.cache/rlmesh-cluster');

/** cluster.json, or while test/cluster/up is still starting, cluster.json.partial. */
function info(): Info {
  for (const f of ['cluster.json', 'cluster.json.partial']) {
    const file = join(clusterDir(), f);
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as Info;
  }
  throw new Error(`the local cluster is not running (${join(clusterDir(), 'cluster.json')} missing): start it with test/cluster/up`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function sh(cmd: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv } = {}): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input: opts.input, env: opts.env ?? process.env, maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw new Error(`${cmd} ${args.join(' ')}: ${r.error.message}`, { cause: r.error });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}
function trySh(cmd: string, args: string[]): boolean {
  return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
}
const ip = (...args: string[]) => sh('ip', args);

function kubectl(args: string[], allowFail = false): { status: number; stdout: string; stderr: string } {
  const i = info();
  const r = spawnSync(join(i.bin, 'kubectl'), args, { encoding: 'utf8', env: { ...process.env, KUBECONFIG: i.kubeconfig }, maxBuffer: 64 * 1024 * 1024 });
  const out = { status: r.status ?? -1, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? r.error?.message ?? '') };
  if (out.status !== 0 && !allowFail) throw new Error(`kubectl ${args.join(' ')} failed (${out.status}): ${out.stderr.trim()}`);
  return out;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const readPid = (file: string): number | undefined => (existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) || undefined : undefined);

/** Starts cmd detached (own session), stdout/stderr to log, recording its pid (and its command line, for a later restart). */
function launch(pidFile: string, log: string, argv: string[]): number {
  mkdirSync(dirname(pidFile), { recursive: true });
  mkdirSync(dirname(log), { recursive: true });
  const fd = openSync(log, 'a');
  const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  child.unref();
  if (!child.pid) throw new Error(`could not start ${argv.join(' ')}`);
  writeFileSync(pidFile, `${child.pid}\n`);
  writeFileSync(`${pidFile}.cmd`, argv.join('\0'));
  return child.pid;
}

/** The last lines of each log that exists, for a timeout error's context. */
function logTails(logs: string[]): string {
  return logs
    .filter(existsSync)
    .map((l) => `--- ${l}:\n${readFileSync(l, 'utf8').split('\n').slice(-25).join('\n')}`)
    .join('\n');
}

// ---------------------------------------------------------------- preflight

function preflight(i: Info): void {
  const missing: string[] = [];
  const need = (path: string, what: string) => existsSync(path) || missing.push(`${path} (${what})`);
  for (const b of ['kubelet', 'kube-proxy', 'kube-router']) need(join(i.bin, b), 'bash test/cluster/build-binaries.sh builds it');
  for (const p of ['containerd', 'ctr']) need(`/usr/bin/${p}`, 'Debian package containerd: test/install-deps.sh');
  need('/usr/sbin/runc', 'Debian package runc');
  for (const p of ['bridge', 'host-local', 'loopback', 'portmap']) need(`${CNI_BIN}/${p}`, 'Debian package containernetworking-plugins');
  need('/usr/sbin/iptables', 'Debian package iptables (kube-proxy, kube-router, the portmap plugin)');
  need('/usr/sbin/ipset', 'Debian package ipset (kube-router)');
  if (!existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables')) trySh('modprobe', ['br_netfilter']);
  need('/proc/sys/net/bridge/bridge-nf-call-iptables', 'the br_netfilter kernel module');
  need('/usr/bin/nsenter', 'Debian package util-linux');
  if (missing.length) throw new Error(`a real node needs what is missing here: ${missing.join('; ')}`);
  const cmd = readFileSync(join(i.dir, 'cmd/kube-apiserver'), 'utf8').split('\0');
  const flag = (name: string) => cmd.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? '';
  const san = sh('openssl', ['x509', '-in', join(i.dir, 'pki/apiserver.crt'), '-noout', '-ext', 'subjectAltName']);
  if (!flag('authorization-mode').split(',').includes('Node') || !flag('enable-admission-plugins').split(',').includes('NodeRestriction') || !flag('kubelet-client-certificate') || flag('kubelet-preferred-address-types') !== 'InternalIP' || !san.includes(`IP Address:${NET.hostAddress}`)) {
    throw new Error(
      `the running local cluster was started by an older test/cluster/up (its apiserver lacks the Node authorizer, NodeRestriction, the kubelet client certificate, InternalIP as the only kubelet address it dials (any other makes it resolve node names with the machine's resolver) or the serving certificate for ${NET.hostAddress}): restart it with test/cluster/down && test/cluster/up`,
    );
  }
}

// ---------------------------------------------------------------- host side: the bridge and the forwarder

/** Another local cluster (a sibling state folder) whose forwarder runs: it owns the bridge and the node network names. */
function otherClusterOnBridge(dir: string): string | undefined {
  const parent = dirname(dir);
  for (const d of readdirSync(parent)) {
    const other = join(parent, d);
    if (other === dir || !d.startsWith('rlmesh-cluster')) continue;
    const pid = readPid(join(other, 'pids/hostnet-forward'));
    if (pid && alive(pid)) return other;
  }
  return undefined;
}

function ensureHostNetwork(i: Info): void {
  const owner = otherClusterOnBridge(i.dir);
  if (owner) {
    throw new Error(
      `the cluster in ${owner} runs real nodes on ${NET.bridge} (${NET.hostAddress}), which a second cluster's real nodes would share: stop it with RLMESH_CLUSTER_DIR=${owner} test/cluster/down, or start this one with RLMESH_REAL_NODES=0`,
    );
  }
  if (!trySh('ip', ['link', 'show', NET.bridge])) {
    ip('link', 'add', NET.bridge, 'type', 'bridge');
    writeFileSync(`/proc/sys/net/ipv6/conf/${NET.bridge}/disable_ipv6`, '1');
    ip('addr', 'add', `${NET.hostAddress}/24`, 'dev', NET.bridge);
    ip('addr', 'add', `${NET.publicAddress}/24`, 'dev', NET.bridge);
    ip('link', 'set', NET.bridge, 'up');
  }
  // a bridge made by an older test/cluster/up lacks the registry's address
  if (!sh('ip', ['-o', 'addr', 'show', 'dev', NET.bridge]).includes(` ${NET.registryAddress}/`)) ip('addr', 'add', `${NET.registryAddress}/24`, 'dev', NET.bridge);
  const pidFile = join(i.dir, 'pids/hostnet-forward');
  const pid = readPid(pidFile);
  if (pid && alive(pid)) return;
  const node = join(ROOT, 'node_modules/.bin/node');
  const log = join(i.dir, 'logs/hostnet-forward.log');
  const pairs = [
    ...[i.ports.apiserver, i.ports.registry, i.ports.registryToken].map((p) => `${NET.hostAddress}:${p}=127.0.0.1:${p}`),
    `${NET.hostAddress}:${NET.apiserverPort}=127.0.0.1:${i.ports.apiserver}`,
    `${NET.registryAddress}:443=127.0.0.1:${i.ports.registryTls}`,
  ];
  launch(pidFile, log, [existsSync(node) ? node : process.execPath, join(HERE, 'forward.ts'), ...pairs]);
  writeFileSync(join(i.dir, 'cmd/hostnet-forward'), readFileSync(`${pidFile}.cmd`));
  rmSync(`${pidFile}.cmd`);
}

async function waitHostNetwork(i: Info): Promise<void> {
  const { createConnection } = await import('node:net');
  const open = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = createConnection({ host: NET.hostAddress, port }, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
  await until(`the forwarder on ${NET.hostAddress}`, async () => (await open(i.ports.apiserver)) && (await open(i.ports.registry)) && (await open(i.ports.registryToken)), { timeoutMs: 20_000, context: () => logTails([join(i.dir, 'logs/hostnet-forward.log')]) });
}

function stopHostNetwork(dir: string): void {
  const pidFile = join(dir, 'pids/hostnet-forward');
  const pid = readPid(pidFile);
  if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
  rmSync(pidFile, { force: true });
  // a half-started second cluster must not take the running one's bridge with it
  if (!otherClusterOnBridge(dir) && trySh('ip', ['link', 'show', NET.bridge])) ip('link', 'del', NET.bridge);
}

// ---------------------------------------------------------------- registries the nodes pull from

/** containerd's hosts.toml: image references naming `host` are pulled from `url` (plain HTTP, pull and resolve only). */
function writeHostsToml(nodeDir: string, host: string, url: string): void {
  mkdirSync(join(nodeDir, 'containerd/certs.d', host), { recursive: true });
  writeFileSync(join(nodeDir, 'containerd/certs.d', host, 'hosts.toml'), `server = "${url}"\n\n[host."${url}"]\n  capabilities = ["pull", "resolve"]\n`);
}

// ---------------------------------------------------------------- state of the nodes

const nodesDir = (dir = clusterDir()) => join(dir, 'nodes');

export function realNodes(dir = clusterDir()): RealNode[] {
  if (!existsSync(nodesDir(dir))) return [];
  return readdirSync(nodesDir(dir))
    .map((n) => join(nodesDir(dir), n, 'node.json'))
    .filter(existsSync)
    .map((f) => JSON.parse(readFileSync(f, 'utf8')) as RealNode);
}

/**
 * Lets every real node's containerd pull images named `registry` (a host, as image references
 * name it) from `url`, a plain-HTTP registry on the host's bridge address: a certs.d entry, read
 * at each pull, as an operator configures a node for a private registry. Returns its remover.
 */
export function addRegistryHost(registry: string, url: string, dir = clusterDir()): () => void {
  if (registry === SANDBOX_REGISTRY) throw new Error(`${SANDBOX_REGISTRY} is the cluster's own route; it is not replaced`);
  const nodes = realNodes(dir);
  for (const node of nodes) writeHostsToml(node.dir, registry, url);
  return () => {
    for (const node of nodes) rmSync(join(node.dir, 'containerd/certs.d', registry), { recursive: true, force: true });
  };
}

// ---------------------------------------------------------------- cgroups

/** The cgroup v1 hierarchies (and the v2 one of a hybrid setup) mounted on this machine. */
function hierarchies(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' - '))
    .filter(([, rest]) => rest && /^cgroup2? /.test(rest))
    .map(([head]) => unescapeMount(head!.split(' ')[4]!))
    .filter((p) => p.startsWith(`${CGROUP_ROOT}/`));
}

function createCgroups(cgroup: string): void {
  for (const h of hierarchies()) {
    if (h.endsWith('/unified')) continue; // runc and the kubelet use the v1 hierarchies here
    const dir = join(h, cgroup);
    mkdirSync(dir, { recursive: true });
    if (existsSync(join(h, 'cpuset.cpus'))) {
      for (const f of ['cpuset.cpus', 'cpuset.mems']) writeFileSync(join(dir, f), readFileSync(join(h, f)));
    }
  }
  mkdirSync(join(CGROUP_ROOT, 'pids', cgroup, 'runtime'), { recursive: true });
}

function cgroupPids(cgroup: string): number[] {
  const pids: number[] = [];
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const line of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')) if (line) pids.push(Number(line));
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) walk(join(dir, e.name));
  };
  walk(join(CGROUP_ROOT, 'pids', cgroup));
  return pids;
}

function removeCgroups(cgroup: string): string[] {
  const left: string[] = [];
  const rm = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) rm(join(dir, e.name));
    try {
      rmdirSync(dir);
    } catch {
      left.push(dir);
    }
  };
  for (const h of hierarchies()) if (existsSync(join(h, cgroup))) rm(join(h, cgroup));
  return left;
}

// ---------------------------------------------------------------- mounts

function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => unescapeMount(l.split(' ')[4]!))
    .filter((m) => m === dir || m.startsWith(`${dir}/`));
}
function unmountAll(dir: string): string[] {
  for (let round = 0; round < 10; round++) {
    const ms = [...new Set(mountsUnder(dir))].sort((a, b) => b.length - a.length);
    if (ms.length === 0) return [];
    for (const m of ms) if (!trySh('umount', [m])) trySh('umount', ['-l', m]);
  }
  return mountsUnder(dir);
}

// ---------------------------------------------------------------- start

/** A client certificate from the cluster CA under `<dir>/pki/<file>.{crt,key}`, issued once. */
function ensureClientCert(i: Info, dir: string, file: string, subject: string): { crt: string; key: string } {
  const pki = join(dir, 'pki');
  mkdirSync(pki, { recursive: true });
  const key = join(pki, `${file}.key`);
  const crt = join(pki, `${file}.crt`);
  if (!existsSync(crt)) {
    const ca = join(i.dir, 'pki');
    sh('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', key, '-out', join(pki, `${file}.csr`)]);
    writeFileSync(join(pki, `${file}.ext`), 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n');
    sh('openssl', ['x509', '-req', '-in', join(pki, `${file}.csr`), '-CA', join(ca, 'ca.crt'), '-CAkey', join(ca, 'ca.key'), '-CAcreateserial', '-days', '3650', '-extfile', join(pki, `${file}.ext`), '-out', crt]);
  }
  return { crt, key };
}

/** A kubeconfig for `user` with a client certificate, towards the apiserver through the forwarder. */
function writeKubeconfig(i: Info, path: string, user: string, cert: { crt: string; key: string }): void {
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'local', cluster: { server: `https://${NET.hostAddress}:${i.ports.apiserver}`, 'certificate-authority': i.caFile } }],
      users: [{ name: user, user: { 'client-certificate': cert.crt, 'client-key': cert.key } }],
      contexts: [{ name: 'local', context: { cluster: 'local', user } }],
      'current-context': 'local',
    }),
    { mode: 0o600 },
  );
}

function containerdConfig(node: RealNode, sandboxImage: string): string {
  const c = join(node.dir, 'containerd');
  return `version = 2
root = "${c}/root"
state = "${c}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "${node.containerdSocket}"
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "${c}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${sandboxImage}"
  # this machine withholds CAP_SYS_RESOURCE: lowering oom_score_adj fails, which runc reports as "can't get final child's PID from pipe: EOF"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "${c}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN}"
    conf_dir = "${node.dir}/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "${c}/certs.d"
`;
}

function cniConfig(node: RealNode): string {
  const gw = node.podSubnet.replace(/0\/24$/, '1');
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: `rlmesh-${node.name}`,
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: false, // no NAT anywhere: pods are reached, and reach, by their own addresses
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: join(node.dir, 'cni/ipam'),
            ranges: [[{ subnet: node.podSubnet, gateway: gw }]],
            // the harness's subnets and nothing else: no default route
            routes: HARNESS_SUBNETS.map((dst) => ({ dst })),
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

function kubeletConfig(i: Info, node: RealNode, taints: Taint[]): object {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // this machine: cgroup v1 (hybrid), no systemd as PID 1
    cgroupDriver: 'cgroupfs',
    failCgroupV1: false,
    cgroupRoot: `/${node.cgroup}`,
    containerRuntimeEndpoint: `unix://${node.containerdSocket}`,
    address: node.address,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: i.caFile } },
    authorization: { mode: 'Webhook' },
    clusterDomain: 'cluster.local',
    clusterDNS: [NET.dnsService],
    // ConfigMap and Secret volumes follow their objects within seconds (the cluster DNS's hosts file, rotated Secrets)
    syncFrequency: '10s',
    // no host resolv.conf in pods: nothing may point them at the machine's own resolvers
    resolvConf: '',
    failSwapOn: false,
    podLogsDir: join(node.dir, 'pod-logs'),
    volumePluginDir: join(node.dir, 'volume-plugins'),
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
    serializeImagePulls: false,
    registerWithTaints: taints,
    rotateCertificates: false,
    maxPods: 110,
  };
}

function kubeProxyConfig(node: RealNode, kubeconfig: string): object {
  return {
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: 'iptables',
    clientConnection: { kubeconfig },
    hostnameOverride: node.name,
    bindAddress: node.address,
    clusterCIDR: NET.podSupernet,
    healthzBindAddress: '127.0.0.1:10256',
    metricsBindAddress: '127.0.0.1:10249',
    nodePortAddresses: [`${node.address}/32`],
    // conntrack limits are machine-wide; this VM withholds setting them
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    iptables: { localhostNodePorts: false, masqueradeAll: false, syncPeriod: '30s', minSyncPeriod: '1s' },
  };
}

/**
 * Adds a real node to the running local cluster and waits until it is Ready.
 * `name` defaults to the first free real-<n>; `taints` are registered with it.
 */
export async function startRealNode(opts: { name?: string; taints?: Taint[]; labels?: Record<string, string> } = {}): Promise<RealNode> {
  const t0 = Date.now();
  const timings: Record<string, number> = {};
  const mark = (step: string) => (timings[step] = (Date.now() - t0) / 1000);
  const i = info();
  preflight(i);
  const existing = realNodes(i.dir);
  const used = new Set(existing.map((n) => n.index));
  const index = [...Array(200).keys()].find((n) => !used.has(n));
  if (index === undefined) throw new Error('200 real nodes already: the node link is one /24');
  const name = opts.name ?? `real-${[...Array(1000).keys()].find((n) => !existing.some((e) => e.name === `real-${n}`))}`;
  if (!/^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$/.test(name)) throw new Error(`real node name ${JSON.stringify(name)}: use lower-case letters, digits and dashes`);
  if (existing.some((e) => e.name === name)) throw new Error(`a real node ${name} is already running (stop it with stopRealNode or test/cluster/down)`);
  const dir = join(nodesDir(i.dir), name);
  const node: RealNode = {
    name,
    index,
    netns: `rlmesh-${name}`,
    hostVeth: `rlmv${index}`,
    address: nodeAddress(index),
    podSubnet: podSubnet(index),
    dir,
    kubeconfig: join(dir, 'kubeconfig'),
    containerdSocket: join(dir, 'containerd/containerd.sock'),
    cgroup: `rlmesh-${name}`,
  };
  rmSync(dir, { recursive: true, force: true });
  for (const d of ['cni/net.d', 'cni/ipam', 'kubelet', 'pod-logs', 'volume-plugins', 'pids']) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, 'node.json'), JSON.stringify(node, null, 2));
  try {
    ensureHostNetwork(i);
    // the registry's token service is reached through the forwarder, also from this host
    await waitHostNetwork(i);
    const pause = await publishPauseImage(i.registry, join(i.dir, 'test-images/pause'));
    mark('host network and pause image');

    // the node's namespace: one veth to the host's bridge, no default route, no IPv6
    if (existsSync(`/run/netns/${node.netns}`)) ip('netns', 'del', node.netns);
    ip('netns', 'add', node.netns);
    const nsSysctl = (key: string, value: string) => sh('nsenter', [`--net=/run/netns/${node.netns}`, '--', 'sysctl', '-qw', `${key}=${value}`]);
    nsSysctl('net.ipv6.conf.all.disable_ipv6', '1');
    nsSysctl('net.ipv6.conf.default.disable_ipv6', '1');
    nsSysctl('net.ipv4.ip_forward', '1');
    // bridged pod-to-pod traffic passes iptables: kube-proxy un-NATs replies from a Service's pod on the same
    // node, and kube-router's NetworkPolicy chains see traffic between two pods of one node
    nsSysctl('net.bridge.bridge-nf-call-iptables', '1');
    if (trySh('ip', ['link', 'show', node.hostVeth])) ip('link', 'del', node.hostVeth);
    ip('link', 'add', node.hostVeth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', node.netns);
    writeFileSync(`/proc/sys/net/ipv6/conf/${node.hostVeth}/disable_ipv6`, '1');
    ip('link', 'set', node.hostVeth, 'master', NET.bridge, 'up');
    ip('-n', node.netns, 'link', 'set', 'lo', 'up');
    ip('-n', node.netns, 'addr', 'add', `${node.address}/24`, 'dev', 'eth0');
    ip('-n', node.netns, 'link', 'set', 'eth0', 'up');
    ip('-n', node.netns, 'route', 'add', NET.publicSubnet, 'via', NET.hostAddress);
    // pods of a node are reached through that node, from the host and from the other nodes
    ip('route', 'replace', node.podSubnet, 'via', node.address, 'dev', NET.bridge);
    for (const other of existing) {
      ip('-n', other.netns, 'route', 'replace', node.podSubnet, 'via', node.address);
      ip('-n', node.netns, 'route', 'replace', other.podSubnet, 'via', other.address);
    }
    createCgroups(node.cgroup);
    mark('namespace');

    // containerd, in the node's namespace, pulling registry.rlmesh.dev from the local registry
    const registryUrl = `http://${NET.hostAddress}:${i.ports.registry}`;
    writeHostsToml(dir, SANDBOX_REGISTRY, registryUrl);
    writeFileSync(join(dir, 'containerd/config.toml'), containerdConfig(node, `${SANDBOX_REGISTRY}/${pause.repository}@${pause.digest}`));
    writeFileSync(join(dir, 'cni/net.d/10-rlmesh.conflist'), cniConfig(node));
    const inNode = (proc: string, argv: string[]) => [
      'nsenter',
      `--net=/run/netns/${node.netns}`,
      '--',
      'sh',
      '-c',
      'echo $$ > "$0" && exec "$@"',
      join(CGROUP_ROOT, 'pids', node.cgroup, 'runtime/cgroup.procs'),
      ...argv,
    ];
    const containerdLog = join(i.dir, 'logs', `${name}.containerd.log`);
    const kubeletLog = join(i.dir, 'logs', `${name}.kubelet.log`);
    launch(join(dir, 'pids/containerd'), containerdLog, inNode('containerd', ['/usr/bin/containerd', '--config', join(dir, 'containerd/config.toml')]));
    await until(`containerd of ${name}`, () => trySh('/usr/bin/ctr', ['--address', node.containerdSocket, 'version']), { timeoutMs: 30_000, context: () => logTails([containerdLog]) });
    mark('containerd');

    // the kubelet, as system:node:<name>
    writeKubeconfig(i, node.kubeconfig, `system:node:${name}`, ensureClientCert(i, dir, 'node', `/O=system:nodes/CN=system:node:${name}`));
    writeFileSync(join(dir, 'kubelet-config.yaml'), JSON.stringify(kubeletConfig(i, node, opts.taints ?? []), null, 2));
    const labels = { type: 'real', 'rlmesh.dev/real-node': 'true', ...opts.labels };
    launch(
      join(dir, 'pids/kubelet'),
      kubeletLog,
      inNode('kubelet', [
        join(i.bin, 'kubelet'),
        `--config=${join(dir, 'kubelet-config.yaml')}`,
        `--kubeconfig=${node.kubeconfig}`,
        `--root-dir=${join(dir, 'kubelet')}`,
        `--cert-dir=${join(dir, 'kubelet/pki')}`,
        `--hostname-override=${name}`,
        `--node-ip=${node.address}`,
        `--node-labels=${Object.entries(labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(',')}`,
      ]),
    );
    await until(`node ${name} to register`, () => kubectl(['get', 'node', name], true).status === 0, { timeoutMs: 90_000, context: () => logTails([kubeletLog]) });
    mark('registered');
    await until(
      `node ${name} to become Ready`,
      () => kubectl(['get', 'node', name, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'], true).stdout === 'True',
      { timeoutMs: 120_000, context: () => logTails([kubeletLog, containerdLog]) },
    );
    mark('Ready');

    // kube-proxy (iptables mode) so Services work, and kube-router's NetworkPolicy firewall (nothing else of it)
    const proxyConfig = join(dir, 'kube-proxy.kubeconfig');
    writeKubeconfig(i, proxyConfig, 'system:kube-proxy', ensureClientCert(i, dir, 'kube-proxy', '/CN=system:kube-proxy'));
    writeFileSync(join(dir, 'kube-proxy-config.yaml'), JSON.stringify(kubeProxyConfig(node, proxyConfig), null, 2));
    const proxyLog = join(i.dir, 'logs', `${name}.kube-proxy.log`);
    launch(join(dir, 'pids/kube-proxy'), proxyLog, inNode('kube-proxy', [join(i.bin, 'kube-proxy'), `--config=${join(dir, 'kube-proxy-config.yaml')}`]));
    const chain = (table: string, name: string) => trySh('nsenter', [`--net=/run/netns/${node.netns}`, '--', 'iptables', '-t', table, '-S', name]);
    // kube-router rewrites the whole filter table (iptables-save, edit, iptables-restore without --noflush), so a
    // chain kube-proxy creates between its save and its restore is lost ("Chain 'KUBE-FORWARD' does not exist",
    // retried 30 s later). It starts once kube-proxy's chains are there; after that they are in every copy it saves.
    await until(
      `kube-proxy of ${name} to program Services`,
      () => chain('nat', 'KUBE-SERVICES') && chain('filter', 'KUBE-FORWARD') && chain('filter', 'KUBE-SERVICES'),
      { timeoutMs: 90_000, context: () => logTails([proxyLog]) },
    );
    const routerConfig = join(dir, 'kube-router.kubeconfig');
    writeKubeconfig(i, routerConfig, 'system:kube-router', ensureClientCert(i, dir, 'kube-router', '/CN=system:kube-router'));
    const routerLog = join(i.dir, 'logs', `${name}.kube-router.log`);
    launch(
      join(dir, 'pids/kube-router'),
      routerLog,
      inNode('kube-router', [
        join(i.bin, 'kube-router'),
        `--kubeconfig=${routerConfig}`,
        `--hostname-override=${name}`,
        '--run-firewall=true',
        '--run-router=false',
        '--run-service-proxy=false',
        '--enable-cni=false',
        '--enable-ipv6=false',
        '--health-port=0',
        '--metrics-port=0',
        '--iptables-sync-period=30s',
        '--v=1',
      ]),
    );
    await until(`kube-router of ${name} to install its NetworkPolicy chains`, () => chain('filter', 'KUBE-ROUTER-FORWARD'), { timeoutMs: 60_000, context: () => logTails([routerLog]) });
    mark('kube-proxy and kube-router');
  } catch (err) {
    if (!process.env.RLMESH_KEEP_FAILED_NODE) await stopRealNode(name, { keepHostNetwork: true }).catch(() => {});
    throw err;
  }
  node.timings = timings;
  writeFileSync(join(dir, 'node.json'), JSON.stringify(node, null, 2));
  return node;
}

// ---------------------------------------------------------------- stop

/** /run/netns entries that are the network namespace of one of `pids`. */
function netnsOf(pids: number[]): string[] {
  const inodes = new Set<number>();
  for (const pid of pids) {
    try {
      inodes.add(statSync(`/proc/${pid}/ns/net`).ino);
    } catch {
      // gone
    }
  }
  if (!existsSync('/run/netns')) return [];
  return readdirSync('/run/netns').filter((n) => {
    try {
      return inodes.has(statSync(join('/run/netns', n)).ino);
    } catch {
      return false;
    }
  });
}

/** Unix socket paths the processes of a namespace listen on under /run/containerd/s (the shims'). */
function shimSockets(pid: number | undefined): string[] {
  if (!pid) return [];
  try {
    return readFileSync(`/proc/${pid}/net/unix`, 'utf8')
      .split('\n')
      .map((l) => l.trim().split(/\s+/)[7] ?? '')
      .filter((p) => p.startsWith('/run/containerd/s/'));
  } catch {
    return [];
  }
}

/**
 * Kills a real node as a machine dies: every process of its cgroup (kubelet,
 * containerd, kube-proxy, kube-router, the shims and the containers) gets
 * SIGKILL, and its veth is cut, so its pod addresses answer nothing. Its Node
 * object stays, as a dead machine's does, for the node lifecycle controller to
 * find; stopRealNode later removes what is left (it reads the pod namespaces
 * recorded here, whose processes are gone).
 */
export async function killRealNode(name: string, dir = clusterDir()): Promise<void> {
  const nodeDir = join(nodesDir(dir), name);
  if (!existsSync(join(nodeDir, 'node.json'))) throw new Error(`no real node ${name} to kill (${nodeDir}/node.json missing)`);
  const node = JSON.parse(readFileSync(join(nodeDir, 'node.json'), 'utf8')) as RealNode;
  writeFileSync(join(nodeDir, 'killed-pod-netns'), netnsOf(cgroupPids(node.cgroup)).join('\n'));
  ip('link', 'set', node.hostVeth, 'down');
  const daemons = ['kubelet', 'containerd', 'kube-proxy', 'kube-router'].map((d) => readPid(join(nodeDir, 'pids', d)));
  for (let round = 0; round < 100; round++) {
    const pids = [...cgroupPids(node.cgroup), ...daemons.filter((p): p is number => p !== undefined)].filter(alive);
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await sleep(100);
  }
  throw new Error(`killing real node ${name}: processes still running in cgroup ${node.cgroup}: ${cgroupPids(node.cgroup).filter(alive).join(' ')}`);
}

/**
 * Stops a real node: its pods go first through the kubelet when the apiserver
 * answers, then every process under its cgroup is killed by pid; what the
 * kubelet and containerd mounted is unmounted; the pod namespaces, the node
 * namespace, its veth, its routes, its cgroups and its folder are removed, and
 * its Node object deleted. The bridge and the forwarder go with the last node
 * unless keepHostNetwork.
 */
export async function stopRealNode(name: string, opts: { keepHostNetwork?: boolean; dir?: string } = {}): Promise<void> {
  const cdir = opts.dir ?? clusterDir();
  const dir = join(nodesDir(cdir), name);
  if (!existsSync(join(dir, 'node.json'))) return;
  const node = JSON.parse(readFileSync(join(dir, 'node.json'), 'utf8')) as RealNode;
  const problems: string[] = [];
  const kubeletPid = readPid(join(dir, 'pids/kubelet'));
  const containerdPid = readPid(join(dir, 'pids/containerd'));
  let apiserver = false;
  try {
    apiserver = existsSync(join(cdir, 'cluster.json')) && kubectl(['get', '--raw', '/readyz'], true).status === 0;
  } catch {
    apiserver = false;
  }

  // 1. the pods, gracefully, while kubelet and containerd run (they tear down their networks and mounts)
  if (apiserver && kubeletPid && alive(kubeletPid) && containerdPid && alive(containerdPid)) {
    kubectl(['delete', 'pods', '--all-namespaces', `--field-selector=spec.nodeName=${name}`, '--grace-period=1', '--wait=false'], true);
    await until(`the pods of ${name} to stop`, () => sh('/usr/bin/ctr', ['--address', node.containerdSocket, '-n', 'k8s.io', 'tasks', 'ls', '-q']).trim() === '', { timeoutMs: 30_000 }).catch(() => {});
  }
  // 2. every process of the node, by pid: the kubelet first, then the containers, the shims and containerd
  const sockets = shimSockets(containerdPid);
  if (kubeletPid && alive(kubeletPid)) {
    process.kill(kubeletPid, 'SIGTERM');
    await until('the kubelet to exit', () => !alive(kubeletPid), { timeoutMs: 10_000 }).catch(() => {});
  }
  const killed = join(dir, 'killed-pod-netns');
  const podNetns = [...new Set([...netnsOf(cgroupPids(node.cgroup)), ...(existsSync(killed) ? readFileSync(killed, 'utf8').split('\n').filter(Boolean) : [])])];
  for (let round = 0; round < 100; round++) {
    const pids = cgroupPids(node.cgroup).filter(alive);
    if (kubeletPid && alive(kubeletPid)) pids.push(kubeletPid);
    if (containerdPid && alive(containerdPid)) pids.push(containerdPid);
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await sleep(100);
  }
  const survivors = cgroupPids(node.cgroup).filter(alive);
  if (survivors.length) problems.push(`processes still running in cgroup ${node.cgroup}: ${survivors.join(' ')}`);
  for (const s of sockets) rmSync(s, { force: true });

  // 3. mounts, pod namespaces, the node namespace, links and routes
  const leftMounts = unmountAll(dir);
  if (leftMounts.length) problems.push(`still mounted: ${leftMounts.join(' ')}`);
  for (const ns of podNetns) if (ns !== node.netns && !trySh('ip', ['netns', 'del', ns])) problems.push(`could not delete pod network namespace ${ns}`);
  if (existsSync(`/run/netns/${node.netns}`) && !trySh('ip', ['netns', 'del', node.netns])) problems.push(`could not delete network namespace ${node.netns}`);
  if (trySh('ip', ['link', 'show', node.hostVeth])) trySh('ip', ['link', 'del', node.hostVeth]);
  trySh('ip', ['route', 'del', node.podSubnet, 'via', node.address]);
  const others = realNodes(cdir).filter((n) => n.name !== name);
  for (const other of others) trySh('ip', ['-n', other.netns, 'route', 'del', node.podSubnet]);

  // 4. cgroups, container log links, the Node object, the folder
  let leftCgroups: string[] = [];
  for (let round = 0; round < 20; round++) {
    leftCgroups = removeCgroups(node.cgroup);
    if (leftCgroups.length === 0) break;
    await sleep(100);
  }
  if (leftCgroups.length) problems.push(`cgroups not removed: ${leftCgroups.join(' ')}`);
  if (existsSync('/var/log/containers')) {
    for (const l of readdirSync('/var/log/containers')) {
      const p = join('/var/log/containers', l);
      try {
        if (readlinkSync(p).startsWith(`${dir}/`)) unlinkSync(p);
      } catch {
        // not a link
      }
    }
  }
  if (apiserver) kubectl(['delete', 'node', name, '--ignore-not-found', '--wait=true', '--timeout=30s'], true);
  if (mountsUnder(dir).length === 0) rmSync(dir, { recursive: true, force: true });
  else problems.push(`kept ${dir}: something is still mounted under it`);
  if (!opts.keepHostNetwork && others.length === 0) stopHostNetwork(cdir);
  if (problems.length) throw new Error(`stopping real node ${name}: ${problems.join('; ')}`);
}

/** Stops every real node of the cluster folder, then the bridge and the forwarder. */
export async function stopAllRealNodes(dir = clusterDir()): Promise<void> {
  const errors: string[] = [];
  for (const n of realNodes(dir)) await stopRealNode(n.name, { dir, keepHostNetwork: true }).catch((e: Error) => errors.push(e.message));
  stopHostNetwork(dir);
  if (existsSync(nodesDir(dir)) && readdirSync(nodesDir(dir)).length === 0) rmdirSync(nodesDir(dir));
  if (errors.length) throw new Error(errors.join('\n'));
}

// ---------------------------------------------------------------- looking inside

export type Route = { dst: string; gateway?: string; dev?: string; table?: string; type?: string; protocol?: string; scope?: string };

/** The routes of every table in a network namespace (a /run/netns name or a /proc/<pid>/ns/net path), both families. */
export function routesIn(netns: string): { v4: Route[]; v6: Route[] } {
  const path = netns.startsWith('/') ? netns : `/run/netns/${netns}`;
  const get = (family: string) => JSON.parse(sh('nsenter', [`--net=${path}`, '--', 'ip', '-j', family, 'route', 'show', 'table', 'all']) || '[]') as Route[];
  return { v4: get('-4'), v6: get('-6') };
}

const toInt = (a: string) => a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
/** Whether an address or a route's destination lies inside `subnet` (IPv4). */
export function inside(dst: string, subnet: string): boolean {
  const [net, bits] = subnet.split('/');
  const [addr, len = '32'] = dst.split('/');
  if (Number(len) < Number(bits)) return false;
  const mask = 2 ** 32 - 2 ** (32 - Number(bits));
  return (toInt(addr!) & mask) >>> 0 === (toInt(net!) & mask) >>> 0;
}

/**
 * What in a namespace's routes leads anywhere but the harness's own subnets:
 * a default route (either family), an IPv4 route of the main table outside
 * HARNESS_SUBNETS, an IPv6 route other than link-local; also an empty main
 * table (nothing would be checked). Empty: contained.
 */
export function routesOutsideHarness(routes: { v4: Route[]; v6: Route[] }): string[] {
  const problems = [...routes.v4, ...routes.v6].filter((r) => r.dst === 'default').map((r) => `default route via ${r.gateway ?? r.dev}`);
  const leading = routes.v4.filter((r) => (r.table ?? 'main') === 'main' && (r.type ?? 'unicast') === 'unicast');
  if (leading.length === 0) problems.push('no IPv4 route at all');
  for (const r of leading) if (r.dst !== 'default' && !HARNESS_SUBNETS.some((s) => inside(r.dst, s))) problems.push(`route to ${r.dst} outside ${HARNESS_SUBNETS.join(', ')}`);
  // IPv6 is off in a node's namespace; a pod's may hold link-local routes on its one link, nothing else
  for (const r of routes.v6.filter((x) => (x.table ?? 'main') === 'main')) if (!/^fe80::\/64$/.test(r.dst)) problems.push(`IPv6 route to ${r.dst}`);
  return problems;
}

/** The cgroup folder of a pod running on a real node, in one cgroup v1 hierarchy (pids, memory, cpuacct...). */
export function podCgroupDir(node: RealNode, podUid: string, hierarchy = 'pids'): string {
  const base = join(CGROUP_ROOT, hierarchy, node.cgroup);
  const find = (d: string): string | undefined => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const p = join(d, e.name);
      if (e.name === `pod${podUid}`) return p;
      const f = find(p);
      if (f) return f;
    }
    return undefined;
  };
  const dir = existsSync(base) ? find(base) : undefined;
  if (!dir) throw new Error(`no ${hierarchy} cgroup for pod ${podUid} under ${base}: is the pod running on ${node.name}?`);
  return dir;
}

/** The network namespace of a pod running on a real node: /proc/<pid>/ns/net of a process in the pod's cgroup. */
export function podNetnsPath(node: RealNode, podUid: string): string {
  const podCg = podCgroupDir(node, podUid);
  const pids: number[] = [];
  const walk = (d: string) => {
    for (const line of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n')) if (line) pids.push(Number(line));
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
  };
  walk(podCg);
  if (!pids.length) throw new Error(`pod ${podUid} has no process on ${node.name}`);
  return `/proc/${pids[0]}/ns/net`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [cmd, ...args] = process.argv.slice(2);
  if (cmd === 'start' && args.length) {
    for (const name of args) {
      const n = await startRealNode({ name });
      console.error(`[cluster] real node ${n.name} Ready at ${n.address} (pods ${n.podSubnet}) in ${n.timings?.Ready}s`);
    }
  } else if (cmd === 'host-network') {
    const i = info();
    ensureHostNetwork(i);
    await waitHostNetwork(i);
  } else if (cmd === 'stop' && args[0] === '--all') {
    await stopAllRealNodes();
  } else if (cmd === 'stop' && args.length) {
    for (const name of args) await stopRealNode(name);
  } else {
    console.error('usage: node test/cluster/real-node.ts start NAME... | host-network | stop NAME... | stop --all');
    process.exit(2);
  }
}

