// Where the agent's preflight results go: ConfigMap rlmesh-preflight in the
// release namespace (data: report.json and a one-line summary), which users
// read with
//   kubectl -n rlmesh-system get configmap rlmesh-preflight -o jsonpath='{.data.summary}'
// and the PreflightReport message the agent sends to the control plane.
import { create } from '@bufbuild/protobuf';
import * as k8s from '@kubernetes/client-node';
import { PreflightReportSchema, type PreflightReport } from '../gen/rlmesh/v1/session_pb.ts';
import { summaryLine } from './format.ts';
import { PROBE_ID } from './network-policy.ts';
import { USER_NAMESPACES_CHECK } from './checks/user-namespaces.ts';
import { USER_NAMESPACES_REASON } from '../user-namespaces.ts';
import { NAMES } from '../fixed-names.ts';
import { isNotFound } from '../kube-errors.ts';
import { withCommonLabels } from '../common-labels.ts';
import type { PreflightReportData } from './run.ts';

export const PREFLIGHT_CONFIGMAP = NAMES.preflightConfigMap;

export function preflightConfigMap(report: PreflightReportData, namespace: string, commonLabels?: Readonly<Record<string, string>>): k8s.V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: PREFLIGHT_CONFIGMAP,
      namespace,
      labels: withCommonLabels({ 'app.kubernetes.io/name': PREFLIGHT_CONFIGMAP, 'app.kubernetes.io/part-of': 'rlmesh-runtime', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent' }, commonLabels),
    },
    data: { summary: summaryLine(report), 'report.json': JSON.stringify(report, null, 2) },
  };
}

/** Creates or replaces ConfigMap rlmesh-preflight with this report; `commonLabels`: the chart's (runtime config pods.commonLabels). */
export async function publishConfigMap(kc: k8s.KubeConfig, report: PreflightReportData, namespace: string, commonLabels?: Readonly<Record<string, string>>): Promise<void> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const body = preflightConfigMap(report, namespace, commonLabels);
  try {
    await core.replaceNamespacedConfigMap({ name: PREFLIGHT_CONFIGMAP, namespace, body });
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await core.createNamespacedConfigMap({ namespace, body });
  }
}

/** The report as the agent sends it on the ClusterSession stream (AgentMessage.preflight_report). */
export function preflightReportMessage(report: PreflightReportData, blocked?: string): PreflightReport {
  return create(PreflightReportSchema, {
    id: report.id,
    checks: report.checks.map((c) => ({ id: c.id, verdict: c.verdict, found: c.found, fix: c.fix })),
    evaluationsBlocked: blocked !== undefined,
    evaluationsBlockedReason: blocked ?? '',
  });
}

/**
 * Why this cluster cannot run evaluations, or undefined when it can: the controller starts no
 * evaluation pod until NetworkPolicy enforcement has been seen (controller/network-fence.ts),
 * unless evaluations.runWithoutNetworkPolicyEnforcement is set, nor one that must run in a user
 * namespace (evaluations.hostUsers=false) while a node it may use lacks them.
 */
export function evaluationsBlocked(report: PreflightReportData, runWithoutEnforcement: boolean): string | undefined {
  // evaluations.hostUsers=false on nodes without user namespaces (the check fails only then)
  const users = report.checks.find((c) => c.id === USER_NAMESPACES_CHECK);
  if (users?.verdict === 'fail') return `evaluations wait as ${USER_NAMESPACES_REASON} until the nodes they may use support user namespaces: ${users.found}; ${users.fix}`;
  if (runWithoutEnforcement) return undefined;
  const np = report.checks.find((c) => c.id === PROBE_ID);
  if (np?.verdict === 'pass') return undefined;
  const found = np ? `${np.found}; ${np.fix}` : 'the NetworkPolicy check did not run';
  return `evaluations wait as NetworkPolicyNotEnforced until NetworkPolicy enforcement is seen: ${found}`;
}
