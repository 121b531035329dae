// The agent's configuration: the chart's runtime config (ConfigMap
// rlmesh-runtime-config) plus what the Deployment passes as env. The timing
// knobs exist so tests can shrink minutes to seconds; production uses defaults.
import { z } from 'zod';
import { DEFAULT_CONFIG_PATH, loadRuntimeConfig, type RuntimeConfig } from '../lib/runtime-config.ts';

export type AgentConfig = {
  runtime: RuntimeConfig;
  /** the single-use join token (chart value joinToken via env), absent in GitOps mode */
  joinToken: string | undefined;
  podName: string;
  podNamespace: string;
  spoolDir: string;
  /** address the health and metrics servers bind */
  listenHost: string;
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

const ms = (name: string, def: number) =>
  z.coerce.number({ message: `${name} must be a number of milliseconds` }).int().min(1).default(def);

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
  RLMESH_SPOOL_DIR: z.string().min(1).default('/var/lib/rlmesh/spool'),
  RLMESH_AGENT_LISTEN_HOST: z.string().min(1).default('0.0.0.0'),
  RLMESH_AGENT_HEARTBEAT_MS: ms('RLMESH_AGENT_HEARTBEAT_MS', 10_000),
  RLMESH_AGENT_SILENCE_MS: ms('RLMESH_AGENT_SILENCE_MS', 45_000),
  RLMESH_AGENT_BACKOFF_BASE_MS: ms('RLMESH_AGENT_BACKOFF_BASE_MS', 250),
  RLMESH_AGENT_BACKOFF_MAX_MS: ms('RLMESH_AGENT_BACKOFF_MAX_MS', 30_000),
  RLMESH_AGENT_AUTH_BACKOFF_MS: ms('RLMESH_AGENT_AUTH_BACKOFF_MS', 30_000),
  RLMESH_AGENT_REPORT_DELAY_MS: ms('RLMESH_AGENT_REPORT_DELAY_MS', 250),
  RLMESH_AGENT_WATCH_SILENCE_MS: ms('RLMESH_AGENT_WATCH_SILENCE_MS', 300_000),
  RLMESH_AGENT_LEASE_SECONDS: z.coerce.number().int().min(5).default(60),
});

/** Reads config and env; throws one line naming the field on any problem. */
export function loadAgentConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const runtime = loadRuntimeConfig(env.RLMESH_CONFIG ?? DEFAULT_CONFIG_PATH);
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`invalid agent environment: ${issue.path.join('.')} ${issue.message}`);
  }
  const e = parsed.data;
  return {
    runtime,
    joinToken: e.RLMESH_JOIN_TOKEN,
    podName: e.POD_NAME,
    podNamespace: e.POD_NAMESPACE ?? runtime.namespace,
    spoolDir: e.RLMESH_SPOOL_DIR,
    listenHost: e.RLMESH_AGENT_LISTEN_HOST,
    timing: {
      heartbeatMs: e.RLMESH_AGENT_HEARTBEAT_MS,
      silenceMs: e.RLMESH_AGENT_SILENCE_MS,
      backoffBaseMs: e.RLMESH_AGENT_BACKOFF_BASE_MS,
      backoffMaxMs: e.RLMESH_AGENT_BACKOFF_MAX_MS,
      authBackoffMs: e.RLMESH_AGENT_AUTH_BACKOFF_MS,
      reportDelayMs: e.RLMESH_AGENT_REPORT_DELAY_MS,
      watchSilenceMs: e.RLMESH_AGENT_WATCH_SILENCE_MS,
      leaseSeconds: e.RLMESH_AGENT_LEASE_SECONDS,
    },
  };
}
