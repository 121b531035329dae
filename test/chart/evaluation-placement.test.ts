// The operator's policy for evaluation pods in the chart (helm template only, no cluster):
// the values reach the runtime config, the controller's pod admission policy pins the
// RuntimeClass and refuses system- PriorityClasses, and bad values are refused naming the
// path, by values.schema.json and by _validate.tpl alike (crossFieldErrors() says the same).
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { readFileSync } from 'node:fs';
import { runtimeConfigSchema } from '../../lib/runtime-config.ts';
import { crossFieldErrors, valuesObjectSchema } from '../../lib/values-schema.ts';
import { CHART, get, render, template, TOKEN, valuesFile, type K8sObject } from './chart.ts';

const SYS = 'rlmesh-system';
const SCENARIO = join(CHART, 'ci/evaluation-placement-values.yaml');
const configOf = (o: Map<string, K8sObject>) => runtimeConfigSchema.parse(JSON.parse((get(o, 'ConfigMap', SYS, 'rlmesh-runtime-config') as K8sObject & { data: Record<string, string> }).data['config.json']!));
const podPolicy = (o: Map<string, K8sObject>) => get(o, 'ValidatingAdmissionPolicy', '', `rlmesh-cluster-controller-pods.${SYS}`) as K8sObject & { spec: { validations: { expression: string }[] } };

describe('evaluations: the operator\'s policy for evaluation pods', () => {
  it('carries every value of the scenario to the controller and the agent in the runtime config', () => {
    const values = parse(readFileSync(SCENARIO, 'utf8')) as { evaluations: Record<string, unknown> };
    const placement = configOf(render(['-f', SCENARIO])).evaluations!.placement!;
    for (const k of ['nodeSelector', 'tolerations', 'affinity', 'priorityClassName', 'runtimeClassName', 'podLabels', 'podAnnotations'] as const) {
      expect(placement[k], k).toEqual(values.evaluations[k]);
    }
  });

  it('without them the policy is empty, and the admission policy allows no RuntimeClass', () => {
    const o = render(['--set', `joinToken=${TOKEN}`]);
    expect(configOf(o).evaluations!.placement).toEqual({ nodeSelector: {}, tolerations: [], affinity: {}, priorityClassName: '', runtimeClassName: '', podLabels: {}, podAnnotations: {} });
    const exprs = podPolicy(o).spec.validations.map((v) => v.expression).join('\n');
    expect(exprs).toContain("object.spec.runtimeClassName == ''");
    expect(exprs).not.toContain('the sandbox');
  });

  it('with a RuntimeClass, the controller may create an evaluation pod only with it; never a system- PriorityClass', () => {
    const exprs = podPolicy(render(['-f', SCENARIO])).spec.validations.map((v) => v.expression).join('\n');
    expect(exprs).toContain("object.spec.runtimeClassName == 'gvisor'");
    expect(exprs).toMatch(/variables\.images\.all\(r, r\.image == "[^"]+"\) \|\|\s+\(has\(object\.spec\.runtimeClassName\) && object\.spec\.runtimeClassName == 'gvisor'\)/);
    expect(exprs).toContain("!object.spec.priorityClassName.startsWith('system-')");
  });

  const bad = {
    joinToken: TOKEN,
    evaluations: {
      nodeSelector: { 'kubernetes.io/arch': 'arm64', 'bad key': 'x' },
      podLabels: { 'rlmesh.dev/evaluation': 'x', 'app.kubernetes.io/name': 'web' },
      podAnnotations: { '-nope': 'z' },
      priorityClassName: 'system-node-critical',
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{}] } } },
    },
  };
  const paths = [
    'evaluations.nodeSelector.bad key',
    'evaluations.nodeSelector.kubernetes.io/arch',
    'evaluations.podLabels.rlmesh.dev/evaluation',
    'evaluations.podLabels.app.kubernetes.io/name',
    'evaluations.podAnnotations.-nope',
    'evaluations.priorityClassName',
    'evaluations.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.0',
  ];

  it('refuses bad values naming each path, in helm and in crossFieldErrors() alike', () => {
    const r = template(['-f', valuesFile(bad)], { allowFail: true });
    expect(r.status).not.toBe(0);
    for (const p of paths) expect(r.stderr).toContain(`  - ${p}: `);
    const ts = crossFieldErrors(valuesObjectSchema.parse(bad)).map((e) => e.path);
    expect(ts.sort()).toEqual([...paths].sort());
    // helm's list is the same messages as crossFieldErrors() gives
    for (const e of crossFieldErrors(valuesObjectSchema.parse(bad))) expect(r.stderr).toContain(`${e.path}: ${e.message}`);
  });

  it('values.schema.json refuses a RuntimeClass or PriorityClass that is no DNS name, and a label value that is no label value', () => {
    for (const set of ['evaluations.runtimeClassName=Bad_Name', 'evaluations.priorityClassName=UPPER', 'evaluations.podLabels.team=has space']) {
      const r = template(['--set', `joinToken=${TOKEN}`, '--set', set], { allowFail: true });
      expect(r.status, set).not.toBe(0);
      expect(r.stderr).toContain(`/evaluations/${set.split('=')[0]!.split('.').slice(1).join('/')}`);
    }
  });
});
