// What the API server said when it refused a request: its HTTP code and its
// Status message (the cluster's own words, which users see in logs, events
// and evaluation conditions).
import { ApiException, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

export const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export function statusCode(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  const e = err as { code?: unknown; statusCode?: unknown } | undefined;
  if (typeof e?.statusCode === 'number') return e.statusCode;
  if (typeof e?.code === 'number') return e.code;
  return undefined;
}

/** The Status message ("pods \"x\" is forbidden: exceeded quota: ..."), else the error's own message. */
export function apiMessage(err: unknown): string {
  if (err instanceof ApiException) {
    let body: unknown = err.body;
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body);
      } catch {
        return (body as string) || `HTTP ${err.code}`;
      }
    }
    const msg = (body as { message?: unknown } | undefined)?.message;
    return typeof msg === 'string' && msg ? msg : `HTTP ${err.code}`;
  }
  return (err as Error)?.message ?? String(err);
}

export const isForbidden = (err: unknown): boolean => statusCode(err) === 403;
export const isNotFound = (err: unknown): boolean => statusCode(err) === 404;
export const isConflict = (err: unknown): boolean => statusCode(err) === 409;

/**
 * A 403 from RBAC about the caller's own rights ('User "system:serviceaccount:…"
 * cannot create resource "pods"…'), as opposed to an admission refusal of the
 * object (quota, PodSecurity). The authorizer is briefly empty after an
 * apiserver restart, so this one is worth retrying.
 */
export const isRbacDenial = (err: unknown): boolean => isForbidden(err) && /cannot \w+ resource/.test(apiMessage(err));
