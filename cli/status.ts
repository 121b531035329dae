// rlmesh status: whether an installation is healthy, after install, with the
// user's kube context only (the post-install twin of rlmesh preflight). Exit 1
// on any failing check, 2 on bad usage.
import { parseArgs } from 'node:util';
import { formatStatusJson, formatStatusTable, statusExitCode } from '../lib/status/format.ts';
import { runStatus } from '../lib/status/run.ts';
import { errorMessage } from '../lib/error-fields.ts';
import { printable } from '../lib/terminal-text.ts';
import { CLUSTER_OPTIONS, loadKubeConfig, outputFormat } from './preflight.ts';
import { UsageError } from './usage-error.ts';
import type { Io } from './clusters-join.ts';

export const STATUS_HELP = `Usage: rlmesh status [--kubeconfig <file>] [--context <name>] [-n <namespace>] [--output table|json]

Says whether the installed runtime is healthy, one line per check: the release
and its versions, the agent's session to the control plane, the credentials,
the preflight summary and NetworkPolicy enforcement, the controller's leader,
the egress proxy and its refusals, the artifact cache, evaluations by phase and
the agent's spool. Each failing check (✗) says what to do. Reads only; never
prints a secret. Exits 1 if any check fails.

Options:
  --kubeconfig <file>   kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)
  --context <name>      context to use (default: the current context)
  -n, --namespace <ns>  the release namespace (default rlmesh-system)
  -o, --output <fmt>    table (default) or json
  -h, --help            this help
`;

export async function status(argv: string[], io: Pick<Io, 'stdout' | 'stderr'>, cliVersion: string): Promise<number> {
  try {
    const { values: opts } = parseArgs({
      args: argv,
      options: CLUSTER_OPTIONS,
      strict: true,
    });
    if (opts.help) {
      io.stdout.write(STATUS_HELP);
      return 0;
    }
    outputFormat(opts.output);
    const kc = loadKubeConfig(opts.kubeconfig, opts.context);
    const report = await runStatus({ kc, namespace: opts.namespace, cliVersion, now: Date.now });
    io.stdout.write(opts.output === 'json' ? formatStatusJson(report) : formatStatusTable(report));
    return statusExitCode(report);
  } catch (err) {
    const usage = err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    io.stderr.write(`rlmesh status: ${printable(errorMessage(err))}${usage ? '; run rlmesh status --help' : ''}\n`);
    return usage ? 2 : 1;
  }
}
