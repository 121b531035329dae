import { describe, expect, it } from 'vitest';
import { valuesSchema } from './values-schema.ts';

const T = { joinToken: 'rlm_jt_test0123456789abcdefghijk' };
const issues = (values: Record<string, unknown>) => {
  const r = valuesSchema.safeParse({ ...T, ...values });
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('the chart knobs (lib/chart-knobs.ts)', () => {
  it('accepts labels, annotations, extraEnv, ServiceAccount annotations, logging and arbitraryUid', () => {
    expect(
      issues({
        commonLabels: { 'example.com/team': 'ml' },
        podLabels: { cost: 'c1' },
        podAnnotations: { 'example.com/note': 'free text' },
        agent: { extraEnv: [{ name: 'FOO', value: '1' }, { name: 'BAR', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }], serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/r' } } },
        logging: { level: 'debug', format: 'text' },
        podSecurity: { arbitraryUid: true },
      }),
    ).toEqual([]);
  });

  it('refuses the chart\'s own label keys, naming the path', () => {
    expect(issues({ commonLabels: { 'app.kubernetes.io/name': 'x' } })).toEqual([expect.stringMatching(/^commonLabels\.app\.kubernetes\.io\/name: app\.kubernetes\.io\/name is a key the chart sets itself/)]);
    expect(issues({ podLabels: { 'rlmesh.dev/metrics': 'false' } })[0]).toMatch(/^podLabels\.rlmesh\.dev\/metrics: /);
    expect(issues({ podAnnotations: { 'checksum/runtime-config': 'x' } })[0]).toMatch(/^podAnnotations\.checksum\/runtime-config: /);
    expect(issues({ commonLabels: { 'bad key!': 'x' } })[0]).toMatch(/^commonLabels\.bad key!: "bad key!" is not a label or annotation key/);
  });

  it('refuses an extraEnv name the chart sets, and one with both value and valueFrom', () => {
    expect(issues({ controller: { extraEnv: [{ name: 'OK', value: '1' }, { name: 'LOG_LEVEL', value: 'debug' }] } })).toEqual([
      expect.stringMatching(/^controller\.extraEnv\.1: LOG_LEVEL is an environment variable the chart sets itself/),
    ]);
    expect(issues({ artifactCache: { filler: { extraEnv: [{ name: 'X', value: '1', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] } } })[0]).toMatch(/^artifactCache\.filler\.extraEnv\.0: X has both value and valueFrom/);
  });

  it('refuses a log level or format it does not know', () => {
    expect(issues({ logging: { level: 'trace' } })[0]).toMatch(/^logging\.level: /);
    expect(issues({ logging: { format: 'pretty' } })[0]).toMatch(/^logging\.format: /);
  });
});
