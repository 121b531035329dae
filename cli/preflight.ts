// rlmesh preflight: the cluster checked against every prerequisite, with the
// user's kube context, before helm install. Exit 1 on any fail, 2 on bad usage.
import { parseArgs } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { exitCode, formatJson, formatTable } from '../lib/preflight/format.ts';
import { runPreflight } from '../lib/preflight/run.ts';
import { settingsFromValues } from '../lib/preflight/settings.ts';
import type { Io } from './clusters-join.ts';
import { errorMessage } from '../lib/error-fields.ts';
import { PROXY_OPTIONS, proxyHelp, proxyOfCommand } from './proxy.ts';
import { UsageError } from './usage-error.ts';
import { readValuesFiles } from './values-files.ts';

export const PREFLIGHT_HELP = `Usage: rlmesh preflight [--kubeconfig <file>] [--context <name>] [--values <file>]... [--output table|json]

Checks the cluster of your kube context against the runtime's prerequisites
before you install it: Kubernetes version, the helm on PATH (3.14 or later),
node architectures, your rights, one installation per cluster, storage, GPUs,
DNS peers, NetworkPolicy and clock skew. Each check says what it found and
what to do. Exits 1 if any check fails.

Options:
  --kubeconfig <file>   kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)
  --context <name>      context to use (default: the current context)
  -f, --values <file>   the values file(s) you will install with (repeatable, later wins)
  -n, --namespace <ns>  the release namespace (default rlmesh-system)
  -o, --output <fmt>    table (default) or json
  --check-outbound      also try TCP+TLS 443 to the API and registry hosts from this machine, and ask
                        controlPlane.proxy for a private destination (the kubernetes Service's
                        ClusterIP): FAIL if it opens it
${proxyHelp(24)}
  -h, --help            this help

The Kubernetes API is reached as the kubeconfig says (its proxy-url, if any), never through --proxy.
`;

/** The options every command that reads the cluster takes (preflight, status). */
export const CLUSTER_OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n', default: 'rlmesh-system' },
  output: { type: 'string', short: 'o', default: 'table' },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

/** --output as given: table or json, else a usage error. */
export function outputFormat(output: string): 'table' | 'json' {
  if (output !== 'table' && output !== 'json') throw new UsageError(`--output must be table or json, not "${output}"`);
  return output;
}

export async function preflight(argv: string[], io: Pick<Io, 'stdout' | 'stderr'>): Promise<number> {
  try {
    const { values: opts } = parseArgs({
      args: argv,
      options: { ...CLUSTER_OPTIONS, ...PROXY_OPTIONS, values: { type: 'string', short: 'f', multiple: true }, 'check-outbound': { type: 'boolean', default: false } },
      strict: true,
    });
    if (opts.help) {
      io.stdout.write(PREFLIGHT_HELP);
      return 0;
    }
    outputFormat(opts.output);
    const values = readValuesFiles(opts.values ?? []);
    // this machine's connections to the control plane (clock-skew, and outbound-443 with --check-outbound)
    const proxy = proxyOfCommand(opts, values, opts.values ?? [], process.env);
    const kc = loadKubeConfig(opts.kubeconfig, opts.context);
    const settings = { ...settingsFromValues(values, opts.namespace), proxy };
    // private-via-proxy asks the cluster's proxy: with the credentials given here when it is the one this machine uses
    if (!opts.proxy && values.controlPlane.proxy.url && proxy) settings.corporateProxy = proxy;
    const report = await runPreflight({ mode: 'cli', kc, settings }, { outbound: opts['check-outbound'] });
    io.stdout.write(opts.output === 'json' ? formatJson(report) : formatTable(report));
    return exitCode(report);
  } catch (err) {
    const usage = err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    io.stderr.write(`rlmesh preflight: ${errorMessage(err)}${usage ? '; run rlmesh preflight --help' : ''}\n`);
    return usage ? 2 : 1;
  }
}

export function loadKubeConfig(file: string | undefined, context: string | undefined): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  try {
    if (file) kc.loadFromFile(file);
    else kc.loadFromDefault();
  } catch (err) {
    throw new UsageError(`cannot load the kubeconfig ${file ?? '(default)'}: ${errorMessage(err)}`);
  }
  if (context) {
    if (!kc.getContextObject(context)) throw new UsageError(`the kubeconfig has no context "${context}" (it has: ${kc.getContexts().map((c) => c.name).join(', ') || 'none'})`);
    kc.setCurrentContext(context);
  }
  if (!kc.getCurrentCluster()) throw new UsageError('the kubeconfig has no current cluster: pass --kubeconfig or --context');
  return kc;
}

if (import.meta.main) {
  process.exitCode = await preflight(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr });
}
