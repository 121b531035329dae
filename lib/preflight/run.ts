// Runs every check that applies where it runs (CLI before install, or the
// agent inside the cluster), one after another, and never throws: a check that
// cannot read what it needs says so as a warn.
import { randomUUID } from 'node:crypto';
import { checkAccessModes } from './checks/access-modes.ts';
import { checkApiServerAddresses } from './checks/api-server-addresses.ts';
import { checkClockSkew } from './checks/clock-skew.ts';
import { checkPrivateViaProxy, PRIVATE_VIA_PROXY } from './checks/private-via-proxy.ts';
import { checkDnsPeers } from './checks/dns-peers.ts';
import { checkGpuResources } from './checks/gpu-resources.ts';
import { checkHelmVersion } from './checks/helm-version.ts';
import { checkInstallRights } from './checks/install-rights.ts';
import { checkKubernetesVersion } from './checks/kubernetes-version.ts';
import { checkNetworkPolicy } from './checks/network-policy.ts';
import { checkNodeArchitecture } from './checks/node-architecture.ts';
import { checkOutbound } from './checks/outbound.ts';
import { checkSingleInstallation } from './checks/single-installation.ts';
import { checkStorageClass } from './checks/storage-class.ts';
import { checkReferencedObjects } from './checks/referenced-objects.ts';
import { checkUserNamespaces } from './checks/user-namespaces.ts';
import { isForbidden } from '../kube-errors.ts';
import type { Check, CheckResult, PreflightContext, Verdict } from './types.ts';
import { errorMessage } from '../error-fields.ts';

export type PreflightReportData = { id: string; at: string; mode: PreflightContext['mode']; checks: CheckResult[] };

type Entry = { id: string; check: Check; cli: boolean; agent: boolean };

const CHECKS: Entry[] = [
  { id: 'kubernetes-version', check: checkKubernetesVersion, cli: true, agent: true },
  // the helm of whoever will run the install command; the agent runs none
  { id: 'helm-version', check: checkHelmVersion, cli: true, agent: false },
  { id: 'node-architecture', check: checkNodeArchitecture, cli: true, agent: true },
  { id: 'install-rights', check: checkInstallRights, cli: true, agent: false },
  { id: 'single-installation', check: checkSingleInstallation, cli: true, agent: true },
  { id: 'storage-class', check: checkStorageClass, cli: true, agent: true },
  { id: 'access-modes', check: checkAccessModes, cli: true, agent: true },
  { id: 'referenced-objects', check: checkReferencedObjects, cli: true, agent: false },
  { id: 'gpu-resources', check: checkGpuResources, cli: true, agent: true },
  { id: 'dns-peers', check: checkDnsPeers, cli: true, agent: true },
  { id: 'network-policy', check: checkNetworkPolicy, cli: true, agent: true },
  { id: 'user-namespaces', check: checkUserNamespaces, cli: true, agent: true },
  // the agent may not read Service default/kubernetes; rlmesh status watches the addresses after install
  { id: 'api-addresses', check: checkApiServerAddresses, cli: true, agent: false },
  { id: 'outbound-443', check: checkOutbound, cli: false, agent: true },
  { id: PRIVATE_VIA_PROXY, check: checkPrivateViaProxy, cli: false, agent: true },
  { id: 'clock-skew', check: checkClockSkew, cli: true, agent: true },
];

export const CHECK_IDS = CHECKS.map((c) => c.id);
// what the CLI runs only with --check-outbound: they say what this machine reaches, not the cluster
export const OUTBOUND_CHECK_IDS = ['outbound-443', PRIVATE_VIA_PROXY];
const OUTBOUND = new Set(OUTBOUND_CHECK_IDS);

export type RunOptions = {
  /** CLI: also try TCP+TLS 443 from this machine and ask the corporate proxy for a private destination (off by default: it says little about the cluster's egress) */
  outbound?: boolean;
  /** run only these check ids */
  only?: string[];
};

export async function runPreflight(ctx: PreflightContext, opts: RunOptions = {}): Promise<PreflightReportData> {
  const checks: CheckResult[] = [];
  for (const entry of CHECKS) {
    const applies = ctx.mode === 'agent' ? entry.agent : entry.cli || (OUTBOUND.has(entry.id) && opts.outbound === true);
    if (!applies || (opts.only && !opts.only.includes(entry.id))) continue;
    checks.push(await runOne(entry, ctx));
  }
  return { id: randomUUID(), at: new Date((ctx.now ?? Date.now)()).toISOString(), mode: ctx.mode, checks };
}

async function runOne(entry: Entry, ctx: PreflightContext): Promise<CheckResult> {
  try {
    return await entry.check(ctx);
  } catch (err) {
    const forbidden = isForbidden(err);
    return {
      id: entry.id,
      verdict: 'warn',
      found: `could not check: ${errorMessage(err)}`,
      fix: forbidden
        ? ctx.mode === 'agent'
          ? "The agent's ServiceAccount lacks this read right: upgrade the chart so its ClusterRole grants it."
          : 'Run rlmesh preflight with a kube context that may read this (a cluster admin), or ask one to run it.'
        : 'Check that the Kubernetes API is reachable from here, then run preflight again.',
    };
  }
}

export function worstVerdict(checks: CheckResult[]): Verdict {
  return checks.some((c) => c.verdict === 'fail') ? 'fail' : checks.some((c) => c.verdict === 'warn') ? 'warn' : 'pass';
}
