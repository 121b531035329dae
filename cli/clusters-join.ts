// rlmesh clusters join: trades a join token for the cluster's credentials and
// writes them as Kubernetes Secrets for GitOps or a secret manager to deliver.
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { z } from 'zod';
import { runtimeConfigSchema } from '../lib/runtime-config.ts';
import { NAMES } from '../lib/fixed-names.ts';
import { PromptCancelled, readAll, readHidden } from './hidden-prompt.ts';
import { secretsYaml } from './k8s-secrets.ts';
import { PrivateFile } from './private-file.ts';
import { errorMessage } from '../lib/error-fields.ts';
import { proxyTunnelError, type OutboundProxy } from '../lib/outbound-proxy.ts';
import { PROXY_OPTIONS, proxyHelp, proxyOfCommand } from './proxy.ts';
import { UsageError } from './usage-error.ts';
import { readValuesFiles } from './values-files.ts';

export const JOIN_HELP = `Usage: rlmesh clusters join [--token <rlm_jt_…> | --token -] --format k8s-secret [--out <file>] [options]

Trades a single-use join token (Clusters → Connect your cluster, or New install
command) for the cluster's control and pull credentials, and writes them as
Kubernetes Secrets to deliver yourself (GitOps, ESO, Vault, Sealed Secrets):
  the control Secret (keys control, cluster-id) in rlmesh-system,
  the pull Secret (kubernetes.io/dockerconfigjson) in rlmesh-system and rlmesh-runs,
  the relay Secret (key relay-secret) in rlmesh-system with --observability.
Then install the chart without joinToken, naming them in credentials.controlSecret
and credentials.pullSecret.

Options:
  --token <rlm_jt_…>        the join token; "-" reads it from standard input (piped), and in a
                            terminal, "-" or no --token prompts for it without echo (keeps it
                            out of shell history)
  --format k8s-secret       output format (the only one)
  --out <file>              write the YAML here (mode 0600, replacing a regular file; never
                            through a symlink); default: standard output
  --api <url>               control plane API (default https://api.rlmesh.dev, or $RLMESH_API)
  --ca-file <file>          PEM CA bundle to trust for a private control plane
  -f, --values <file>       values file(s) of the install (repeatable, later wins): only
                            controlPlane.proxy is read from them
${proxyHelp(28)}
  --observability           also claim the relay credential (for rlmesh-observability)
  --control-secret <name>   control Secret name (default rlmesh-secrets)
  --pull-secret <name>      pull Secret name (default ${runtimeConfigSchema.shape.credentials.parse({}).pullSecret})
  --relay-secret <name>     relay Secret name (default ${runtimeConfigSchema.shape.credentials.parse({}).relaySecret})
  --namespace <ns>          runtime namespace (default rlmesh-system)
  --runs-namespace <ns>     evaluation namespace (default rlmesh-runs)
  -h, --help                this help

Example:
  rlmesh clusters join --token rlm_jt_… --format k8s-secret --out rlmesh-secrets.yaml
  rlmesh clusters join --format k8s-secret --out rlmesh-secrets.yaml \\
    --proxy http://proxy.corp.example:3128 --proxy-credentials-file ~/.rlmesh-proxy
`;

export type Io = { stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (raw: boolean) => unknown }; stdout: Writable; stderr: Writable };

export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

const joinResponse = z.object({ clusterId: z.string().min(1), control: z.string().min(1), pull: z.string().min(1), relay: z.string().min(1).optional() });
const errorResponse = z.object({ code: z.string(), message: z.string() });

export async function clustersJoin(argv: string[], io: Io): Promise<void> {
  let values;
  try {
    values = parseArgs({
      args: argv,
      options: {
        token: { type: 'string' },
        format: { type: 'string' },
        out: { type: 'string' },
        api: { type: 'string' },
        'ca-file': { type: 'string' },
        values: { type: 'string', short: 'f', multiple: true },
        ...PROXY_OPTIONS,
        observability: { type: 'boolean', default: false },
        'control-secret': { type: 'string', default: 'rlmesh-secrets' },
        'pull-secret': { type: 'string', default: runtimeConfigSchema.shape.credentials.parse({}).pullSecret },
        'relay-secret': { type: 'string', default: runtimeConfigSchema.shape.credentials.parse({}).relaySecret },
        namespace: { type: 'string', default: 'rlmesh-system' },
        'runs-namespace': { type: 'string', default: NAMES.runsNamespace },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    throw new CliError(`${errorMessage(err)}; see rlmesh clusters join --help`, 2);
  }
  if (values.help) {
    io.stdout.write(JOIN_HELP);
    return;
  }
  if (values.format !== 'k8s-secret') {
    throw new CliError(values.format === undefined ? '--format k8s-secret is required (Kubernetes Secrets as YAML)' : `unknown --format ${values.format}; the only format is k8s-secret`, 2);
  }
  for (const flag of ['control-secret', 'pull-secret', 'relay-secret', 'namespace', 'runs-namespace'] as const) {
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(values[flag])) throw new CliError(`--${flag} ${values[flag]} is not a valid Kubernetes name (lowercase letters, digits, "-" and ".")`, 2);
  }
  const api = (values.api ?? process.env.RLMESH_API ?? 'https://api.rlmesh.dev').replace(/\/+$/, '');
  if (!/^https:\/\//.test(api)) throw new CliError(`--api ${api} must be an https:// URL: the control plane only speaks TLS`, 2);
  let ca: string | undefined;
  if (values['ca-file']) {
    try {
      ca = readFileSync(values['ca-file'], 'utf8');
    } catch (err) {
      throw new CliError(`cannot read --ca-file ${values['ca-file']}: ${errorMessage(err)}`, 2);
    }
  }

  let proxy: OutboundProxy | undefined;
  try {
    proxy = proxyOfCommand(values, readValuesFiles(values.values ?? []), values.values ?? [], process.env);
  } catch (err) {
    if (err instanceof UsageError) throw new CliError(`${err.message}; see rlmesh clusters join --help`, 2);
    throw err;
  }

  const token = (await readToken(values.token, io)).trim();
  if (!/^rlm_jt_[0-9A-Za-z]{32,}$/.test(token)) {
    throw new CliError('that is not a join token (expected rlm_jt_ followed by 32 or more letters and digits); copy the whole token from Clusters → Connect your cluster, or open New install command for a fresh one');
  }

  // before the join: a target that cannot take the file must not cost the token
  let out: PrivateFile | undefined;
  if (values.out && values.out !== '-') {
    try {
      out = PrivateFile.open(values.out);
    } catch (err) {
      throw new CliError(`${errorMessage(err)}; the join token was not used`, 2);
    }
  }
  try {
    const result = await join(api, ca, token, values.observability, proxy);
    if (values.observability && !result.relay) throw new CliError('the control plane did not return a relay credential although --observability was given; check that observability is enabled for your organisation');
    const yaml = secretsYaml(
      result,
      { namespace: values.namespace, runsNamespace: values['runs-namespace'], control: values['control-secret'], pull: values['pull-secret'], relay: values['relay-secret'] },
      createHash('sha256').update(token).digest('hex'),
    );
    if (out) {
      try {
        out.commit(yaml);
      } catch (err) {
        throw new CliError(`cluster ${result.clusterId} joined, but its Secrets could not be written: ${errorMessage(err)}; the join token is now used, so get a new one (Clusters → New install command) and run this again`);
      }
      io.stderr.write(
        `cluster ${result.clusterId} joined; wrote Secrets ${values['control-secret']}, ${values['pull-secret']}${result.relay ? `, ${values['relay-secret']}` : ''} to ${values.out}\n` +
          `install without joinToken, with credentials.controlSecret=${values['control-secret']} and credentials.pullSecret=${values['pull-secret']}\n`,
      );
    } else {
      io.stdout.write(yaml);
    }
  } finally {
    out?.discard();
  }
}

async function readToken(flag: string | undefined, io: Io): Promise<string> {
  if (flag !== undefined && flag !== '-') return flag;
  if (flag === '-' && !io.stdin.isTTY) return readAll(io.stdin);
  if (!io.stdin.isTTY) {
    throw new CliError('no join token: pass --token <rlm_jt_…>, or --token - to read it from standard input, or run in a terminal to be prompted for it', 2);
  }
  try {
    return await readHidden('rlmesh join token (input hidden): ', io.stdin, io.stderr);
  } catch (err) {
    if (err instanceof PromptCancelled) throw new CliError(err.message, 130);
    throw err;
  }
}

async function join(api: string, ca: string | undefined, token: string, observability: boolean, proxy: OutboundProxy | undefined): Promise<z.infer<typeof joinResponse>> {
  const through = proxy?.appliesTo(new URL(api).hostname) ? proxy : undefined;
  const connect = through ? through.undiciConnector({ ca, timeoutMs: 30_000 }) : ca ? { ca } : {};
  const dispatcher = new Agent({ connect, headersTimeout: 30_000, bodyTimeout: 30_000 });
  try {
    let res;
    try {
      res = await request(`${api}/v1/clusters/join`, {
        method: 'POST',
        dispatcher,
        headers: { 'content-type': 'application/json', 'user-agent': 'rlmesh-cli' },
        body: JSON.stringify({ token, facts: { source: 'rlmesh-cli', observability } }),
      });
    } catch (err) {
      const refused = proxyTunnelError(err);
      if (refused) throw new CliError(`cannot reach the control plane at ${api}: ${refused.message}; the join token was not used`);
      throw new CliError(`${connectionProblem(api, err)}${through ? ` (through the corporate proxy ${through.shown})` : ''}`);
    }
    const text = await res.body.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new CliError(`the control plane at ${api} answered ${res.statusCode} with something other than JSON; check --api (it must be the RLMesh API, e.g. https://api.rlmesh.dev)`);
    }
    if (res.statusCode !== 200) {
      const e = errorResponse.safeParse(body);
      if (e.success) throw new CliError(`join refused (${e.data.code}): ${e.data.message}`);
      throw new CliError(`join failed with HTTP ${res.statusCode} from ${api}; check --api and retry`);
    }
    const ok = joinResponse.safeParse(body);
    if (!ok.success) throw new CliError(`the control plane at ${api} answered the join without the expected fields (clusterId, control, pull); check --api`);
    return ok.data;
  } finally {
    await dispatcher.close();
  }
}

function connectionProblem(api: string, err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e.code ?? e.cause?.code ?? '';
  const detail = e.cause?.message ?? e.message ?? String(err);
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code)) {
    return `the certificate of ${api} is not trusted (${code}: ${detail}); for a private control plane pass --ca-file <ca.crt> with the CA that signed it`;
  }
  return `cannot reach the control plane at ${api} (${code || 'error'}: ${detail}); check --api and that outbound HTTPS to it is allowed`;
}
