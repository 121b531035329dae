// rlmesh-gpu-feature-discovery (DaemonSet, one pod per node): labels its own
// node with the GPUs' vendor, model, memory and count from sysfs, so the agent
// can report GPU models. Re-checks every interval; --once labels and exits.
import { parseArgs } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { createLogger } from '../lib/logger.ts';
import { parseIntervalSeconds } from './interval.ts';
import { applyLabels, gpuLabels } from './node-labels.ts';
import { findGpus } from './pci-devices.ts';
import { errorMessage } from '../lib/error-fields.ts';

const USAGE = `usage: rlmesh-runtime gpu-discovery [--once] [--sysfs-root /sys] [--interval-seconds 600]
Labels the node named by $NODE_NAME with its GPUs' vendor, model, memory and count
(rlmesh.dev/gpu.*), read from PCI devices in sysfs; re-checks every interval.`;

const log = createLogger('gpu-discovery');
const { values: a } = parseArgs({
  options: {
    help: { type: 'boolean', short: 'h', default: false },
    once: { type: 'boolean', default: false },
    'sysfs-root': { type: 'string', default: '/sys' },
    'interval-seconds': { type: 'string', default: '600' },
  },
  strict: true,
});

if (a.help) {
  console.log(USAGE);
  process.exit(0);
}
let intervalMs: number;
try {
  intervalMs = parseIntervalSeconds(a['interval-seconds']);
} catch (err) {
  log.fatal(errorMessage(err));
  console.error(`rlmesh-gpu-discovery: ${errorMessage(err)}\n${USAGE}`);
  process.exit(2);
}
const nodeName = process.env.NODE_NAME;
if (!nodeName) {
  log.fatal('NODE_NAME is not set: the DaemonSet passes it from spec.nodeName; set it to the node to label');
  process.exit(2);
}
const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(k8s.CoreV1Api);

async function labelOnce(): Promise<void> {
  const gpus = await findGpus(a['sysfs-root']);
  const labels = gpuLabels(gpus);
  const patched = await applyLabels(core, nodeName!, labels);
  log.info({ node: nodeName, gpus: gpus.length, labels, patched }, patched ? 'node GPU labels updated' : 'node GPU labels unchanged');
}

for (;;) {
  try {
    await labelOnce();
    if (a.once) process.exit(0);
  } catch (err) {
    const msg = (err as { body?: unknown; message?: string }).message ?? String(err);
    log.error({ node: nodeName, err: msg }, 'cannot label the node; retrying (check ClusterRole rlmesh-gpu-feature-discovery: nodes get, patch)');
    if (a.once) process.exit(1);
  }
  await new Promise((r) => setTimeout(r, a.once ? 0 : intervalMs));
}
