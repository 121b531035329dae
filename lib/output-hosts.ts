// The platform's output hosts: where evaluations upload their results, besides the
// API host. The platform names them (GET /v1/info at start, OutputHosts on the
// session when they change); the agent writes them to ConfigMap rlmesh-output-hosts,
// one per line, and the egress proxy allows them beside the chart's own list.
//
// The platform is not trusted with the allow-list's shape: it may name exact public
// hostnames only, at most MAX_OUTPUT_HOSTS of them. No wildcard, no IP literal, no
// single-label or cluster-internal name; and what it names is still resolved and
// every address checked by the proxy, so a name that resolves to a private,
// link-local or cluster address stays refused.
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { isHostname, RAW_HOST } from './hostname.ts';

export const MAX_OUTPUT_HOSTS = 64;
/** suffixes only a cluster or a LAN resolves: never an output host of a hosted platform */
const INTERNAL_SUFFIXES = ['.cluster.local', '.svc', '.local', '.localhost', '.internal', '.home.arpa'];

export type OutputHosts = { hosts: string[]; refused: { host: string; why: string }[] };

/** The usable hosts of a list the platform sent, normalised, each once, sorted; and why each other entry is refused. */
export function checkOutputHosts(list: readonly string[]): OutputHosts {
  const hosts = new Set<string>();
  const refused: OutputHosts['refused'] = [];
  for (const raw of list) {
    const shown = raw.slice(0, 80);
    const name = domainToASCII(raw.trim().toLowerCase().replace(/\.$/, ''));
    const why =
      raw.includes('*') ? 'a wildcard; the platform may name exact hosts only'
      : isIP(raw.replace(/^\[(.*)\]$/, '$1')) !== 0 ? 'an IP address; the platform may name hosts only'
      : !RAW_HOST.test(raw.trim()) || !name || !isHostname(name) ? 'not a hostname'
      : !name.includes('.') ? 'a single-label name'
      : INTERNAL_SUFFIXES.some((s) => `.${name}`.endsWith(s)) ? 'a cluster-internal or LAN name'
      : hosts.size >= MAX_OUTPUT_HOSTS && !hosts.has(name) ? `more than ${MAX_OUTPUT_HOSTS} output hosts`
      : undefined;
    if (why) refused.push({ host: shown, why });
    else hosts.add(name);
  }
  return { hosts: [...hosts].sort(), refused };
}

/** The ConfigMap's text: one host per line. */
export const outputHostsText = (hosts: readonly string[]): string => hosts.join('\n');

/** The hosts in the ConfigMap's text (the proxy checks them again: the ConfigMap is only as trusted as who may write it). */
export const parseOutputHostsText = (text: string): OutputHosts => checkOutputHosts(text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')));
