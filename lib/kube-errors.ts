// What the API server said when it refused a request, as predicates on its
// HTTP code; the message itself comes from errorMessage (lib/error-fields.ts).
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { errorMessage, statusCode } from './error-fields.ts';

export const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export const isForbidden = (err: unknown): boolean => statusCode(err) === 403;
export const isNotFound = (err: unknown): boolean => statusCode(err) === 404;
export const isConflict = (err: unknown): boolean => statusCode(err) === 409;

/**
 * A 403 from RBAC about the caller's own rights ('User "system:serviceaccount:…"
 * cannot create resource "pods"…'), as opposed to an admission refusal of the
 * object (quota, PodSecurity). The authorizer is briefly empty after an
 * apiserver restart, so this one is worth retrying.
 */
export const isRbacDenial = (err: unknown): boolean => isForbidden(err) && /cannot \w+ resource/.test(errorMessage(err));
