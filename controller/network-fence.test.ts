// No evaluation pod starts before the probe has seen NetworkPolicy enforced,
// whatever the reason it has not (failed, not finished, off), unless the
// operator opted out by name.
import { describe, expect, it } from 'vitest';
import type { CheckResult } from '../lib/preflight/types.ts';
import { NetworkFence } from './network-fence.ts';

const gate = { image: 'probe@sha256:1', forbidden: '10.96.0.1:443', allowed: '10.96.0.9:3128', graceSeconds: 60 };
const pass: CheckResult = { id: 'network-policy', verdict: 'pass', found: 'the probe pod was refused the forbidden target', fix: 'Nothing to do.' };
const fail: CheckResult = { id: 'network-policy', verdict: 'fail', found: 'the probe pod reached 10.0.0.5:9090, which the policies forbid', fix: 'Install a CNI that enforces NetworkPolicy.' };

const fence = (o: { probeEnabled?: boolean; optOut?: boolean; stored?: CheckResult; gate?: typeof gate | undefined } = {}) =>
  new NetworkFence({ probeEnabled: o.probeEnabled ?? true, runWithoutEnforcement: o.optOut ?? false, gate: () => ('gate' in o ? o.gate : gate), ...(o.stored ? { stored: o.stored } : {}) });

describe('NetworkFence', () => {
  it('a fresh install (no probe result yet) waits, and says the first probe has not finished', () => {
    const d = fence().decide();
    expect(d.start).toBe(false);
    expect(!d.start && d.message).toMatch(/first probe has not finished.*CNI that enforces.*evaluations\.runWithoutNetworkPolicyEnforcement=true/);
  });

  it('a failed probe waits with what the probe found and its fix', () => {
    const f = fence();
    f.observe(fail);
    const d = f.decide();
    expect(!d.start && d.message).toContain('the probe found the probe pod reached 10.0.0.5:9090');
    expect(!d.start && d.message).toContain('Install a CNI that enforces NetworkPolicy.');
  });

  it('the probe off waits, and names the value that turns it on', () => {
    const d = fence({ probeEnabled: false, stored: pass }).decide();
    expect(!d.start && d.message).toContain('preflight.networkPolicyProbe.enabled=true');
  });

  it('enforcement seen: starts, with the network-ready gate; observe says when it opened', () => {
    const f = fence();
    expect(f.observe(fail)).toBe(false);
    expect(f.observe(pass)).toBe(true);
    expect(f.observe(pass)).toBe(false);
    expect(f.decide()).toEqual({ start: true, gate });
    expect(fence({ stored: pass }).decide()).toEqual({ start: true, gate });
  });

  it('enforcement lost again: new pods wait again', () => {
    const f = fence({ stored: pass });
    f.observe(fail);
    expect(f.decide().start).toBe(false);
  });

  it('enforced but no gate can be built: waits rather than start without its per-pod check', () => {
    expect(fence({ stored: pass, gate: undefined }).decide().start).toBe(false);
  });

  it('the opt-out starts pods when enforcement is not seen, and keeps the gate when it is', () => {
    expect(fence({ optOut: true }).decide()).toEqual({ start: true });
    expect(fence({ optOut: true, probeEnabled: false }).decide()).toEqual({ start: true });
    expect(fence({ optOut: true, stored: pass }).decide()).toEqual({ start: true, gate });
  });
});
