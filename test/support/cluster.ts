// What integration tests know about the local cluster that test/cluster/up started:
// its admin kubeconfig, the binaries built for it, the local OCI registry, and
// kubeconfigs for the chart's ServiceAccounts minted through TokenRequest.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';

export type ClusterInfo = {
  dir: string;
  kubeconfig: string;
  apiserverUrl: string;
  caFile: string;
  registry: string; // host:port of the local OCI registry
  /** where control planes announce their stores to the registry's token service */
  registryStores: string;
  /** the CA of registry.rlmesh.dev's TLS listener (test/cluster/up), which local installs trust */
  harnessCaFile: string;
  bin: string; // folder with kubectl, helm, kwok, ...
  kubernetesVersion: string;
};

export const clusterDir = (): string => process.env.RLMESH_CLUSTER_DIR ?? join(homedir(), '.cache/rlmesh-cluster');
/** A docker config file with the local registry's publisher account (test/cluster/up): what pushes, and what test tooling reads protected images with. */
export const registryAuthFile = (): string => join(clusterDir(), 'registry-auth.json');

export function clusterInfo(): ClusterInfo {
  const file = join(clusterDir(), 'cluster.json');
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as ClusterInfo;
  } catch {
    throw new Error(`the local cluster is not running (${file} missing): start it with test/cluster/up`);
  }
}

export type RunResult = { status: number; stdout: string; stderr: string };

export function run(cmd: string, args: string[], opts: SpawnSyncOptions = {}): RunResult {
  const info = clusterInfo();
  const r = spawnSync(cmd, args, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    ...opts,
    env: { ...process.env, KUBECONFIG: info.kubeconfig, PATH: `${info.bin}:${process.env.PATH}`, ...(opts.env ?? {}) },
  });
  return { status: r.status ?? -1, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '') };
}

/** kubectl against the local cluster; throws with stderr unless allowFail. */
export function kubectl(args: string[], opts: SpawnSyncOptions & { allowFail?: boolean } = {}): RunResult {
  const r = run(join(clusterInfo().bin, 'kubectl'), args, opts);
  if (r.status !== 0 && !opts.allowFail) throw new Error(`kubectl ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r;
}

export function helm(args: string[], opts: SpawnSyncOptions & { allowFail?: boolean } = {}): RunResult {
  const r = run(join(clusterInfo().bin, 'helm'), args, opts);
  if (r.status !== 0 && !opts.allowFail) throw new Error(`helm ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r;
}

export function adminKubeConfig(): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(clusterInfo().kubeconfig);
  return kc;
}

/**
 * Mints a token for namespace/serviceAccount with the TokenRequest API and writes
 * a kubeconfig that authenticates as that ServiceAccount. Returns its path.
 */
export async function serviceAccountKubeconfig(namespace: string, serviceAccount: string, expirationSeconds = 3600, boundPod?: { name: string; uid: string }): Promise<string> {
  const info = clusterInfo();
  const core = adminKubeConfig().makeApiClient(k8s.CoreV1Api);
  // a token bound to a pod carries the pod's node name, as the pod's own mounted token does
  const boundObjectRef = boundPod ? { apiVersion: 'v1', kind: 'Pod', ...boundPod } : undefined;
  const tr = await core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: [], expirationSeconds, ...(boundObjectRef ? { boundObjectRef } : {}) } },
  });
  const token = tr.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
  const dir = join(info.dir, 'sa');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${namespace}-${serviceAccount}${boundPod ? `-${boundPod.name}` : ''}.kubeconfig`);
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'local', cluster: { server: info.apiserverUrl, 'certificate-authority': info.caFile } }],
    users: [{ name: serviceAccount, user: { token } }],
    contexts: [{ name: 'sa', context: { cluster: 'local', user: serviceAccount, namespace } }],
    'current-context': 'sa',
  };
  writeFileSync(path, JSON.stringify(kubeconfig), { mode: 0o600 });
  return path;
}
