// Node architectures: the runtime images are linux/amd64 only. Names every
// node an evaluation pod cannot use, and why.
import type * as k8s from '@kubernetes/client-node';
import { listNodes, nameList, nodeArch, nodeName, nodeOs, unschedulableReason } from '../kube.ts';
import type { CheckResult, PreflightContext } from '../types.ts';

const ID = 'node-architecture';

export function architectureVerdict(nodes: k8s.V1Node[], nodeSelector = ''): CheckResult {
  const scope = nodeSelector ? ` matching ${nodeSelector}` : '';
  const usable: string[] = [];
  const foreign: string[] = [];
  const other: string[] = [];
  for (const n of nodes) {
    const arch = nodeArch(n);
    const os = nodeOs(n);
    if (os !== 'linux' || arch !== 'amd64') {
      foreign.push(`${nodeName(n)} (${os}/${arch}: the runtime images are built for linux/amd64 only, so no runtime or evaluation pod can run there)`);
      continue;
    }
    const why = unschedulableReason(n);
    if (why) other.push(`${nodeName(n)} (${why})`);
    else usable.push(nodeName(n));
  }
  const skipped = [...foreign, ...other];
  const skippedLines = skipped.length ? `; skipping ${skipped.length} node(s): ${skipped.join('; ')}` : '';
  if (nodes.length === 0) {
    return {
      id: ID,
      verdict: 'fail',
      found: `no nodes${scope}`,
      fix: nodeSelector ? `Label Linux amd64 nodes with ${nodeSelector}, or set agent.reportNodeSelector to a selector that matches them.` : 'Add Linux amd64 nodes to the cluster.',
    };
  }
  if (usable.length === 0) {
    return {
      id: ID,
      verdict: 'fail',
      found: `no schedulable linux/amd64 node among ${nodes.length} node(s)${scope}${skippedLines}`,
      fix: 'Add a schedulable Linux amd64 node (uncordoned, without NoSchedule taints): the runtime images run on linux/amd64 only.',
    };
  }
  const found = `linux/amd64: ${usable.length} schedulable node(s) (${nameList(usable)})${skippedLines}`;
  if (foreign.length) {
    return {
      id: ID,
      verdict: 'warn',
      found,
      fix: 'Nothing to do if the skipped nodes are not meant for evaluations; to use them, replace them with Linux amd64 nodes, as the runtime publishes no image for their architecture.',
    };
  }
  return { id: ID, verdict: 'pass', found, fix: 'Nothing to do.' };
}

export async function checkNodeArchitecture(ctx: PreflightContext): Promise<CheckResult> {
  return architectureVerdict(await listNodes(ctx), ctx.settings.nodeSelector);
}
