import { describe, expect, it } from 'vitest';
import { checkOutputHosts, MAX_OUTPUT_HOSTS, outputHostsText, parseOutputHostsText } from './output-hosts.ts';

describe('the output hosts a platform names', () => {
  it('keeps exact public hostnames, normalised, once each, sorted', () => {
    expect(checkOutputHosts(['Outputs.RLMesh.dev.', 'checkpoints.rlmesh.dev', 'outputs.rlmesh.dev', 'bücher.example'])).toEqual({
      hosts: ['checkpoints.rlmesh.dev', 'outputs.rlmesh.dev', 'xn--bcher-kva.example'],
      refused: [],
    });
  });

  it.each([
    ['*.rlmesh.dev', /wildcard/],
    ['*', /wildcard/],
    ['203.0.113.7', /IP address/],
    ['[2001:db8::1]', /IP address/],
    ['169.254.169.254', /IP address/],
    ['localhost', /single-label/],
    ['kubernetes.default.svc.cluster.local', /cluster-internal/],
    ['rlmesh-egress-proxy.rlmesh-system.svc', /cluster-internal/],
    ['metadata.google.internal', /cluster-internal/],
    ['printer.local', /cluster-internal/],
    ['a b.example', /not a hostname/],
    ['evil.example/path', /not a hostname/],
    ['', /not a hostname/],
  ])('refuses %j (%s), keeping the rest', (host, why) => {
    const r = checkOutputHosts([host, 'outputs.rlmesh.dev']);
    expect(r.hosts).toEqual(['outputs.rlmesh.dev']);
    expect(r.refused).toEqual([{ host, why: expect.stringMatching(why) }]);
  });

  it(`keeps at most ${MAX_OUTPUT_HOSTS}, whatever the platform sends`, () => {
    const many = Array.from({ length: 1000 }, (_, i) => `o${i}.rlmesh.dev`);
    const r = checkOutputHosts(many);
    expect(r.hosts).toHaveLength(MAX_OUTPUT_HOSTS);
    expect(r.refused).toHaveLength(1000 - MAX_OUTPUT_HOSTS);
    expect(r.refused[0]!.why).toMatch(/more than 64/);
  });

  it('round-trips through the ConfigMap text, which is checked again as it is read', () => {
    expect(parseOutputHostsText(outputHostsText(['a.rlmesh.dev', 'b.rlmesh.dev']))).toEqual({ hosts: ['a.rlmesh.dev', 'b.rlmesh.dev'], refused: [] });
    expect(parseOutputHostsText('# written by hand\n a.rlmesh.dev \n\n*.evil.example\n').hosts).toEqual(['a.rlmesh.dev']);
  });
});
