import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { isConflict, isNotFound, isRbacDenial } from './kube-errors.ts';

const refusal = (code: number, message: string) => new ApiException(code, 'refused', JSON.stringify({ kind: 'Status', message }), {});

describe('kube errors', () => {
  it('tells a refusal by its code', () => {
    expect(isNotFound(refusal(404, 'pods "x" not found'))).toBe(true);
    expect(isConflict(refusal(409, 'already exists'))).toBe(true);
    expect(isNotFound(refusal(409, 'already exists'))).toBe(false);
    expect(isNotFound(new Error('socket hang up'))).toBe(false);
  });

  it('tells an RBAC denial of the caller from an admission refusal of the object', () => {
    expect(isRbacDenial(refusal(403, 'pods is forbidden: User "system:serviceaccount:rlmesh-system:rlmesh-cluster-controller" cannot create resource "pods" in API group "" in the namespace "rlmesh-runs"'))).toBe(true);
    expect(isRbacDenial(refusal(403, 'pods "rle-x" is forbidden: exceeded quota: runs, requested: requests.cpu=4'))).toBe(false);
    expect(isRbacDenial(refusal(403, 'pods "rle-x" is forbidden: violates PodSecurity "restricted:latest"'))).toBe(false);
    expect(isRbacDenial(refusal(422, 'cannot create resource'))).toBe(false);
  });
});
