import { describe, expect, it } from 'vitest';
import { operatorDrainConfigMap, parseOperatorDrain } from './operator-drain.ts';

describe("the operator's drain ConfigMap", () => {
  it('round-trips since and by', () => {
    const cm = operatorDrainConfigMap({ since: '2026-12-01T08:00:00.000Z', by: 'alice' }, 'rlmesh-system');
    expect(cm.metadata).toMatchObject({ name: 'rlmesh-operator-drain', namespace: 'rlmesh-system' });
    expect(parseOperatorDrain(cm)).toEqual({ since: '2026-12-01T08:00:00.000Z', by: 'alice' });
  });

  it('a hand-made one (no since, or not a time) still drains, dated by its creation', () => {
    expect(parseOperatorDrain({ metadata: { creationTimestamp: new Date('2026-12-01T09:00:00Z') } })).toEqual({ since: '2026-12-01T09:00:00.000Z' });
    expect(parseOperatorDrain({ metadata: { creationTimestamp: new Date('2026-12-01T09:00:00Z') }, data: { since: 'yesterday' } }).since).toBe('2026-12-01T09:00:00.000Z');
  });
});
