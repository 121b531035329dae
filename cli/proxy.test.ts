// The CLI behind a corporate proxy: rlmesh clusters join as a child process,
// through Debian's Squid (basic auth) to the reference control plane, both on
// loopback. The control plane's name is known only to Squid's hosts file, so a
// join to it succeeds only through the proxy; Squid's access log shows each
// tunnel. Then what --proxy, -f values and the environment each choose, and
// what preflight's own connections (clock-skew, outbound-443) do with it.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measureSkew } from '../lib/preflight/checks/clock-skew.ts';
import { probeTls } from '../lib/preflight/checks/outbound.ts';
import { api } from '../test/support/api.ts';
import { runChild, type ChildRun } from '../test/support/child.ts';
import { startTestControlPlane, type TestControlPlane } from '../test/support/control-plane.ts';
import { closedPort, freePort } from '../test/support/free-port.ts';
import { startSquid, type Squid } from '../test/support/squid.ts';
import { tempDir } from '../test/support/temp.ts';
import { until } from '../test/support/until.ts';
import { cliProxy } from './proxy.ts';

const MAIN = join(import.meta.dirname, 'main.ts');
const CP_HOST = 'api.cli-proxy.test';

let cp: TestControlPlane;
let squid: Squid;
let dir: string;
let credentialsFile: string;
let viaName: string;

beforeAll(async () => {
  dir = tempDir('rlmesh-cli-proxy-');
  cp = await startTestControlPlane({ dir, tlsHosts: [CP_HOST] });
  squid = await startSquid({ listen: { host: '127.0.0.1', port: await freePort() }, hosts: { [CP_HOST]: '127.0.0.1' } });
  credentialsFile = join(dir, 'proxy-credentials');
  writeFileSync(credentialsFile, `${squid.username}:${squid.password}\n`, { mode: 0o600 });
  viaName = `https://${CP_HOST}:${cp.port}`;
}, 60_000);

afterAll(async () => {
  await squid?.stop();
  await cp?.close();
});

type Run = ChildRun;

const PROXY_VARS = ['https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY', 'no_proxy', 'NO_PROXY', 'RLMESH_API'];

/** rlmesh as a child process, with only the proxy variables given here. */
function rlmesh(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !PROXY_VARS.includes(k)));
  return runChild(process.execPath, [MAIN, ...args], { env: { ...base, ...env }, timeoutMs: 30_000 });
}

const newToken = async (): Promise<string> => String((await api(cp, 'POST', '/v1/clusters', { name: 'behind-proxy' })).body.joinToken);
let outs = 0;
const joinArgs = (token: string, apiUrl: string, extra: string[] = []) => ['clusters', 'join', '--token', token, '--api', apiUrl, '--ca-file', cp.caFile, '--format', 'k8s-secret', '--out', join(dir, `secrets-${++outs}.yaml`), ...extra];

/** Waits for Squid's line of the tunnel to host:port (it logs a tunnel once it closed), authenticated as its user. */
const tunnelLogged = (target: string, from: number) =>
  until(`CONNECT ${target} in Squid's access log`, () => squid.accessLog().slice(from).find((l) => l.includes(`CONNECT ${target}`) && l.includes(squid.username) && l.includes('TCP_TUNNEL/200')), { timeoutMs: 10_000, intervalMs: 50 });

function valuesFile(name: string, proxy: Record<string, unknown>): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify({ controlPlane: { proxy } }));
  return file;
}

describe('rlmesh clusters join behind a proxy', () => {
  it('--proxy with --proxy-credentials-file: the join goes through a CONNECT tunnel Squid logs', async () => {
    const before = squid.accessLog().length;
    const r = await rlmesh(joinArgs(await newToken(), viaName, ['--proxy', squid.url, '--proxy-credentials-file', credentialsFile]));
    expect(r.stderr).toContain('joined');
    expect(r.status).toBe(0);
    await tunnelLogged(`${CP_HOST}:${cp.port}`, before);
  });

  it('https_proxy with the credentials in its userinfo, and HTTPS_PROXY with them in the file', async () => {
    const userinfo = `http://${encodeURIComponent(squid.username)}:${encodeURIComponent(squid.password)}@${squid.url.replace(/^http:\/\//, '')}`;
    let before = squid.accessLog().length;
    const lower = await rlmesh(joinArgs(await newToken(), viaName), { https_proxy: userinfo });
    expect(lower.status, lower.stderr).toBe(0);
    await tunnelLogged(`${CP_HOST}:${cp.port}`, before);

    before = squid.accessLog().length;
    const upper = await rlmesh(joinArgs(await newToken(), viaName, ['--proxy-credentials-file', credentialsFile]), { HTTPS_PROXY: squid.url });
    expect(upper.status, upper.stderr).toBe(0);
    await tunnelLogged(`${CP_HOST}:${cp.port}`, before);
  });

  it('NO_PROXY: a listed host is reached directly, Squid sees no tunnel to it', async () => {
    const env = { HTTPS_PROXY: squid.url, NO_PROXY: 'localhost, 127.0.0.1' };
    const before = squid.accessLog().length;
    const direct = await rlmesh(joinArgs(await newToken(), cp.url, ['--proxy-credentials-file', credentialsFile]), env);
    expect(direct.status, direct.stderr).toBe(0);
    // a join that does go through it afterwards: once its line is there, the direct one would be too
    const proxied = await rlmesh(joinArgs(await newToken(), viaName, ['--proxy-credentials-file', credentialsFile]), env);
    expect(proxied.status, proxied.stderr).toBe(0);
    await tunnelLogged(`${CP_HOST}:${cp.port}`, before);
    expect(squid.accessLog().slice(before).filter((l) => l.includes(`127.0.0.1:${cp.port}`))).toEqual([]);
  });

  it('a proxy that wants credentials it was not given: says so and how to give them, and the token still works', async () => {
    const token = await newToken();
    const r = await rlmesh(joinArgs(token, viaName, ['--proxy', squid.url]));
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`the corporate proxy ${squid.url} answered 407 Proxy Authentication Required to CONNECT ${CP_HOST}:${cp.port}: it wants credentials; put its username and password in a file as one line user:password (mode 0600) and pass --proxy-credentials-file <file>`);
    expect(r.stderr).toContain('the join token was not used');
    const again = await rlmesh(joinArgs(token, viaName, ['--proxy', squid.url, '--proxy-credentials-file', credentialsFile]));
    expect(again.status, again.stderr).toBe(0);
  });

  it('a wrong password in the file: names the file', async () => {
    const wrong = join(dir, 'wrong-credentials');
    writeFileSync(wrong, `${squid.username}:not-the-password\n`, { mode: 0o600 });
    const r = await rlmesh(joinArgs(await newToken(), viaName, ['--proxy', squid.url, '--proxy-credentials-file', wrong]));
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`answered 407 Proxy Authentication Required to CONNECT ${CP_HOST}:${cp.port}: it does not accept the username and password in the file ${wrong} (--proxy-credentials-file); put the ones it accepts there`);
  });

  it('credentials in --proxy are refused before anything is sent, without echoing the password', async () => {
    const before = squid.accessLog().length;
    const r = await rlmesh(joinArgs(await newToken(), viaName, ['--proxy', `http://${squid.username}:secret-on-the-command-line@${squid.url.slice('http://'.length)}`]));
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--proxy carries a username or password, which would show in your shell history and the process list: pass --proxy without them and put them in --proxy-credentials-file <file>/);
    expect(r.stderr).not.toContain('secret-on-the-command-line');
    const token = await newToken();
    const proxied = await rlmesh(joinArgs(token, viaName, ['--proxy', squid.url, '--proxy-credentials-file', credentialsFile]));
    expect(proxied.status, proxied.stderr).toBe(0);
    await tunnelLogged(`${CP_HOST}:${cp.port}`, before);
    expect(squid.accessLog().slice(before)).toHaveLength(1);
  });

  it('-f values: controlPlane.proxy is used, --proxy wins over it and it wins over HTTPS_PROXY', async () => {
    const dead = `http://127.0.0.1:${await closedPort()}`;
    const toSquid = valuesFile('values-squid.yaml', { url: squid.url, addresses: ['127.0.0.1/32'] });
    const toDead = valuesFile('values-dead.yaml', { url: dead });
    const creds = ['--proxy-credentials-file', credentialsFile];

    let before = squid.accessLog().length;
    const fromValues = await rlmesh(joinArgs(await newToken(), viaName, ['-f', toSquid, ...creds]), { HTTPS_PROXY: dead });
    expect(fromValues.status, fromValues.stderr).toBe(0);
    await tunnelLogged(`${CP_HOST}:${cp.port}`, before);

    before = squid.accessLog().length;
    const flagWins = await rlmesh(joinArgs(await newToken(), viaName, ['-f', toDead, '--proxy', squid.url, ...creds]));
    expect(flagWins.status, flagWins.stderr).toBe(0);
    await tunnelLogged(`${CP_HOST}:${cp.port}`, before);

    const deadFromValues = await rlmesh(joinArgs(await newToken(), viaName, ['-f', toDead, ...creds]), { HTTPS_PROXY: squid.url });
    expect(deadFromValues.status).toBe(1);
    expect(deadFromValues.stderr).toMatch(new RegExp(`cannot reach the corporate proxy ${dead} for CONNECT .*ECONNREFUSED.*: check controlPlane\\.proxy\\.url of ${toDead.replace(/[.]/g, '\\.')} and that this machine reaches the proxy`));
  });

  it('values and usage refused with what to do', async () => {
    const withUserinfo = valuesFile('values-userinfo.yaml', { url: `http://u:p@127.0.0.1:${await closedPort()}` });
    const v = await rlmesh(joinArgs(await newToken(), viaName, ['-f', withUserinfo]));
    expect(v.status).toBe(2);
    expect(v.stderr).toContain(`controlPlane.proxy.url of ${withUserinfo} carries a username or password, which would show in your shell history and the process list: the chart takes them from the Secret controlPlane.proxy.existingSecret, and this command from --proxy-credentials-file <file>`);

    const noProxy = await rlmesh(joinArgs(await newToken(), viaName, ['--proxy-credentials-file', credentialsFile]));
    expect(noProxy.status).toBe(2);
    expect(noProxy.stderr).toContain('--proxy-credentials-file was given but no proxy: name it with --proxy, controlPlane.proxy.url in a -f values file, or HTTPS_PROXY');

    const socks = await rlmesh(joinArgs(await newToken(), viaName), { HTTPS_PROXY: 'socks5://127.0.0.1:1080' });
    expect(socks.status).toBe(2);
    expect(socks.stderr).toContain('HTTPS_PROXY "socks5://127.0.0.1:1080" is not an http:// or https:// proxy URL: give it as http://host:port or https://host:port');

    const notOneLine = join(dir, 'no-colon');
    writeFileSync(notOneLine, 'just-a-password\n');
    const bad = await rlmesh(joinArgs(await newToken(), viaName, ['--proxy', squid.url, '--proxy-credentials-file', notOneLine]));
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain(`--proxy-credentials-file ${notOneLine} is not one line user:password`);
  });
});

describe("preflight's connections from this machine, with the CLI's proxy", () => {
  it('rlmesh preflight takes --proxy and refuses credentials in it, before it reads the kubeconfig', async () => {
    const r = await rlmesh(['preflight', '--kubeconfig', join(dir, 'no-kubeconfig'), '--proxy', 'http://u:secret-here@127.0.0.1:3128']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('rlmesh preflight: --proxy carries a username or password, which would show in your shell history and the process list');
    expect(r.stderr).toContain('; run rlmesh preflight --help');
    expect(r.stderr).not.toContain('secret-here');
  });

  it('clock-skew and outbound-443 tunnel through the proxy from HTTPS_PROXY, and go direct for NO_PROXY', async () => {
    const env = { HTTPS_PROXY: `http://${squid.username}:${encodeURIComponent(squid.password)}@127.0.0.1:${new URL(squid.url).port}`, NO_PROXY: '127.0.0.1' };
    const proxy = cliProxy({ values: { url: '', noProxy: [], files: [] }, env })!;
    expect(proxy.shown).toBe(squid.url);
    const before = squid.accessLog().length;
    expect(Number.isFinite(await measureSkew(`${viaName}/v1/info`, cp.ca, Date.now, 5000, proxy))).toBe(true);
    expect(await probeTls(CP_HOST, cp.port, cp.ca, 5000, proxy)).toMatchObject({ ok: true, proxy: squid.url });
    expect(await probeTls('127.0.0.1', cp.port, cp.ca, 5000, proxy)).toMatchObject({ ok: true });
    await until('two tunnels logged', () => squid.accessLog().slice(before).filter((l) => l.includes(`CONNECT ${CP_HOST}:${cp.port}`)).length === 2 || undefined, { timeoutMs: 10_000, intervalMs: 50 });
    expect(squid.accessLog().slice(before).filter((l) => l.includes(`127.0.0.1:${cp.port}`))).toEqual([]);
  });
});

describe('which proxy, which hosts', () => {
  const none = { url: '', noProxy: [], files: [] };
  it('https_proxy before HTTPS_PROXY, and the http variables only without either', () => {
    expect(cliProxy({ values: none, env: { https_proxy: 'http://127.0.0.1:1', HTTPS_PROXY: 'http://127.0.0.1:2', HTTP_PROXY: 'http://127.0.0.1:3' } })!.shown).toBe('http://127.0.0.1:1');
    expect(cliProxy({ values: none, env: { HTTPS_PROXY: 'http://127.0.0.1:2', HTTP_PROXY: 'http://127.0.0.1:3' } })!.shown).toBe('http://127.0.0.1:2');
    expect(cliProxy({ values: none, env: { HTTP_PROXY: 'http://127.0.0.1:3' } })!.shown).toBe('http://127.0.0.1:3');
    expect(cliProxy({ values: none, env: {} })).toBeUndefined();
  });

  it('NO_PROXY entries with ports, spaces and brackets; no_proxy before NO_PROXY', () => {
    const p = cliProxy({ values: none, env: { HTTPS_PROXY: 'http://127.0.0.1:1', no_proxy: 'corp.example:8443 [fd00::1],10.0.0.0/8', NO_PROXY: '*' } })!;
    expect([p.appliesTo('api.corp.example'), p.appliesTo('fd00::1'), p.appliesTo('10.1.2.3'), p.appliesTo('api.rlmesh.dev')]).toEqual([false, false, false, true]);
  });

  it("the values' noProxy with the values' proxy; the environment's NO_PROXY does not apply to --proxy", () => {
    const fromValues = cliProxy({ values: { url: 'http://127.0.0.1:1', noProxy: ['.corp.example'], files: ['v.yaml'] }, env: { NO_PROXY: 'api.rlmesh.dev' } })!;
    expect([fromValues.appliesTo('api.corp.example'), fromValues.appliesTo('api.rlmesh.dev')]).toEqual([false, true]);
    const fromFlag = cliProxy({ flag: 'http://127.0.0.1:2', values: none, env: { HTTPS_PROXY: 'http://127.0.0.1:3', NO_PROXY: 'api.rlmesh.dev' } })!;
    expect([fromFlag.shown, fromFlag.appliesTo('api.rlmesh.dev')]).toEqual(['http://127.0.0.1:2', true]);
  });
});
