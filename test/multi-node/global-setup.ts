// The multi-node suites run on three real nodes: the local cluster's real-0
// (test/cluster/up, started here if it is not running) and real-1 and real-2,
// added before the first file and removed after the last, so the single-node
// suites that may run after these keep one node.
import setupCluster from '../support/global-setup.ts';
import { ensureThreeRealNodes, stopExtraRealNodes } from '../support/multi-node.ts';

export default async function setup(): Promise<() => Promise<void>> {
  setupCluster();
  await ensureThreeRealNodes();
  return stopExtraRealNodes;
}
