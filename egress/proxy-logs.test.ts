// No credential a client sends reaches the proxy's log or comes back in its
// answers: userinfo, query strings, fragments, Proxy-Authorization and
// Authorization, on requests it refuses and on those it forwards. The log
// still names the host and the rule.
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../test/support/until.ts';
import { rawRequest, startLoopbackProxy, type LoopbackProxy } from '../test/egress/loopback-proxy.ts';

let proxy: LoopbackProxy;
let upstream: http.Server;
let port: number;

beforeAll(async () => {
  upstream = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('object body\n'));
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  port = (upstream.address() as AddressInfo).port;
  proxy = await startLoopbackProxy(['--allow', 'files.test', '--ports', `443,${port}`]);
});

afterAll(async () => {
  await proxy?.close();
  upstream?.close();
});

const AUTH = 'Proxy-Authorization: Basic c2VjcmV0UHJveHlBdXRo\r\nAuthorization: Bearer secretAuthorization\r\n';
const SECRETS = ['secretUserinfo', 'c2VjcmV0UHJveHlBdXRo', 'secretAuthorization', 'secretSig', 'secretToken', 'secretFragment'];

const cases = () => [
  { what: 'GET with user:pass@', request: `GET http://user:secretUserinfo@files.test:${port}/data HTTP/1.1\r\nHost: files.test\r\n${AUTH}\r\n`, status: 403, rule: 'userinfo', host: 'files.test' },
  { what: 'CONNECT user:pass@', request: `CONNECT user:secretUserinfo@files.test:443 HTTP/1.1\r\nHost: files.test:443\r\n${AUTH}\r\n`, status: 403, rule: 'userinfo', host: 'files.test' },
  { what: 'an allowed presigned URL', request: `GET http://files.test:${port}/object?X-Amz-Credential=AKIA&X-Amz-Signature=secretSig HTTP/1.1\r\nHost: files.test\r\n${AUTH}\r\n`, status: 200, rule: 'public', host: 'files.test' },
  { what: 'a refused presigned URL', request: `GET http://other.test/object?X-Amz-Signature=secretSig HTTP/1.1\r\nHost: other.test\r\n${AUTH}\r\n`, status: 403, rule: 'not-allowed', host: 'other.test' },
  { what: 'a presigned URL with an invalid host', request: `GET http://bad_name.test/object?X-Amz-Signature=secretSig HTTP/1.1\r\nHost: bad_name.test\r\n${AUTH}\r\n`, status: 403, rule: 'invalid-name', host: 'bad_name.test' },
  { what: 'a fragment', request: `GET http://bad_name.test/object#secretFragment HTTP/1.1\r\nHost: bad_name.test\r\n\r\n`, status: 403, rule: 'invalid-name', host: 'bad_name.test' },
  { what: 'an upgrade with a token', request: `GET http://files.test:${port}/ws?token=secretToken HTTP/1.1\r\nHost: files.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${AUTH}\r\n`, status: 403, rule: 'upgrade', host: 'files.test' },
  { what: 'CONNECT with a query', request: `CONNECT files.test:443?token=secretToken HTTP/1.1\r\nHost: files.test:443\r\n${AUTH}\r\n`, status: 403, rule: 'invalid-port', host: 'files.test' },
  { what: 'another scheme with user:pass@ and a query', request: `GET ftp://user:secretUserinfo@files.test/x?sig=secretSig HTTP/1.1\r\nHost: files.test\r\n${AUTH}\r\n`, status: 403, rule: 'unsupported-request', host: 'files.test' },
];

describe('secrets in requests', () => {
  it('never reach a log line or an answer, while the log names the host and the rule', async () => {
    const leaks: string[] = [];
    for (const c of cases()) {
      const answer = await rawRequest(proxy.port, c.request);
      expect(answer.status, c.what).toBe(c.status);
      for (const secret of SECRETS) if (answer.text.includes(secret)) leaks.push(`the answer to ${c.what} carries ${secret}: ${answer.text}`);
    }
    // the allowed request is logged when its connection closes
    await until('the allowed request\'s log line', () => proxy.logText().includes('"rule":"public"'), { timeoutMs: 5_000, intervalMs: 20 });
    const text = proxy.logText();
    for (const line of text.trim().split('\n')) {
      for (const secret of SECRETS) if (line.includes(secret)) leaks.push(`a log line carries ${secret}: ${line}`);
    }
    expect(leaks).toEqual([]);
    const lines = text.trim().split('\n').map((l) => JSON.parse(l) as { host?: string; rule?: string; msg: string });
    for (const c of cases()) {
      expect(lines.some((l) => l.rule === c.rule && l.host?.includes(c.host)), `a log line for ${c.what} names ${c.host} and ${c.rule}:\n${text}`).toBe(true);
    }
  });
});
