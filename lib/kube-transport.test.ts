import { describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { reuseConnections } from './kube-transport.ts';

const config = (ca: string) => {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from(ca).toString('base64') }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
};

describe('reuseConnections', () => {
  it('gives every request and watch one kept-alive agent, where client-node would make one per request', async () => {
    const plain = config('ca-1');
    const a = (await plain.applyToFetchOptions({})).agent;
    const b = (await plain.applyToFetchOptions({})).agent;
    expect(a).not.toBe(b);

    const kc = reuseConnections(config('ca-1'));
    const first = (await kc.applyToFetchOptions({})).agent as unknown as { options: { keepAlive?: boolean } };
    expect((await kc.applyToFetchOptions({})).agent).toBe(first);
    expect(first.options.keepAlive).toBe(true);
    // API calls take theirs through applySecurityAuthentication
    let agent: unknown;
    await kc.applySecurityAuthentication({ setHeaderParam: () => {}, setAgent: (x: unknown) => (agent = x) } as unknown as Parameters<typeof kc.applySecurityAuthentication>[0]);
    expect(agent).toBe(first);
  });
});
