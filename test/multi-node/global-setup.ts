// The multi-node suites run on three real nodes: the local cluster's real-0
// (test/cluster/up, started here if it is not running) and real-1 and real-2,
// added before the first file and removed after the last, so the single-node
// suites that may run after these keep one node; meanwhile kube-controller-manager
// marks a silent node Ready Unknown after 50 s instead of up's 180 s.
import setupCluster from '../support/global-setup.ts';
import { ensureThreeRealNodes, MULTI_NODE_GRACE_SECONDS, setNodeMonitorGrace, stopExtraRealNodes } from '../support/multi-node.ts';

export default async function setup(): Promise<() => Promise<void>> {
  await setupCluster();
  await ensureThreeRealNodes();
  const grace = setNodeMonitorGrace(`${MULTI_NODE_GRACE_SECONDS}s`);
  return async () => {
    await stopExtraRealNodes();
    setNodeMonitorGrace(grace);
  };
}
