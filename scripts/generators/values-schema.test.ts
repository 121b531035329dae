import { describe, expect, it } from 'vitest';
import { compactValuesTable, typeName, valueRows, valuesJsonSchema } from './values-schema.ts';

describe('the values tables', () => {
  const rows = new Map(valueRows().map((r) => [r.path, r]));

  it('name a union by its members, not as an object', () => {
    expect(rows.get('metrics.prometheusRule.enabled')?.type).toBe('boolean or "auto"');
    expect(rows.get('controller.maxConcurrent')?.type).toBe('integer or null');
    expect(rows.get('controlPlane.addresses')?.type).toBe('list of string');
    expect(typeName({ anyOf: [{ type: 'string', const: 'auto' }, { type: 'boolean' }] })).toBe('"auto" or boolean');
    expect(typeName({ type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'object' }] } })).toBe('list of peer');
  });

  it('call a value an object only where the schema says object', () => {
    const objects = [...rows.values()].filter((r) => r.type === 'object').map((r) => r.path);
    const schema = valuesJsonSchema();
    const at = (path: string) => path.split('.').reduce<Record<string, unknown> | undefined>((s, k) => (s?.properties as Record<string, Record<string, unknown>> | undefined)?.[k], schema);
    for (const p of objects) expect(at(p)?.type, p).toBe('object');
  });

  it('the compact one has every value, each on one row with its type and default', () => {
    const lines = compactValuesTable(valuesJsonSchema()).split('\n').slice(2);
    expect(lines).toHaveLength(rows.size);
    expect(lines).toContain('| `metrics.prometheusRule.enabled` | boolean or "auto" | `false` |');
  });
});
