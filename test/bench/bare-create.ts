// The controller benchmark's peer: a bare client in a process of its own, as
// the controller is, so neither shares its event loop with the benchmark's
// watch. Creates the pods in FILE (a JSON array) in NAMESPACE, CONCURRENCY at
// a time, over the same kept-alive transport the controller uses, and exits.
// Prints "creating" when it starts to create.
//   node test/bench/bare-create.ts FILE NAMESPACE CONCURRENCY
import { readFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import { reuseConnections } from '../../lib/kube-transport.ts';
import { adminKubeConfig } from '../support/cluster.ts';

const [file, namespace, concurrency] = process.argv.slice(2);
if (!file || !namespace || !concurrency) throw new Error('usage: node test/bench/bare-create.ts FILE NAMESPACE CONCURRENCY');
const pods = JSON.parse(readFileSync(file, 'utf8')) as k8s.V1Pod[];
const core = reuseConnections(adminKubeConfig()).makeApiClient(k8s.CoreV1Api);
// the benchmark's clock starts here, as it starts at the controller's "reconciler started"
console.log('creating');
let i = 0;
await Promise.all(Array.from({ length: Number(concurrency) }, async () => {
  while (i < pods.length) await core.createNamespacedPod({ namespace, body: pods[i++]! });
}));
