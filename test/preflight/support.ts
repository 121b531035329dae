// What the preflight integration tests share: their own release and runs
// namespaces (so they never touch another test's rlmesh-system), the agent and
// controller ServiceAccounts with the rights of test/preflight/rbac.yaml,
// kwok nodes of their own, and waiting.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { defaultValues } from '../../lib/values-schema.ts';
import { settingsFromValues } from '../../lib/preflight/settings.ts';
import type { PreflightContext, PreflightMode, PreflightSettings } from '../../lib/preflight/types.ts';
import { adminKubeConfig, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { tempDir } from '../support/temp.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const NS = 'rlmesh-pf-system';
export const RUNS = 'rlmesh-pf-runs';
export const TEST_LABEL = 'rlmesh.dev/preflight-test';

export function apply(yaml: string): void {
  const file = join(tempDir('rlmesh-pf-'), 'objects.yaml');
  writeFileSync(file, yaml);
  kubectl(['apply', '-f', file]);
}

/** Namespaces NS (release) and RUNS (restricted Pod Security), ServiceAccounts and rbac.yaml. */
export function setUpNamespaces(): void {
  // a previous file's teardown may still be deleting them
  kubectl(['wait', '--for=delete', `namespace/${NS}`, `namespace/${RUNS}`, '--timeout=120s'], { allowFail: true });
  apply(`
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
apiVersion: v1
kind: Namespace
metadata:
  name: ${RUNS}
  labels: { pod-security.kubernetes.io/enforce: restricted }
---
apiVersion: v1
kind: ServiceAccount
metadata: { name: rlmesh-cluster-agent, namespace: ${NS} }
---
apiVersion: v1
kind: ServiceAccount
metadata: { name: rlmesh-cluster-controller, namespace: ${NS} }
`);
  apply(readFileSync(join(here, 'rbac.yaml'), 'utf8').replaceAll('__NS__', NS).replaceAll('__RUNS__', RUNS));
}

export function tearDownNamespaces(): void {
  kubectl(['delete', 'namespace', NS, RUNS, '--wait=false', '--ignore-not-found']);
  kubectl(['delete', '-f', '-', '--ignore-not-found'], {
    input: readFileSync(join(here, 'rbac.yaml'), 'utf8').replaceAll('__NS__', NS).replaceAll('__RUNS__', RUNS),
    allowFail: true,
  });
}

export async function agentKubeConfig(): Promise<k8s.KubeConfig> {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(await serviceAccountKubeconfig(NS, 'rlmesh-cluster-agent'));
  return kc;
}

export async function controllerKubeConfig(): Promise<k8s.KubeConfig> {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(await serviceAccountKubeconfig(NS, 'rlmesh-cluster-controller'));
  return kc;
}

/** Chart defaults, in the test's namespaces, with the control plane on loopback (nothing leaves the machine). */
export function baseSettings(over: Partial<PreflightSettings> = {}): PreflightSettings {
  return { ...settingsFromValues(defaultValues(), NS), runsNamespace: RUNS, apiHost: 'localhost', registryHost: 'localhost', ...over };
}

export function context(over: Partial<PreflightSettings> = {}, mode: PreflightMode = 'cli', kc = adminKubeConfig()): PreflightContext {
  return { mode, kc, settings: baseSettings(over) };
}

/** A kwok node labelled TEST_LABEL=<group>, tainted so no other test's pod lands on it. */
export function kwokNode(name: string, group: string, o: { arch?: string; labels?: Record<string, string>; capacity?: Record<string, string> } = {}): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: { 'kubernetes.io/arch': o.arch ?? 'amd64', 'kubernetes.io/os': 'linux', 'kubernetes.io/hostname': name, type: 'kwok', [TEST_LABEL]: group, ...(o.labels ?? {}) },
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
    },
    spec: { taints: [{ key: TEST_LABEL, value: group, effect: 'NoSchedule' }] },
    status: { allocatable: { cpu: '16', memory: '64Gi', pods: '110', ...(o.capacity ?? {}) }, capacity: { cpu: '16', memory: '64Gi', pods: '110', ...(o.capacity ?? {}) } },
  });
}
