import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadAgentConfig } from './config.ts';
import { tempDir } from '../test/support/temp.ts';

const file = (content: unknown) => {
  const f = join(tempDir('agent-cfg-'), 'config.json');
  writeFileSync(f, JSON.stringify(content));
  return f;
};
const good = { controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {} };

describe('agent config', () => {
  it('reads the runtime config, flags and env with production defaults', () => {
    const c = loadAgentConfig([], { RLMESH_CONFIG: file(good), RLMESH_JOIN_TOKEN: ' rlm_jt_abc ', POD_NAME: 'agent-0' });
    expect(c.joinToken).toBe('rlm_jt_abc');
    expect(c.podName).toBe('agent-0');
    expect(c.spoolDir).toBe('/var/lib/rlmesh/spool');
    expect(c.timing).toMatchObject({ heartbeatMs: 10_000, silenceMs: 45_000, backoffMaxMs: 30_000, authBackoffMs: 30_000 });
    expect(c.runtime.credentials.controlSecret).toBe('rlmesh-cluster-control');
    expect(c.runtime.agent.spoolMaxBytes).toBe(1024 ** 3);
  });

  it('takes its tuning from flags and the listen host from RLMESH_LISTEN_HOST', () => {
    const c = loadAgentConfig(['--silence-ms=5000', '--spool-dir=/tmp/spool'], { RLMESH_CONFIG: file(good), RLMESH_LISTEN_HOST: '127.0.0.1' });
    expect(c.timing.silenceMs).toBe(5000);
    expect(c.spoolDir).toBe('/tmp/spool');
    expect(c.listenHost).toBe('127.0.0.1');
  });

  it('listens on every interface, IPv4 and IPv6, without RLMESH_LISTEN_HOST, and refuses a malformed one', () => {
    expect(loadAgentConfig([], { RLMESH_CONFIG: file(good) }).listenHost).toBeUndefined();
    expect(loadAgentConfig([], { RLMESH_CONFIG: file(good), RLMESH_LISTEN_HOST: '[::1]' }).listenHost).toBe('::1');
    expect(() => loadAgentConfig([], { RLMESH_CONFIG: file(good), RLMESH_LISTEN_HOST: '::g' })).toThrow(/invalid agent environment: RLMESH_LISTEN_HOST='::g' is not an IPv6 address/);
  });

  it('treats an empty token as GitOps mode', () => {
    expect(loadAgentConfig([], { RLMESH_CONFIG: file(good), RLMESH_JOIN_TOKEN: '' }).joinToken).toBeUndefined();
  });

  it('names the field of a bad config or env in one line, without echoing the token', () => {
    expect(() => loadAgentConfig([], { RLMESH_CONFIG: file({ ...good, controlPlane: { apiPort: 0 } }) })).toThrow(/field 'controlPlane.apiPort'/);
    expect(() => loadAgentConfig([], { RLMESH_CONFIG: '/nonexistent/config.json' })).toThrow(/cannot read the runtime config \/nonexistent\/config.json/);
    expect(() => loadAgentConfig(['--silence-ms=soon'], { RLMESH_CONFIG: file(good) })).toThrow('invalid agent flag: --silence-ms "soon" must be a number of milliseconds');
    expect(() => loadAgentConfig(['--lease-seconds=2'], { RLMESH_CONFIG: file(good) })).toThrow(/--lease-seconds "2" /);
    expect(() => loadAgentConfig(['--silence=5'], { RLMESH_CONFIG: file(good) })).toThrow(/Unknown option '--silence'/);
    let msg = '';
    try {
      loadAgentConfig([], { RLMESH_CONFIG: file(good), RLMESH_JOIN_TOKEN: 'secret-looking-value' });
    } catch (err) {
      msg = (err as Error).message;
    }
    expect(msg).toMatch(/RLMESH_JOIN_TOKEN must look like rlm_jt_/);
    expect(msg).not.toContain('secret-looking-value');
    expect(msg.split('\n')).toHaveLength(1);
  });
});
