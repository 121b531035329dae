// The agent's configuration, by the rule every component follows: the chart's
// runtime config (ConfigMap rlmesh-runtime-config), flags for the agent's own
// tuning (each duration names its unit; production uses the defaults, tests
// shrink minutes to seconds), and env only for what the pod is given: its name
// and namespace, the join token from its Secret, RLMESH_LISTEN_HOST.
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { MOUNTS } from '../lib/fixed-names.ts';
import { listenHost as listenHostFromEnv } from '../lib/listen-address.ts';
import { DEFAULT_CONFIG_PATH, loadRuntimeConfig, type RuntimeConfig } from '../lib/runtime-config.ts';

export type AgentConfig = {
  runtime: RuntimeConfig;
  /** the single-use join token (chart value joinToken via env), absent in GitOps mode */
  joinToken: string | undefined;
  podName: string;
  podNamespace: string;
  spoolDir: string;
  /** address the health and metrics servers bind */
  /** undefined: every interface, IPv4 and IPv6 (lib/listen-address.ts) */
  listenHost: string | undefined;
  timing: Timing;
};

export type Timing = {
  heartbeatMs: number;
  /** no message from the control plane for this long = a dead session */
  silenceMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** backoff after the control plane refused the credential */
  authBackoffMs: number;
  /** coalescing window for node reports */
  reportDelayMs: number;
  /** an informer or Secret watch silent for this long is restarted */
  watchSilenceMs: number;
  /** join Lease duration */
  leaseSeconds: number;
};

const ms = (def: number) => z.coerce.number({ message: 'must be a number of milliseconds' }).int().min(1).default(def);

const envSchema = z.object({
  RLMESH_JOIN_TOKEN: z
    .string()
    .trim()
    .optional()
    .transform((v) => (v ? v : undefined))
    .refine((v) => v === undefined || v.startsWith('rlm_jt_'), {
      message: "must look like rlm_jt_… (copy the whole token from the install command; it starts with 'rlm_jt_')",
    }),
  POD_NAME: z.string().min(1, 'must be set (the Deployment passes it from metadata.name)').default('rlmesh-cluster-agent'),
  POD_NAMESPACE: z.string().min(1).optional(),
});

const flagSchema = z.object({
  help: z.boolean().default(false),
  'spool-dir': z.string().min(1).default(MOUNTS.agentSpoolDir),
  'heartbeat-ms': ms(10_000),
  'silence-ms': ms(45_000),
  'backoff-base-ms': ms(250),
  'backoff-max-ms': ms(30_000),
  'auth-backoff-ms': ms(30_000),
  'report-delay-ms': ms(250),
  'watch-silence-ms': ms(300_000),
  'lease-seconds': z.coerce.number({ message: 'must be a number of seconds' }).int().min(5).default(60),
});

// every flag is a string on the command line (--help a switch); the schema above names, converts and defaults them
const FLAG_OPTIONS = Object.fromEntries(
  Object.keys(flagSchema.shape).map((name) => [name, name === 'help' ? { type: 'boolean' as const, short: 'h' } : { type: 'string' as const }]),
);

export const USAGE = `usage: rlmesh-runtime agent [--spool-dir DIR] [--heartbeat-ms 10000] [--silence-ms 45000]
  [--backoff-base-ms 250] [--backoff-max-ms 30000] [--auth-backoff-ms 30000] [--report-delay-ms 250]
  [--watch-silence-ms 300000] [--lease-seconds 60]
The chart's runtime config comes from RLMESH_CONFIG (default /etc/rlmesh/config/config.json); env:
  RLMESH_JOIN_TOKEN   the single-use join token (absent with your own Secrets)
  POD_NAME, POD_NAMESPACE, RLMESH_LISTEN_HOST (default every interface, IPv4 and IPv6)
See agent/README.md.`;

export function wantsHelp(argv: string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/** Reads the runtime config, flags and env; throws one line naming the field, flag or variable on any problem. */
export function loadAgentConfig(argv: string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const runtime = loadRuntimeConfig(env.RLMESH_CONFIG ?? DEFAULT_CONFIG_PATH);
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`invalid agent environment: ${issue.path.join('.')} ${issue.message}`);
  }
  const e = parsed.data;
  let listenHost: string | undefined;
  try {
    listenHost = listenHostFromEnv(env);
  } catch (err) {
    throw new Error(`invalid agent environment: ${(err as Error).message}`);
  }
  const { values } = parseArgs({ args: argv, options: FLAG_OPTIONS, strict: true });
  const flags = flagSchema.safeParse(values);
  if (!flags.success) {
    const issue = flags.error.issues[0]!;
    const flag = String(issue.path[0]);
    throw new Error(`invalid agent flag: --${flag} ${JSON.stringify((values as Record<string, unknown>)[flag])} ${issue.message}`);
  }
  const f = flags.data;
  return {
    runtime,
    joinToken: e.RLMESH_JOIN_TOKEN,
    podName: e.POD_NAME,
    podNamespace: e.POD_NAMESPACE ?? runtime.namespace,
    spoolDir: f['spool-dir'],
    listenHost,
    timing: {
      heartbeatMs: f['heartbeat-ms'],
      silenceMs: f['silence-ms'],
      backoffBaseMs: f['backoff-base-ms'],
      backoffMaxMs: f['backoff-max-ms'],
      authBackoffMs: f['auth-backoff-ms'],
      reportDelayMs: f['report-delay-ms'],
      watchSilenceMs: f['watch-silence-ms'],
      leaseSeconds: f['lease-seconds'],
    },
  };
}
