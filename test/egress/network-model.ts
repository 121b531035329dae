// What the chart's NetworkPolicies are meant to allow, and what cyclonus (a
// third-party simulator) predicts they allow, for any set of pods and
// addresses: the offline table (networkpolicy.test.ts) and the table of real
// attempts on the real node (test/e2e/network-policies.test.ts) both compare
// against these two.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { clusterInfo } from '../support/cluster.ts';

const CYCLONUS_VERSION = 'v0.5.6';
const CYCLONUS_DIR = join(homedir(), '.cache/rlmesh-testbin', `cyclonus-${CYCLONUS_VERSION}`);

/** A pod, or an address outside the cluster modelled as one (namespace `outside`). `role` names what it is when `name` does not. */
export type Pod = { ns: string; name: string; labels: Record<string, string>; ip: string; role?: string };
export type Probe = { protocol: 'TCP' | 'UDP'; port: number };

export interface Scenario {
  name: string;
  /** helm flags on top of the join token */
  values: string[];
  isDnsPeer: (p: Pod) => boolean;
  dnsPorts: number[];
  /** destinations outside the cluster the proxy's policy lets it reach (public addresses, egress.allowRanges) */
  proxyReaches: (p: Pod) => boolean;
  /** the Kubernetes API's addresses (network.apiServerAddresses, or what an install reads from the cluster) */
  isApiServer: (p: Pod) => boolean;
  /** who may reach the ops ports (network.metricsPeers); default: the chart's default peers. The API's addresses may too
   * (rlmesh status reads the proxy's metrics through the API server) */
  isMetricsPeer?: (p: Pod) => boolean;
  /** where the agent may dial the control plane on TCP 443: public addresses and controlPlane.addresses */
  controlPlaneReaches: (p: Pod) => boolean;
}

/** The default network.metricsPeers: the observability chart's Prometheus beside the release, a Prometheus Operator's in namespace monitoring. */
export const isDefaultMetricsPeer = (p: Pod): boolean =>
  (p.ns === 'rlmesh-system' && p.labels['app.kubernetes.io/name'] === 'rlmesh-prometheus') || (p.ns === 'monitoring' && p.labels['app.kubernetes.io/name'] === 'prometheus');

const PROXY_PORT = 3128;
const PROXY_ALLOWED_PORTS = [443];
const API_PORTS = [443, 6443];
const OPS_PORTS = [9090, 8081];

export const key = (p: Pod): string => `${p.ns}/${p.name}`;
const is = (p: Pod, what: string) => `${p.ns}/${p.role ?? p.name}` === what;

/** The intended matrix: may `from` open `probe` to `to`? */
export function intended(s: Scenario, from: Pod, to: Pod, probe: Probe): boolean {
  const dns = s.isDnsPeer(to) && s.dnsPorts.includes(probe.port);
  const tcp = probe.protocol === 'TCP';
  const toProxy = is(to, 'rlmesh-system/proxy') && tcp && probe.port === PROXY_PORT;
  // the Kubernetes API: its ports (network.apiServerPorts) at its addresses only
  const api = tcp && API_PORTS.includes(probe.port) && s.isApiServer(to);
  let egress = true;
  // evaluation pods: the proxy, not even DNS (rlmesh-runs-egress covers every pod of the runs namespace)
  if (is(from, 'rlmesh-runs/eval')) egress = toProxy;
  // the filler: that, DNS and the Kubernetes API; no port of anywhere else, so artifacts cannot bypass the proxy
  else if (is(from, 'rlmesh-runs/filler')) egress = toProxy || dns || api;
  else if (is(from, 'rlmesh-system/proxy')) egress = dns || (s.proxyReaches(to) && tcp && PROXY_ALLOWED_PORTS.includes(probe.port));
  // the agent also dials the control plane on TCP 443: public addresses, and controlPlane.addresses
  else if (is(from, 'rlmesh-system/agent')) egress = dns || api || (tcp && probe.port === 443 && s.controlPlaneReaches(to));
  else if (is(from, 'rlmesh-system/controller') || is(from, 'rlmesh-system/gpu-discovery') || is(from, 'rlmesh-system/crd-upgrade')) egress = dns || api;
  // the release namespace's default-deny: a pod no policy of the chart allows reaches nothing
  else if (from.ns === 'rlmesh-system') egress = false;
  // the metrics and health ports: from the metrics peers (and the API server's addresses, when pinned) only
  const ops = tcp && OPS_PORTS.includes(probe.port) && ((s.isMetricsPeer ?? isDefaultMetricsPeer)(from) || s.isApiServer(from));
  let ingress = true;
  if (is(to, 'rlmesh-runs/eval')) ingress = false;
  else if (is(to, 'rlmesh-runs/filler')) ingress = ops;
  else if (is(to, 'rlmesh-system/proxy')) ingress = (tcp && from.ns === 'rlmesh-runs' && probe.port === PROXY_PORT) || ops;
  else if (is(to, 'rlmesh-system/agent') || is(to, 'rlmesh-system/controller')) ingress = ops;
  // GPU discovery, the hook, anyone else's pod there and in the runs namespace: nothing comes in
  else if (to.ns === 'rlmesh-system' || to.ns === 'rlmesh-runs') ingress = false;
  return egress && ingress;
}

/** cyclonus from the Go module proxy, built once into the test binary cache. */
export function cyclonus(): string {
  const bin = join(CYCLONUS_DIR, 'cyclonus');
  if (!existsSync(bin)) {
    mkdirSync(CYCLONUS_DIR, { recursive: true });
    const go = existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go';
    execFileSync(go, ['install', `github.com/mattfenwick/cyclonus/cmd/cyclonus@${CYCLONUS_VERSION}`], {
      env: { ...process.env, GOBIN: CYCLONUS_DIR, GOFLAGS: '-mod=mod' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  }
  return bin;
}

/** Writes NetworkPolicy objects as one NetworkPolicyList (cyclonus reads one object per file); returns the file. */
export function writePolicies(file: string, items: object[]): string {
  writeFileSync(file, JSON.stringify({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicyList', items }));
  return file;
}

/** The chart's NetworkPolicies as `helm template` renders them with `values`. */
export function renderPolicies(chart: string, values: string[]): object[] {
  const helm = process.env.HELM ?? join(clusterInfo().bin, 'helm');
  const out = execFileSync(helm, [
    'template', 'rlmesh', chart, '-n', 'rlmesh-system', '--kube-version', '1.35.4',
    '--show-only', 'templates/networkpolicies.yaml', '--show-only', 'templates/artifact-cache-filler.yaml', ...values,
  ], { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 });
  return parseAllDocuments(out).map((d) => d.toJSON()).filter((o) => o?.kind === 'NetworkPolicy');
}

/**
 * Runs cyclonus for one probe over `pods` and returns its combined truth
 * table: table[from][to] is "." (allowed) or "X" (denied), keyed by ns/name.
 */
export function simulate(dir: string, policies: string, pods: Pod[], probe: Probe, allProbes: Probe[]): Record<string, Record<string, string>> {
  const model = join(dir, `model-${probe.protocol}-${probe.port}.json`);
  const containers = allProbes.map((p) => ({ Name: `${p.protocol.toLowerCase()}-${p.port}`, Port: p.port, Protocol: p.protocol }));
  writeFileSync(model, JSON.stringify({
    Probes: [{ Protocol: probe.protocol, Port: probe.port }],
    Resources: {
      Namespaces: Object.fromEntries([...new Set(pods.map((p) => p.ns))].map((ns) => [ns, { 'kubernetes.io/metadata.name': ns }])),
      Pods: pods.map((p) => ({ Namespace: p.ns, Name: p.name, Labels: p.labels, IP: p.ip, Containers: containers })),
    },
  }));
  const stdout = execFileSync(cyclonus(), ['analyze', '--mode', 'probe', '--policy-path', policies, '--probe-path', model], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
  });
  // the first Combined table is the model's; cyclonus then prints an empty one for live pods
  const combined = stdout.slice(stdout.indexOf('Combined:'), stdout.indexOf('\n\n', stdout.indexOf('Combined:')));
  const rows = combined.split('\n').filter((l) => l.startsWith('|')).map((l) => l.split('|').slice(1, -1).map((c) => c.trim()));
  const [header, ...body] = rows;
  const columns = header!.slice(1).map((c) => c.toLowerCase());
  const table: Record<string, Record<string, string>> = {};
  for (const row of body) table[row[0]!] = Object.fromEntries(columns.map((c, i) => [c, row[i + 1]!]));
  return table;
}
