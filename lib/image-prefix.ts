// Repository prefixes: where evaluation images may come from (evaluations.extraRegistries)
// and which images an operator's pull Secret is for (evaluations.imagePullSecrets[].registries).
// A prefix is a registry host (with its port, if any), a slash, and zero or more repository
// path components each followed by a slash: `registry.corp.example/evals/` covers
// registry.corp.example/evals/gym but neither registry.corp.example/evals-evil/gym nor the
// repository registry.corp.example/evals itself; `registry.corp.example/` is the whole registry.
// The chart's admission policy (templates/admission-policies.yaml) applies the same rule in CEL,
// and test/chart/rbac.test.ts runs one table of cases through both.
import { HOST_LABELS } from './outbound-proxy-values.ts';

/** distribution's path component: lower-case letters and digits joined by ., _, __ or dashes */
const PATH_COMPONENT = '[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*';
/** A repository prefix as values write it (RE2, for the chart's JSON Schema too). */
export const REPOSITORY_PREFIX = new RegExp(`^${HOST_LABELS}(:[0-9]{1,5})?/(${PATH_COMPONENT}/)*$`);
/** A bare registry host (host or host:port), which extraRegistries took before it took prefixes. */
export const BARE_REGISTRY_HOST = new RegExp(`^${HOST_LABELS}(:[0-9]{1,5})?$`);

/** A registry host as compared: DNS is case-insensitive and index.docker.io is Docker Hub's old name. The port stays. */
export function registryKey(host: string): string {
  const h = host.toLowerCase();
  return h === 'index.docker.io' ? 'docker.io' : h;
}

/**
 * A prefix as compared: its host by registryKey. An entry without a slash is a bare host, the
 * whole registry: only controlPlane.registryHost is written so (the platform's own registry).
 */
export function normalPrefix(entry: string): string {
  const slash = entry.indexOf('/');
  if (slash < 0) return `${registryKey(entry)}/`;
  return `${registryKey(entry.slice(0, slash))}${entry.slice(slash)}`;
}

/** Whether the repository `path` in registry `domain` (as a parsed reference has them) lies under `prefix`. */
export function underPrefix(domain: string, path: string, prefix: string): boolean {
  return `${registryKey(domain)}/${path}`.startsWith(normalPrefix(prefix));
}

/** The first of `prefixes` the repository lies under, if any. */
export function matchingPrefix(domain: string, path: string, prefixes: readonly string[]): string | undefined {
  return prefixes.find((p) => underPrefix(domain, path, p));
}

/**
 * The registry and repository of a fully qualified reference (`host/path[:tag][@digest]`, as the
 * agent writes spec.image), or undefined for one that is not. The controller reads spec.image so
 * only to choose pull Secrets: reading it wrongly can only leave one off, and admission still checks.
 */
export function qualifiedRepository(image: string): { domain: string; path: string } | undefined {
  const name = image.split('@')[0]!;
  const slash = name.indexOf('/');
  if (slash < 0) return undefined;
  const domain = name.slice(0, slash);
  const rest = name.slice(slash + 1);
  const colon = rest.lastIndexOf(':');
  const path = colon < 0 ? rest : rest.slice(0, colon);
  if (path === '' || path.includes(':')) return undefined;
  return { domain, path };
}
