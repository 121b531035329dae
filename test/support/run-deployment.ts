// For the scale benchmark alone (test/bench/scale.ts): its 2,000 kwok nodes
// leave no room for a real node, and it samples the agent's and controller's
// RSS and CPU from /proc. No test uses this: the end-to-end and fault suites
// run the chart's pods as real containers on the real node (test/e2e/harness.ts).
//
// kwok pods run no containers, so a Deployment the chart installed is brought
// to life here as a local process that gets what its pod would get: the
// container's args and env (values, fieldRefs, Secret and ConfigMap refs
// resolved), its ConfigMap and Secret volumes written to files, its PVCs as the
// very directories the test provisioner backs them with, and a kubeconfig of
// its ServiceAccount minted through TokenRequest, so RBAC is the chart's own.
// Mount paths are rewritten to those local folders, and listen ports become
// free loopback ports because every "pod" here shares one host.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { kubectl, serviceAccountKubeconfig } from './cluster.ts';
import { ROOT, stopper, type Component } from './runtime.ts';

const NODE = join(ROOT, 'node_modules/.bin/node');

const getJson = <T>(args: string[]): T => JSON.parse(kubectl([...args, '-o', 'json']).stdout) as T;

function secretData(ns: string, name: string): Record<string, string> {
  const s = getJson<k8s.V1Secret>(['-n', ns, 'get', 'secret', name]);
  return Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
}

function configMapData(ns: string, name: string): Record<string, string> {
  return getJson<k8s.V1ConfigMap>(['-n', ns, 'get', 'configmap', name]).data ?? {};
}

/** The hostPath directory the test provisioner created for a bound PVC. */
function claimDirectory(ns: string, claim: string): string {
  const pvc = getJson<k8s.V1PersistentVolumeClaim>(['-n', ns, 'get', 'pvc', claim]);
  if (pvc.status?.phase !== 'Bound') throw new Error(`PVC ${ns}/${claim} is ${pvc.status?.phase}, not Bound: the pod would not start either`);
  const pv = getJson<k8s.V1PersistentVolume>(['get', 'pv', pvc.spec!.volumeName!]);
  const dir = pv.spec?.hostPath?.path;
  if (!dir) throw new Error(`PV ${pv.metadata?.name} has no hostPath; only the local test provisioner's volumes can back a local process`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function rewriteTree(dir: string, rewrite: (s: string) => string): void {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) rewriteTree(p, rewrite);
    else writeFileSync(p, rewrite(readFileSync(p, 'utf8')));
  }
}

export type RunOptions = {
  /** process name suffix (two replicas of one Deployment need two names) */
  replica?: string;
  extraEnv?: Record<string, string>;
  /** appended to the container's args (e.g. loopback listen addresses) */
  extraArgs?: string[];
};

export async function runDeployment(namespace: string, name: string, opts: RunOptions = {}): Promise<Component> {
  const deploy = getJson<k8s.V1Deployment>(['-n', namespace, 'get', 'deployment', name]);
  const pod = deploy.spec!.template;
  const container = pod.spec!.containers[0]!;
  const podName = `${name}-local-${opts.replica ?? '0'}`;
  const work = mkdtempSync(join(tmpdir(), `${podName}-`));

  // volumes -> local folders; mount paths -> those folders
  const mounts: [string, string][] = [];
  for (const m of container.volumeMounts ?? []) {
    const vol = pod.spec!.volumes?.find((v) => v.name === m.name);
    if (!vol) throw new Error(`${name}: volumeMount ${m.name} has no volume`);
    let dir: string;
    if (vol.persistentVolumeClaim) dir = claimDirectory(namespace, vol.persistentVolumeClaim.claimName);
    else {
      dir = join(work, 'volumes', m.name);
      mkdirSync(dir, { recursive: true });
      const files = vol.configMap
        ? configMapData(namespace, vol.configMap.name!)
        : vol.secret
          ? secretData(namespace, vol.secret.secretName!)
          : vol.projected
            ? (Object.assign({}, ...(vol.projected.sources ?? []).map((s) => (s.configMap ? configMapData(namespace, s.configMap.name!) : s.secret ? secretData(namespace, s.secret.name!) : {}))) as Record<string, string>)
            : {};
      for (const [k, v] of Object.entries(files)) writeFileSync(join(dir, k), v, { mode: 0o600 });
    }
    mounts.push([m.mountPath, m.subPath ? join(dir, m.subPath) : dir]);
  }
  mounts.sort((a, b) => b[0].length - a[0].length);
  // one pass, longest mount path first, so a rewritten path is never rewritten again
  const escape = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`(${mounts.map(([from]) => escape(from)).join('|')})(?=/|$|["'\\s:,])`, 'g');
  const rewrite = (s: string) => (mounts.length ? s.replace(pattern, (m) => mounts.find(([from]) => from === m)![1]) : s);
  for (const [, dir] of mounts) if (dir.startsWith(work)) rewriteTree(dir, rewrite);

  // the runtime config: every "pod" shares this host, so listen ports are picked free
  for (const [, dir] of mounts) {
    const cfg = join(dir, 'config.json');
    try {
      const parsed = JSON.parse(readFileSync(cfg, 'utf8'));
      parsed.ports = { ...(parsed.ports ?? {}), metrics: 0, health: 0 };
      writeFileSync(cfg, JSON.stringify(parsed));
    } catch {
      // not the runtime config
    }
  }

  const env: Record<string, string> = { PATH: process.env.PATH ?? '', RLMESH_LISTEN_HOST: '127.0.0.1', RLMESH_AGENT_LISTEN_HOST: '127.0.0.1' };
  for (const e of container.env ?? []) {
    const from = e.valueFrom;
    let value: string | undefined = e.value;
    if (from?.fieldRef) {
      const path = from.fieldRef.fieldPath;
      value = path === 'metadata.name' ? podName : path === 'metadata.namespace' ? namespace : path === 'spec.nodeName' ? 'kwok-cpu-0' : path === 'spec.serviceAccountName' ? pod.spec!.serviceAccountName : undefined;
    } else if (from?.secretKeyRef) {
      const data = (() => {
        try {
          return secretData(namespace, from.secretKeyRef!.name!);
        } catch (err) {
          if (from.secretKeyRef!.optional) return {};
          throw err;
        }
      })();
      value = data[from.secretKeyRef.key];
    } else if (from?.configMapKeyRef) value = configMapData(namespace, from.configMapKeyRef.name!)[from.configMapKeyRef.key];
    else if (from?.resourceFieldRef) value = '0';
    if (value !== undefined) env[e.name] = rewrite(value);
  }
  const sa = pod.spec!.serviceAccountName ?? 'default';
  if (pod.spec!.automountServiceAccountToken !== false) env.KUBECONFIG = await serviceAccountKubeconfig(namespace, sa);
  Object.assign(env, opts.extraEnv ?? {});

  const args = [...(container.args ?? []).map(rewrite), ...(opts.extraArgs ?? [])];
  const logFile = join(work, `${podName}.log`);
  const out = openSync(logFile, 'a');
  const proc = spawn(NODE, [join(ROOT, 'bin/rlmesh-runtime.ts'), ...args], { env, stdio: ['ignore', out, out], cwd: work });
  return {
    name: podName,
    proc,
    logFile,
    stop: stopper(proc),
  };
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((ok) => srv.listen(0, '127.0.0.1', ok));
  const { port } = srv.address() as { port: number };
  await new Promise((ok) => srv.close(ok));
  return port;
}

const NS = 'rlmesh-system';
const RUNS = 'rlmesh-runs';

/** The chart's Deployments as local processes (see the top of this file for why). */
export class LocalDeployments {
  components = new Map<string, Component>();

  async start(which: ('agent' | 'controller' | 'filler' | 'egress')[] = ['agent', 'controller', 'filler', 'egress']): Promise<void> {
    for (const w of which) await this.startOne(w);
  }

  async startOne(w: 'agent' | 'controller' | 'filler' | 'egress', replica = '0'): Promise<Component> {
    const where: Record<string, [string, string]> = {
      agent: [NS, 'rlmesh-cluster-agent'],
      controller: [NS, 'rlmesh-cluster-controller'],
      filler: [RUNS, 'rlmesh-artifact-cache-filler'],
      egress: [NS, 'rlmesh-egress-proxy'],
    };
    const [ns, name] = where[w]!;
    // every "pod" shares this host: the proxy listens on a free loopback port
    const extraArgs = w === 'egress' ? ['--listen', `127.0.0.1:${await freePort()}`, '--health-listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0'] : [];
    const c = await runDeployment(ns, name, { replica, extraArgs });
    this.components.set(`${w}/${replica}`, c);
    return c;
  }

  get(w: string, replica = '0'): Component {
    const c = this.components.get(`${w}/${replica}`);
    if (!c) throw new Error(`${w}/${replica} is not running`);
    return c;
  }

  log(w: string, replica = '0'): string {
    return readFileSync(this.get(w, replica).logFile, 'utf8');
  }

  async stop(w?: string, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    for (const [key, c] of this.components) {
      if (w && !key.startsWith(`${w}/`)) continue;
      await c.stop(signal);
      this.components.delete(key);
    }
  }
}
