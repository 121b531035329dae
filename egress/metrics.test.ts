import { describe, expect, it } from 'vitest';
import { createMetrics } from './metrics.ts';

describe('the decisions the proxy counts', () => {
  it('counts every decision, and a refusal also as recent and as the last one', async () => {
    const m = createMetrics();
    const text = () => m.registry.metrics();
    expect(await text()).toMatch(/^rlmesh_egress_recent_refusals 0$/m);
    expect(await text()).toMatch(/^rlmesh_egress_last_refusal_timestamp_seconds 0$/m);
    const now = Date.now();
    m.decide('allowed', 'platform', now);
    m.decide('refused', 'not-allowed', now - 11 * 60_000);
    m.decide('refused', 'private-address', now);
    const after = await text();
    expect(after).toMatch(/^rlmesh_egress_decisions_total\{outcome="refused",rule="not-allowed"\} 1$/m);
    expect(after).toMatch(/^rlmesh_egress_decisions_total\{outcome="allowed",rule="platform"\} 1$/m);
    expect(after).toMatch(/^rlmesh_egress_recent_refusals 1$/m);
    expect(after).toContain(`rlmesh_egress_last_refusal_timestamp_seconds ${now / 1000}\n`);
  });
});
