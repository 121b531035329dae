// The corporate proxy the CLI's own connections to the control plane go
// through (the join, preflight's outbound and clock checks): --proxy, else
// controlPlane.proxy of the -f values, else HTTPS_PROXY/NO_PROXY as curl and
// undici read them. The tunnels are lib/outbound-proxy.ts's, the agent's own.
// Credentials never come from the command line: --proxy-credentials-file
// (user:password, the CLI's stand-in for the chart's Secret), or the userinfo
// of the proxy variable, which lives in the environment.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { errorMessage } from '../lib/error-fields.ts';
import { OutboundProxy, ProxyTunnelError, type ProxyCredentialSource, type ProxyHints } from '../lib/outbound-proxy.ts';
import { parseProxyUrl } from '../lib/outbound-proxy-values.ts';
import { UsageError } from './usage-error.ts';


/** The options of every command whose connections may need a proxy. */
export const PROXY_OPTIONS = {
  proxy: { type: 'string' },
  'proxy-credentials-file': { type: 'string' },
} as const;

/** The help lines of PROXY_OPTIONS, their descriptions starting at column `width`. */
export function proxyHelp(width: number): string {
  const row = (flag: string, lines: string[]): string => {
    const first = `  ${flag}`.padEnd(width);
    const pad = ' '.repeat(width);
    return first.length > width ? [`  ${flag}`, ...lines.map((l) => pad + l)].join('\n') : [first + lines[0], ...lines.slice(1).map((l) => pad + l)].join('\n');
  };
  return [
    row('--proxy <url>', [
      'corporate proxy for the connections to the control plane: http://host:port',
      'or https://host:port (default: controlPlane.proxy.url of -f, else $HTTPS_PROXY',
      'or $https_proxy, minus $NO_PROXY); never with user:password@ in it',
    ]),
    row('--proxy-credentials-file <file>', [
      "the proxy's username and password, one line user:password (mode 0600);",
      'or the userinfo of $HTTPS_PROXY (never on the command line)',
    ]),
  ].join('\n');
}

export type ProxyInput = {
  /** --proxy */
  flag?: string | undefined;
  /** --proxy-credentials-file */
  credentialsFile?: string | undefined;
  /** controlPlane.proxy of the values files, and the files' names for messages */
  values?: { url: string; noProxy: string[]; files: string[] } | undefined;
  env: NodeJS.ProcessEnv;
};

/** The proxy the CLI's connections go through, or undefined for direct connections. */
export function cliProxy(input: ProxyInput): OutboundProxy | undefined {
  const chosen = chooseProxy(input);
  if (!chosen) {
    if (input.credentialsFile !== undefined) throw new UsageError('--proxy-credentials-file was given but no proxy: name it with --proxy, controlPlane.proxy.url in a -f values file, or HTTPS_PROXY');
    return undefined;
  }
  const credentials = input.credentialsFile !== undefined ? fileCredentials(input.credentialsFile) : chosen.userinfo;
  return new OutboundProxy({ url: chosen.url, noProxy: chosen.noProxy }, { hints: chosen.hints, ...(credentials ? { credentials } : {}) });
}

/** cliProxy() from a command's parsed options, its -f values and the environment. */
export function proxyOfCommand(opts: { proxy?: string | undefined; 'proxy-credentials-file'?: string | undefined }, values: { controlPlane: { proxy: { url: string; noProxy: string[] } } }, files: string[], env: NodeJS.ProcessEnv): OutboundProxy | undefined {
  return cliProxy({ flag: opts.proxy, credentialsFile: opts['proxy-credentials-file'], values: { ...values.controlPlane.proxy, files }, env });
}

type Chosen = { url: string; noProxy: string[]; hints: ProxyHints; userinfo?: ProxyCredentialSource | undefined };

const FILE_HINT = 'put its username and password in a file as one line user:password (mode 0600) and pass --proxy-credentials-file <file>';

function chooseProxy({ flag, values, env }: ProxyInput): Chosen | undefined {
  if (flag !== undefined && flag !== '') {
    checkUrl(flag, '--proxy', 'pass --proxy without them and put them in --proxy-credentials-file <file> (one line user:password), or in the userinfo of HTTPS_PROXY');
    return { url: flag, noProxy: [], hints: hints('--proxy', `${FILE_HINT}`, 'leave out --proxy if it is reached directly') };
  }
  if (values && values.url !== '') {
    const where = `controlPlane.proxy.url of ${values.files.join(', ')}`;
    checkUrl(values.url, where, 'the chart takes them from the Secret controlPlane.proxy.existingSecret, and this command from --proxy-credentials-file <file> (one line user:password)');
    return {
      url: values.url,
      noProxy: values.noProxy,
      hints: hints(where, `${FILE_HINT} (this command does not read the Secret controlPlane.proxy.existingSecret)`, 'list the host in controlPlane.proxy.noProxy if it is reached directly'),
    };
  }
  // the control plane speaks only https: the https variable, else the http one, as undici's EnvHttpProxyAgent reads them
  const name = ['https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY'].find((n) => env[n]);
  if (!name) return undefined;
  const raw = env[name]!;
  const u = parseProxyUrl(raw);
  if (!u.matched) throw new UsageError(`${name} ${JSON.stringify(raw)} is not a proxy URL: set it to http://host:port (or http://user:password@host:port), or unset it`);
  checkUrl(raw, name);
  const url = new URL(raw);
  const userinfo = url.username || url.password ? envCredentials(name, decoded(url.username, name), decoded(url.password, name)) : undefined;
  url.username = '';
  url.password = '';
  const noProxyName = ['no_proxy', 'NO_PROXY'].find((n) => env[n] !== undefined);
  return {
    url: url.origin,
    noProxy: noProxyName ? noProxyEntries(env[noProxyName]!) : [],
    hints: hints(name, `${FILE_HINT}, or put them in ${name} as http://user:password@host:port`, `list the host in ${noProxyName ?? 'NO_PROXY'} if it is reached directly`),
    userinfo,
  };
}

function hints(where: string, missingCredentials: string, direct: string): ProxyHints {
  return {
    url: where,
    reach: `check ${where} and that this machine reaches the proxy`,
    wrongCredentials: 'put the ones it accepts there',
    missingCredentials,
    direct,
  };
}

/** The refusals of lib/outbound-proxy-values.ts's reading of a proxy URL, for one the CLI was given. */
function checkUrl(url: string, where: string, credentialsFix?: string): void {
  const u = parseProxyUrl(url);
  const shape = 'http://host:port or https://host:port';
  if (!u.matched || (u.scheme !== 'http' && u.scheme !== 'https')) throw new UsageError(`${where} ${JSON.stringify(url)} is not an http:// or https:// proxy URL: give it as ${shape}`);
  if (u.userinfo && credentialsFix) throw new UsageError(`${where} carries a username or password, which would show in your shell history and the process list: ${credentialsFix}`);
  if (u.hostKind === 'invalid' || u.port === 0) throw new UsageError(`${where} ${JSON.stringify(safe(url))} has no valid host or port: give it as ${shape}`);
  if (u.rest !== '' && u.rest !== '/') throw new UsageError(`${where} ${JSON.stringify(safe(url))} has a path, query or fragment, which a proxy does not take: give it as ${shape}`);
}

/** A URL for messages: its userinfo hidden. */
function safe(url: string): string {
  return url.replace(/\/\/[^@/?#]*@/, '//***@');
}

/** NO_PROXY as curl writes it: comma- or space-separated, a host's :port ignored (the control plane is on one port). */
function noProxyEntries(value: string): string[] {
  return value
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((e) => (isIP(e.replace(/^\[|\]$/g, '')) || !/:\d+$/.test(e) ? e : e.replace(/:\d+$/, '').replace(/^\[|\]$/g, '')));
}

function fileCredentials(file: string): ProxyCredentialSource {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --proxy-credentials-file ${file}: ${errorMessage(err)}`);
  }
  const line = text.replace(/\r?\n$/, '');
  const colon = line.indexOf(':');
  if (colon <= 0 || line.includes('\n')) throw new UsageError(`--proxy-credentials-file ${file} is not one line user:password: write the proxy's username, a colon and its password, nothing else`);
  const credentials = { username: line.slice(0, colon), password: line.slice(colon + 1) };
  return { shown: `the file ${file} (--proxy-credentials-file)`, read: () => credentials };
}

function envCredentials(name: string, username: string, password: string): ProxyCredentialSource {
  return {
    shown: `the userinfo of ${name}`,
    read: () => {
      if (!username) throw new ProxyTunnelError(`${name} has a password but no username: set it as http://user:password@host:port`);
      return { username, password };
    },
  };
}

function decoded(part: string, name: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new UsageError(`the userinfo of ${name} has a malformed %-escape: write a % in the username or password as %25`);
  }
}
