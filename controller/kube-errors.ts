// What the API server said when it refused a request: its HTTP code and the
// Status message, which is what users see in the evaluation's conditions.
import { ApiException, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

export const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export function statusCode(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  const e = err as { code?: unknown; statusCode?: unknown };
  if (typeof e?.statusCode === 'number') return e.statusCode;
  if (typeof e?.code === 'number') return e.code;
  return undefined;
}

/** The Status message of an API error ("pods \"x\" is forbidden: exceeded quota: ..."), else the error's own message. */
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
    if (typeof msg === 'string' && msg) return msg;
    return `HTTP ${err.code}`;
  }
  return (err as Error)?.message ?? String(err);
}

export const isNotFound = (err: unknown): boolean => statusCode(err) === 404;
export const isConflict = (err: unknown): boolean => statusCode(err) === 409;
