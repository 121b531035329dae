// The release and its versions: the chart (its Deployments' helm.sh/chart
// label), the images the components run, the agent's own, the CLI's, judged
// by the skew policy (lib/version-skew.ts).
import type * as k8s from '@kubernetes/client-node';
import { cliChartSkew, componentSkew } from '../../version-skew.ts';
import { agentStatus, runsNamespace, runtimeDeployments } from '../reads.ts';
import type { CheckResult, StatusContext } from '../types.ts';

export type ReleaseFacts = { namespace: string; deployments: k8s.V1Deployment[]; agentVersion: string | undefined; cliVersion: string };

const shortImage = (image: string): string => image.replace(/@sha256:([0-9a-f]{12})[0-9a-f]*$/, '@sha256:$1…');

export function releaseVerdict(f: ReleaseFacts): CheckResult {
  const id = 'release';
  const labels = f.deployments.map((d) => d.metadata?.labels ?? {});
  const chartLabel = labels.map((l) => l['helm.sh/chart']).find(Boolean);
  if (!f.deployments.length || !chartLabel) {
    return { id, verdict: 'fail', found: `no rlmesh-runtime release in namespace ${f.namespace}`, fix: `Install the chart (the Connect your cluster command), or pass -n with the namespace you installed it in.` };
  }
  const chartVersion = chartLabel.replace(/^.*-(\d+\.\d+\.\d+\S*)$/, '$1');
  const appVersion = labels.map((l) => l['app.kubernetes.io/version']).find(Boolean) ?? chartVersion;
  const release = labels.map((l) => l['app.kubernetes.io/instance']).find(Boolean) ?? '?';
  const images = [...new Set(f.deployments.flatMap((d) => d.spec?.template.spec?.containers.map((c) => shortImage(c.image ?? '')) ?? []))];
  const found = `release ${release}: chart ${chartVersion} (appVersion ${appVersion}), agent ${f.agentVersion ?? 'unknown'}, CLI ${f.cliVersion}; images ${images.join(', ')}`;
  const problems = [cliChartSkew(f.cliVersion, chartVersion), ...(f.agentVersion ? [componentSkew('rlmesh-cluster-agent', f.agentVersion, appVersion)] : [])].filter((s) => !s.ok);
  if (problems.length) return { id, verdict: 'fail', found: `${found}; ${problems.map((p) => p.problem).join('; ')}`, fix: problems.map((p) => p.fix).join(' ') };
  return { id, verdict: 'pass', found, fix: 'Upgrade the CLI with the chart: the same minor.' };
}

export async function checkRelease(ctx: StatusContext): Promise<CheckResult> {
  const [sys, runs, agent] = await Promise.all([runtimeDeployments(ctx, ctx.namespace), runsNamespace(ctx).then((ns) => runtimeDeployments(ctx, ns)), agentStatus(ctx)]);
  return releaseVerdict({ namespace: ctx.namespace, deployments: [...sys, ...runs], agentVersion: agent.kind === 'ok' ? agent.status.agentVersion : undefined, cliVersion: ctx.cliVersion });
}
