// NetworkPolicy enforcement: which CNI the cluster runs (from its DaemonSets)
// and what the controller's probe pod found. Pure verdict logic; the probe
// itself is controller/network-policy-probe.ts, its command netprobe.ts.
import * as k8s from '@kubernetes/client-node';
import { isForbidden } from '../kube-errors.ts';
import type { CheckResult } from './types.ts';

export const PROBE_ID = 'network-policy';

type Cni = { match: RegExp; name: string; enforces: boolean };
const CNIS: Cni[] = [
  { match: /^canal/, name: 'Canal (Calico policy on Flannel)', enforces: true },
  { match: /^calico-node/, name: 'Calico', enforces: true },
  { match: /^cilium$|^cilium-agent/, name: 'Cilium', enforces: true },
  { match: /^kube-router/, name: 'kube-router', enforces: true },
  { match: /^weave-net/, name: 'Weave Net', enforces: true },
  { match: /^antrea-agent/, name: 'Antrea', enforces: true },
  { match: /^azure-npm/, name: 'Azure Network Policy Manager', enforces: true },
  { match: /^ovnkube-node|^kube-ovn-cni/, name: 'OVN-Kubernetes', enforces: true },
  { match: /flannel/, name: 'Flannel', enforces: false },
];

export type CniFacts = { names: string[]; enforcing: boolean; unknown: boolean; unread?: string };

/** Recognised CNIs from DaemonSet names; flannel alone does not enforce NetworkPolicy. */
export function detectCni(daemonSets: string[]): CniFacts {
  const found = new Map<string, boolean>();
  for (const ds of daemonSets) {
    const cni = CNIS.find((c) => c.match.test(ds));
    if (cni) found.set(cni.name, cni.enforces);
  }
  return { names: [...found.keys()], enforcing: [...found.values()].some(Boolean), unknown: found.size === 0 };
}

export async function readCni(kc: k8s.KubeConfig): Promise<CniFacts> {
  const apps = kc.makeApiClient(k8s.AppsV1Api);
  try {
    return detectCni((await apps.listDaemonSetForAllNamespaces()).items.map((d) => d.metadata?.name ?? ''));
  } catch (err) {
    if (!isForbidden(err)) throw err;
  }
  try {
    return detectCni((await apps.listNamespacedDaemonSet({ namespace: 'kube-system' })).items.map((d) => d.metadata?.name ?? ''));
  } catch (err) {
    if (!isForbidden(err)) throw err;
    return { names: [], enforcing: false, unknown: true, unread: 'no right to list DaemonSets' };
  }
}

export const cniText = (cni: CniFacts): string => (cni.unknown ? `CNI not recognised from the DaemonSets${cni.unread ? ` (${cni.unread})` : ''}` : `CNI: ${cni.names.join(', ')}`);

/** Before install (CLI): what the DaemonSets say; the probe proves it after install. */
export function cniVerdict(cni: CniFacts): CheckResult {
  if (!cni.unknown && cni.enforcing) {
    return { id: PROBE_ID, verdict: 'pass', found: `${cniText(cni)}, which enforces NetworkPolicy; after install the controller's probe pod proves it`, fix: 'Nothing to do.' };
  }
  if (!cni.unknown) {
    return {
      id: PROBE_ID,
      verdict: 'fail',
      found: `${cniText(cni)}, which does not enforce NetworkPolicy: evaluation pods could bypass the egress proxy`,
      fix: 'Install a CNI that enforces NetworkPolicy (Calico, Cilium, or Canal on top of Flannel) before installing the runtime.',
    };
  }
  return {
    id: PROBE_ID,
    verdict: 'warn',
    found: `${cniText(cni)}; cannot tell whether NetworkPolicy is enforced`,
    fix: "Check that your CNI enforces NetworkPolicy; after install, the controller's probe reports it in ConfigMap rlmesh-network-policy-probe.",
  };
}

/** What the probe pod saw: exit 0 enforced, 10 forbidden target reachable, 11 allowed target unreachable, 12 allowed target name unresolved. */
export const PROBE_EXIT = { enforced: 0, forbiddenReachable: 10, allowedUnreachable: 11, allowedUnresolved: 12 } as const;

export type ProbeOutcome =
  | { kind: 'exited'; exitCode: number; message?: string }
  | { kind: 'not-run'; reason: string }; // never started, timed out, or refused by admission

export type ProbeTargets = { forbidden: string; allowed: string };

export function probeVerdict(outcome: ProbeOutcome, targets: ProbeTargets, cni: CniFacts): CheckResult {
  const cniPart = cni.unknown ? '' : ` (${cniText(cni)})`;
  if (outcome.kind === 'not-run') {
    return {
      id: PROBE_ID,
      verdict: 'warn',
      found: `the probe pod in rlmesh-runs did not run: ${outcome.reason}; NetworkPolicy enforcement is not verified${cniPart}`,
      fix: 'Fix what kept the probe pod from running (see its events in rlmesh-runs); the controller probes again within a minute while enforcement is not seen.',
    };
  }
  const detail = outcome.message ? `; probe said: ${outcome.message}` : '';
  switch (outcome.exitCode) {
    case PROBE_EXIT.enforced:
      return { id: PROBE_ID, verdict: 'pass', found: `NetworkPolicy is enforced: from rlmesh-runs, ${targets.forbidden} was blocked and ${targets.allowed} was reachable${cniPart}`, fix: 'Nothing to do.' };
    case PROBE_EXIT.forbiddenReachable:
      return {
        id: PROBE_ID,
        verdict: 'fail',
        found: `NetworkPolicy is not enforced: a pod in rlmesh-runs reached ${targets.forbidden}, which the policies forbid${cni.unknown ? '; CNI not recognised' : `; the CNI is ${cni.names.join(', ')}`}${detail}`,
        fix: cni.names.length && !cni.enforcing
          ? `${cni.names.join(', ')} does not enforce NetworkPolicy: install Calico (or Canal) or Cilium, or evaluation pods can bypass the egress proxy.`
          : "Enable NetworkPolicy enforcement in your CNI (or install Calico or Cilium), or evaluation pods can bypass the egress proxy.",
      };
    case PROBE_EXIT.allowedUnreachable:
    case PROBE_EXIT.allowedUnresolved:
      return {
        id: PROBE_ID,
        verdict: 'fail',
        found: `a pod in rlmesh-runs could not ${outcome.exitCode === PROBE_EXIT.allowedUnresolved ? 'resolve' : 'reach'} the egress proxy ${targets.allowed}, which the policies allow${cniPart}${detail}`,
        fix: outcome.exitCode === PROBE_EXIT.allowedUnresolved
          ? 'Set network.dnsPeers and network.dnsPorts to your resolver (see check dns-peers): evaluation pods cannot resolve names.'
          : 'Check that the egress proxy pods are ready (kubectl -n rlmesh-system get pods) and that no other NetworkPolicy blocks rlmesh-runs from them.',
      };
    default:
      return {
        id: PROBE_ID,
        verdict: 'warn',
        found: `the probe pod exited ${outcome.exitCode}, which is not a probe outcome${detail}`,
        fix: 'Check the probe pod in rlmesh-runs (kubectl -n rlmesh-runs describe pod -l app.kubernetes.io/name=rlmesh-network-policy-probe).',
      };
  }
}
