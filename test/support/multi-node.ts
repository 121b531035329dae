// The multi-node cluster: the local cluster's real-0 (test/cluster/up) and two
// more real nodes, real-1 and real-2, added for the multi-node suites and
// removed after them, so the single-node suites keep one node. The three share
// this machine's filesystem, as NFS clients share a server's, which is what the
// StorageClass shared-rwx gives (test/cluster/provisioner.ts).
// RLMESH_REAL_NODES=3 test/cluster/up starts the same three nodes for a
// developer's own use.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { realNodes, startRealNode, stopRealNode, type RealNode } from '../cluster/real-node.ts';
import { clusterDir, kubectl } from './cluster.ts';

export const MULTI_NODE_NAMES = ['real-0', 'real-1', 'real-2'] as const;
/** The ReadWriteMany class (NFS-like) and the node-bound ReadWriteOnce class (a local disk) of test/cluster/up. */
export const SHARED_CLASS = 'shared-rwx';
export const NODE_LOCAL_CLASS = 'node-local';
/** The multi-node suites' --node-monitor-grace-period (setNodeMonitorGrace). */
export const MULTI_NODE_GRACE_SECONDS = 50;

/** Starts whichever of real-1 and real-2 is missing and returns the three nodes, Ready. */
export async function ensureThreeRealNodes(): Promise<RealNode[]> {
  const running = new Set(realNodes().map((n) => n.name));
  if (!running.has('real-0')) throw new Error('real-0 is not running: start the local cluster with test/cluster/up (RLMESH_REAL_NODES=1 or more)');
  const missing = MULTI_NODE_NAMES.filter((n) => !running.has(n));
  // one at a time: each start takes the next free node index and writes the others' routes
  for (const name of missing) await startRealNode({ name });
  kubectl(['wait', '--for=condition=Ready', ...MULTI_NODE_NAMES.map((n) => `node/${n}`), '--timeout=120s']);
  const nodes = realNodes();
  return MULTI_NODE_NAMES.map((n) => nodes.find((x) => x.name === n)!);
}

/** Removes real-1 and real-2 (and their pods), leaving the single-node cluster as test/cluster/up made it. */
export async function stopExtraRealNodes(): Promise<void> {
  for (const n of realNodes()) if (n.name !== 'real-0') await stopRealNode(n.name, { keepHostNetwork: true });
}

/**
 * kube-controller-manager's --node-monitor-grace-period: how long a node may stop reporting before
 * it is Ready Unknown. test/cluster/up starts it with 180 s, for the 5,000 kwok nodes of the scale
 * benchmark on this machine; three real nodes and a few kwok ones need no more than Kubernetes's
 * default, 50 s. Rewrites the recorded command line, restarts it (test/cluster/restart replays
 * it) and returns the value it had.
 */
export function setNodeMonitorGrace(value: string): string {
  const file = join(clusterDir(), 'cmd', 'kube-controller-manager');
  const flag = '--node-monitor-grace-period=';
  const args = readFileSync(file, 'utf8').split('\0');
  const at = args.findIndex((a) => a.startsWith(flag));
  if (at < 0) throw new Error(`${file} has no ${flag}: start the local cluster with test/cluster/up`);
  const previous = args[at]!.slice(flag.length);
  if (previous === value) return previous;
  args[at] = flag + value;
  writeFileSync(file, args.join('\0'));
  // (not runtime.ts's ROOT: that module registers vitest hooks, which a globalSetup cannot)
  const restart = join(dirname(fileURLToPath(import.meta.url)), '../cluster/restart');
  execFileSync(restart, ['kube-controller-manager'], { stdio: 'pipe', timeout: 60_000 });
  return previous;
}
