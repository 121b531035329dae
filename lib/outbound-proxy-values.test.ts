import { describe, expect, it } from 'vitest';
import { runtimeConfigSchema } from './runtime-config.ts';
import { MOUNTS } from './fixed-names.ts';
import { parseProxyUrl, proxyErrors, proxyPeer, type ProxyValues } from './outbound-proxy-values.ts';
import { VALUES_REFUSALS } from './values-refusals.ts';
import { crossFieldErrors, renderRuntimeConfig, valuesObjectSchema, valuesSchema } from './values-schema.ts';

const TOKEN = 'rlm_jt_0123456789abcdefghijkl';
const proxy = (p: Partial<ProxyValues>): ProxyValues => ({ url: '', noProxy: [], existingSecret: '', addresses: [], ...p });
const messages = (p: Partial<ProxyValues>) => proxyErrors(proxy(p)).map((e) => `${e.path}: ${e.message}`);
const R = VALUES_REFUSALS;

describe('controlPlane.proxy url', () => {
  it('reads scheme, host, port (or the scheme default) and what follows', () => {
    expect(parseProxyUrl('http://proxy.corp.example:3128')).toEqual({ matched: true, scheme: 'http', userinfo: false, host: 'proxy.corp.example', hostKind: 'name', port: 3128, rest: '' });
    expect(parseProxyUrl('https://10.0.0.5/')).toMatchObject({ hostKind: 'ipv4', port: 443, rest: '/' });
    expect(parseProxyUrl('http://[2001:db8::1]')).toMatchObject({ host: '[2001:db8::1]', hostKind: 'ipv6', port: 80 });
    expect(parseProxyUrl('http://u:p@proxy:3128/x?y')).toMatchObject({ userinfo: true, host: 'proxy', port: 3128, rest: '/x?y' });
    expect(parseProxyUrl('http://proxy:0').port).toBe(0);
    expect(parseProxyUrl('http://proxy:65536').port).toBe(0);
    expect(parseProxyUrl('http://Proxy_1').hostKind).toBe('invalid');
    expect(parseProxyUrl('proxy.corp:3128').matched).toBe(false);
  });

  it('its peer: addresses when given, else the /32 or /128 of an IP literal', () => {
    expect(proxyPeer(proxy({}))).toBeNull();
    expect(proxyPeer(proxy({ url: 'http://10.0.0.5:3128' }))).toEqual({ addresses: ['10.0.0.5/32'], port: 3128 });
    expect(proxyPeer(proxy({ url: 'https://[2001:db8::1]' }))).toEqual({ addresses: ['2001:db8::1/128'], port: 443 });
    expect(proxyPeer(proxy({ url: 'http://proxy.corp', addresses: ['10.1.0.0/24'] }))).toEqual({ addresses: ['10.1.0.0/24'], port: 80 });
  });
});

describe('controlPlane.proxy refusals', () => {
  it('accepts a proxy by name with its addresses, or by address', () => {
    expect(messages({})).toEqual([]);
    expect(messages({ url: 'http://proxy.corp.example:3128', addresses: ['10.20.30.40/32'], existingSecret: 's', noProxy: ['.corp.example'] })).toEqual([]);
    expect(messages({ url: 'https://10.0.0.5' })).toEqual([]);
    expect(messages({ url: 'http://[fd00::5]:8080/' })).toEqual([]);
  });

  it('each mistake is refused at its path with what to do, never repeating the url', () => {
    const at = (r: { path: string; message: string }) => `${r.path}: ${r.message}`;
    expect(messages({ url: 'socks5://10.0.0.5:1080' })).toEqual([at(R.proxyUrlScheme)]);
    expect(messages({ url: 'proxy.corp:3128', addresses: ['10.0.0.5/32'] })).toEqual([at(R.proxyUrlScheme)]);
    expect(messages({ url: 'http://alice:s3cret@10.0.0.5:3128' })).toEqual([at(R.proxyUrlCredentials)]);
    expect(messages({ url: 'http://10.0.0.5:3128/proxy.pac' })).toEqual([at(R.proxyUrlPath)]);
    expect(messages({ url: 'http://10.0.0.5:99999' })).toEqual([at(R.proxyUrlHost)]);
    expect(messages({ url: 'http://proxy.corp.example:3128' })).toEqual([at(R.proxyAddressesMissing)]);
    expect(messages({ url: 'http://10.0.0.5', addresses: ['10.0.0.5', 'fd00::/64'] })).toEqual([
      'controlPlane.proxy.addresses.0: "10.0.0.5" is not a CIDR: write each address the proxy listens on with its prefix length, e.g. 10.20.30.40/32 or 2001:db8::10/128',
    ]);
    expect(messages({ existingSecret: 'corp-proxy' })).toEqual([
      'controlPlane.proxy.existingSecret: controlPlane.proxy.existingSecret is set but controlPlane.proxy.url is empty, so no proxy is used: set url to your proxy (http://host:port), or remove existingSecret',
    ]);
    expect(messages({ passUnresolvedNames: true })).toEqual([
      'controlPlane.proxy.passUnresolvedNames: controlPlane.proxy.passUnresolvedNames is set but controlPlane.proxy.url is empty, so no proxy is used: set url to your proxy (http://host:port), or remove passUnresolvedNames',
    ]);
    expect(messages({ url: 'https://10.0.0.5', passUnresolvedNames: true })).toEqual([]);
    for (const m of messages({ url: 'http://alice:s3cret@proxy.corp/x' })) expect(m).not.toContain('s3cret');
  });

  it('are cross-field errors of the values, so valuesSchema refuses them', () => {
    const values = { joinToken: TOKEN, controlPlane: { proxy: { url: 'http://proxy.corp.example:3128' } } };
    expect(crossFieldErrors(valuesObjectSchema.parse(values)).map((e) => e.path)).toEqual(['controlPlane.proxy.addresses']);
    expect(valuesSchema.safeParse(values).error?.issues.map((i) => i.path.join('.'))).toEqual(['controlPlane.proxy.addresses']);
    expect(valuesSchema.safeParse({ joinToken: TOKEN, controlPlane: { proxy: { url: 'http://10.0.0.5', noProxy: ['https://x'] } } }).error?.issues[0]?.path.join('.')).toBe('controlPlane.proxy.noProxy.0');
  });
});

describe('controlPlane.proxy in the runtime config', () => {
  it('absent without a url', () => {
    expect(renderRuntimeConfig(valuesSchema.parse({ joinToken: TOKEN })).controlPlane.proxy).toBeUndefined();
  });

  it('url and noProxy; credentialsDir and credentialsSecret only with existingSecret', () => {
    const render = (proxyValues: object) => {
      const cfg = renderRuntimeConfig(valuesSchema.parse({ joinToken: TOKEN, controlPlane: { proxy: proxyValues } }));
      expect(runtimeConfigSchema.parse(cfg)).toEqual(cfg);
      return cfg.controlPlane.proxy;
    };
    expect(render({ url: 'http://10.0.0.5:3128' })).toEqual({ url: 'http://10.0.0.5:3128', noProxy: [], passUnresolvedNames: false });
    // the egress proxy's opt-in to pass names the cluster's DNS cannot resolve to the proxy unchecked (default off)
    expect(render({ url: 'http://10.0.0.5:3128', passUnresolvedNames: true })).toMatchObject({ passUnresolvedNames: true });
    expect(render({ url: 'http://10.0.0.5:3128', noProxy: ['.corp.example', '10.0.0.0/8'], existingSecret: 'corp-proxy' })).toEqual({
      url: 'http://10.0.0.5:3128',
      noProxy: ['.corp.example', '10.0.0.0/8'],
      passUnresolvedNames: false,
      credentialsDir: MOUNTS.proxyCredentialsDir,
      credentialsSecret: 'corp-proxy',
    });
  });
});
