import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadAgentConfig } from './config.ts';

const file = (content: unknown) => {
  const f = join(mkdtempSync(join(tmpdir(), 'agent-cfg-')), 'config.json');
  writeFileSync(f, JSON.stringify(content));
  return f;
};
const good = { controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {} };

describe('agent config', () => {
  it('reads the runtime config and env with production defaults', () => {
    const c = loadAgentConfig({ RLMESH_CONFIG: file(good), RLMESH_JOIN_TOKEN: ' rlm_jt_abc ', POD_NAME: 'agent-0' });
    expect(c.joinToken).toBe('rlm_jt_abc');
    expect(c.podName).toBe('agent-0');
    expect(c.spoolDir).toBe('/var/lib/rlmesh/spool');
    expect(c.timing).toMatchObject({ heartbeatMs: 10_000, silenceMs: 45_000, backoffMaxMs: 30_000, authBackoffMs: 30_000 });
    expect(c.runtime.credentials.controlSecret).toBe('rlmesh-cluster-control');
    expect(c.runtime.agent.spoolMaxBytes).toBe(1024 ** 3);
  });

  it('treats an empty token as GitOps mode', () => {
    expect(loadAgentConfig({ RLMESH_CONFIG: file(good), RLMESH_JOIN_TOKEN: '' }).joinToken).toBeUndefined();
  });

  it('names the field of a bad config or env in one line, without echoing the token', () => {
    expect(() => loadAgentConfig({ RLMESH_CONFIG: file({ ...good, controlPlane: { apiPort: 0 } }) })).toThrow(/field 'controlPlane.apiPort'/);
    expect(() => loadAgentConfig({ RLMESH_CONFIG: '/nonexistent/config.json' })).toThrow(/cannot read the runtime config \/nonexistent\/config.json/);
    expect(() => loadAgentConfig({ RLMESH_CONFIG: file(good), RLMESH_AGENT_SILENCE_MS: 'soon' })).toThrow(/RLMESH_AGENT_SILENCE_MS must be a number/);
    let msg = '';
    try {
      loadAgentConfig({ RLMESH_CONFIG: file(good), RLMESH_JOIN_TOKEN: 'secret-looking-value' });
    } catch (err) {
      msg = (err as Error).message;
    }
    expect(msg).toMatch(/RLMESH_JOIN_TOKEN must look like rlm_jt_/);
    expect(msg).not.toContain('secret-looking-value');
    expect(msg.split('\n')).toHaveLength(1);
  });
});
