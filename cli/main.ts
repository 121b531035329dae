#!/usr/bin/env node
// rlmesh: the command line for what a cluster operator does outside the
// dashboard: check a cluster before installing (rlmesh preflight), say whether
// an installation is healthy (rlmesh status), drain it on the cluster's side
// (rlmesh drain) and claim a join token as Secrets (rlmesh clusters join).
import pkg from '../package.json' with { type: 'json' };
import { CliError, clustersJoin, type Io } from './clusters-join.ts';
import { errorMessage } from '../lib/error-fields.ts';

/** The runtime's version (package.json), which the released CLI carries too. */
export const VERSION: string = pkg.version;

const HELP = `Usage: rlmesh <command> [options]

Commands:
  preflight       check the cluster of your kube context against the runtime's prerequisites
  status          say whether the installed runtime is healthy, one line per check
  drain           refuse new evaluations on the cluster's side, let running ones finish (--undo ends it)
  clusters join   trade a join token for the cluster's credentials, written as Kubernetes Secrets

Options:
  --version       print the version and exit
  -h, --help      this help

Run "rlmesh <command> --help" for a command's options.
`;

const CLUSTERS_HELP = `Usage: rlmesh clusters <command> [options]

Commands:
  join   trade a join token for the cluster's credentials, written as Kubernetes Secrets

Run "rlmesh clusters join --help" for its options.
`;

export async function run(argv: string[], io: Io): Promise<number> {
  const [group, command, ...rest] = argv;
  const isHelp = (a: string | undefined): boolean => a === '--help' || a === '-h' || a === 'help';
  try {
    if (group === undefined || isHelp(group)) {
      io.stdout.write(HELP);
      return group === undefined ? 2 : 0;
    }
    if (group === '--version') {
      io.stdout.write(`${VERSION}\n`);
      return 0;
    }
    // loaded on demand: it brings the Kubernetes client, which clusters join does not need
    if (group === 'preflight') return await (await import('./preflight.ts')).preflight(argv.slice(1), io);
    if (group === 'status') return await (await import('./status.ts')).status(argv.slice(1), io, VERSION);
    if (group === 'drain') return await (await import('./drain.ts')).drain(argv.slice(1), io);
    if (group !== 'clusters') throw new CliError(`unknown command "${group}"; run rlmesh --help`, 2);
    if (command === undefined || isHelp(command)) {
      io.stdout.write(CLUSTERS_HELP);
      return command === undefined ? 2 : 0;
    }
    if (command !== 'join') throw new CliError(`unknown command "clusters ${command}"; run rlmesh clusters --help`, 2);
    await clustersJoin(rest, io);
    return 0;
  } catch (err) {
    if (err instanceof CliError) {
      io.stderr.write(`rlmesh: ${err.message}\n`);
      return err.exitCode;
    }
    io.stderr.write(`rlmesh: unexpected failure: ${errorMessage(err)}\n`);
    return 1;
  }
}

if (import.meta.main) {
  process.exitCode = await run(process.argv.slice(2), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
}
