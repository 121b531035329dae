import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { errorFields, errorMessage, statusCode } from './error-fields.ts';

const refusal = (code: number, message: string) => new ApiException(code, 'refused', JSON.stringify({ kind: 'Status', message }), {});

describe('errorMessage', () => {
  it('reads the code and the Status message of a Kubernetes refusal', () => {
    const e = refusal(404, 'pods "x" not found');
    expect(statusCode(e)).toBe(404);
    expect(errorMessage(e)).toBe('pods "x" not found');
    expect(errorMessage(new ApiException(500, 'x', 'not json', {}))).toBe('not json');
    expect(errorMessage(new ApiException(503, 'x', '', {}))).toBe('HTTP 503');
    expect(errorMessage(new ApiException(500, 'x', { message: 'etcdserver: request timed out' }, {}))).toBe('etcdserver: request timed out');
    expect(errorFields(refusal(403, 'secrets is forbidden'))).toEqual({ err: 'secrets is forbidden', status: 403 });
  });

  it('adds the cause undici/fetch keeps of a failed connection', () => {
    const refused = new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' }) });
    expect(errorMessage(refused)).toBe('fetch failed (ECONNREFUSED)');
    expect(errorFields(refused)).toEqual({ err: 'fetch failed (ECONNREFUSED)', code: 'ECONNREFUSED' });
    expect(errorMessage(new TypeError('fetch failed', { cause: new Error('unable to verify the first certificate') }))).toBe('fetch failed (unable to verify the first certificate)');
    // a cause the message already names is not repeated
    expect(errorMessage(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { cause: { code: 'ECONNREFUSED' } }))).toBe('connect ECONNREFUSED 10.0.0.1:443');
  });

  it('names the S3 error and its HTTP status', () => {
    const s3 = Object.assign(new Error('The request signature we calculated does not match'), { name: 'SignatureDoesNotMatch', $metadata: { httpStatusCode: 403 } });
    expect(errorMessage(s3)).toBe('SignatureDoesNotMatch (HTTP 403): The request signature we calculated does not match');
  });

  it('reads plain Errors and non-Error throws', () => {
    expect(errorMessage(new Error('socket hang up'))).toBe('socket hang up');
    expect(errorMessage(new RangeError(''))).toBe('RangeError');
    expect(errorMessage('plain string')).toBe('plain string');
    expect(errorMessage(undefined)).toBe('undefined');
    expect(errorMessage(42)).toBe('42');
    expect(errorMessage({ reason: 'odd' })).toBe('{"reason":"odd"}');
    expect(errorFields(new Error('x'))).toEqual({ err: 'x' });
  });

  it('never repeats a presigned URL query, user info in a URL, or a bearer token', () => {
    const presigned = 'https://bucket.s3.amazonaws.com/a.bin?X-Amz-Signature=deadbeef&X-Amz-Credential=AKIAEXAMPLE';
    const text = errorMessage(new Error(`GET ${presigned} failed; GET https://user:hunter2@example.com/x failed; Authorization: Bearer rlm_cc_secretvalue`));
    expect(text).toBe('GET https://bucket.s3.amazonaws.com/a.bin?… failed; GET https://example.com/x failed; Authorization: Bearer …');
    for (const secret of ['deadbeef', 'AKIAEXAMPLE', 'hunter2', 'rlm_cc_secretvalue']) expect(text).not.toContain(secret);
  });
});
