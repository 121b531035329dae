import { describe, expect, it } from 'vitest';
import { framingProblem } from './proxy.ts';

const req = (method: string, headers: Record<string, string>, httpVersion = '1.1') => ({ method, headers, httpVersion });

describe('plain-HTTP request framing', () => {
  it.each([
    ['GET without a body', req('GET', {})],
    ['GET with Content-Length', req('GET', { 'content-length': '5' })],
    ['POST chunked', req('POST', { 'transfer-encoding': 'chunked' })],
    ['PUT chunked, any case', req('PUT', { 'transfer-encoding': ' Chunked ' })],
    ['PATCH with Content-Length', req('PATCH', { 'content-length': '5', connection: 'keep-alive' })],
    ['Connection naming ordinary headers', req('GET', { connection: 'keep-alive, x-trace, Upgrade' })],
  ])('lets %s through', (_what, r) => {
    expect(framingProblem(r)).toBeUndefined();
  });

  it.each([
    ['GET chunked', req('GET', { 'transfer-encoding': 'chunked' }), 'a GET request with a chunked body is refused'],
    ['HEAD chunked', req('HEAD', { 'transfer-encoding': 'chunked' }), 'a HEAD request with a chunked body'],
    ['DELETE chunked', req('DELETE', { 'transfer-encoding': 'chunked' }), 'a DELETE request with a chunked body'],
    ['OPTIONS chunked', req('OPTIONS', { 'transfer-encoding': 'chunked' }), 'a OPTIONS request with a chunked body'],
    ['TRACE chunked', req('TRACE', { 'transfer-encoding': 'chunked' }), 'a TRACE request with a chunked body'],
    ['Connection: content-length', req('GET', { 'content-length': '5', connection: 'content-length' }), 'its Connection header names content-length'],
    ['Connection: Content-Length among others', req('POST', { 'content-length': '5', connection: 'keep-alive ,Content-Length' }), 'names content-length'],
    ['Connection: transfer-encoding', req('POST', { 'transfer-encoding': 'chunked', connection: 'transfer-encoding' }), 'names transfer-encoding'],
    ['both named', req('POST', { connection: 'content-length, transfer-encoding' }), 'names content-length and transfer-encoding'],
    ['gzip, chunked', req('POST', { 'transfer-encoding': 'gzip, chunked' }), "Transfer-Encoding 'gzip, chunked' is not plain chunked"],
    ['chunked, chunked', req('POST', { 'transfer-encoding': 'chunked, chunked' }), 'is not plain chunked'],
    ['HTTP/1.0 chunked', req('POST', { 'transfer-encoding': 'chunked' }, '1.0'), 'an HTTP/1.0 request cannot carry Transfer-Encoding'],
  ])('refuses %s, saying why', (_what, r, why) => {
    expect(framingProblem(r)).toContain(why);
  });
});
