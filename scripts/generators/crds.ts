// The CRDs in crds/ and the chart's crds/ are generated from the zod schemas in
// lib/crds/types.ts: structural OpenAPI v3 with a description on every field
// (so `kubectl explain` works), printer columns and the status subresource.
import { z } from 'zod';
import { readFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import {
  CACHE,
  EVALUATION,
  GROUP,
  VERSION,
  cacheSpecSchema,
  cacheStatusSchema,
  evaluationRules,
  evaluationSpecSchema,
  evaluationStatusSchema,
} from '../../lib/crds/types.ts';

type Json = { [k: string]: unknown };

const chartVersion = (): string => String((parse(readFileSync(new URL('../../charts/rlmesh-runtime/Chart.yaml', import.meta.url), 'utf8')) as { version: string }).version);
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

// zod's JSON Schema is nearly structural already; Kubernetes additionally forbids
// additionalProperties:false and needs int64 integers without JavaScript's bounds.
function structural(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(structural);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    if (k === 'additionalProperties' && v === false) continue;
    if (k === '$schema') continue;
    if ((k === 'maximum' && v === MAX_SAFE) || (k === 'minimum' && v === -MAX_SAFE)) continue;
    out[k] = structural(v);
  }
  if (out.type === 'integer') out.format = 'int64';
  return out;
}

function openApi(schema: z.ZodType): Json {
  return structural(z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' })) as Json;
}

/** Fails generation when a field has no description, so `kubectl explain` never prints an empty one. */
function assertDescribed(node: Json, path: string): void {
  const props = node.properties as Record<string, Json> | undefined;
  for (const [k, child] of Object.entries(props ?? {})) {
    if (typeof child.description !== 'string' || child.description === '') throw new Error(`CRD field ${path}.${k} has no description in lib/crds/types.ts`);
    assertDescribed(child, `${path}.${k}`);
  }
  const items = node.items as Json | undefined;
  if (items) assertDescribed(items, `${path}[]`);
}

type Names = { kind: string; plural: string; singular: string; shortNames: readonly string[] };
type Column = { name: string; type: string; jsonPath: string; description: string; priority?: number };
type Rule = { rule: string; message: string };

function crd(names: Names, scope: 'Namespaced' | 'Cluster', description: string, spec: z.ZodType, status: z.ZodType, columns: Column[], rules: readonly Rule[] = []): string {
  const specSchema = openApi(spec);
  const statusSchema = openApi(status);
  assertDescribed(specSchema, 'spec');
  assertDescribed(statusSchema, 'status');
  const doc = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${names.plural}.${GROUP}`,
      // the chart version whose CRDs these are: after `helm upgrade` it shows the hook applied them
      // (helm itself never updates crds/); `rlmesh status` compares it with the release's
      labels: { 'app.kubernetes.io/part-of': 'rlmesh-runtime', 'app.kubernetes.io/version': chartVersion() },
    },
    spec: {
      group: GROUP,
      scope,
      names: { kind: names.kind, listKind: `${names.kind}List`, plural: names.plural, singular: names.singular, shortNames: [...names.shortNames], categories: ['rlmesh'] },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: columns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description,
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string', description: 'APIVersion defines the versioned schema of this representation of an object.' },
                kind: { type: 'string', description: 'Kind is a string value representing the REST resource this object represents.' },
                metadata: { type: 'object' },
                spec: specSchema,
                status: statusSchema,
              },
              ...(rules.length ? { 'x-kubernetes-validations': rules.map((r) => ({ ...r })) } : {}),
            },
          },
        },
      ],
    },
  };
  return `# Generated from lib/crds/types.ts by scripts/generators/crds.ts; do not edit. Run \`npm run generate\`.\n${stringify(doc, { lineWidth: 0 })}`;
}

export async function outputs(): Promise<Record<string, string>> {
  const evaluation = crd(
    EVALUATION,
    'Namespaced',
    'RLMeshEvaluation is one evaluation the control plane assigned to this cluster. The agent creates it in rlmesh-runs; the controller fetches its artifacts into the shared cache, runs it as a pod and reports its phase.',
    evaluationSpecSchema,
    evaluationStatusSchema,
    [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Phase of the evaluation.' },
      { name: 'Reason', type: 'string', jsonPath: '.status.reason', description: 'Reason for the phase.' },
      { name: 'Pod', type: 'string', jsonPath: '.status.podName', description: 'Evaluation pod.' },
      { name: 'Node', type: 'string', jsonPath: '.status.nodeName', description: 'Node the pod runs on.' },
      { name: 'Exit', type: 'integer', jsonPath: '.status.exitCode', description: 'Exit code of the evaluation container.' },
      { name: 'Evaluation', type: 'string', jsonPath: '.spec.evaluationId', description: 'Control plane id.', priority: 1 },
      { name: 'Message', type: 'string', jsonPath: '.status.message', description: 'Explanation of the phase.', priority: 1 },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Age of the evaluation.' },
    ],
    evaluationRules,
  );
  const cache = crd(
    CACHE,
    'Cluster',
    'RLMeshCache is the shared, content-addressed artifact cache on PVC rlmesh-artifact-cache: the controller fetches every artifact once, verifies its digest, and evicts least recently used artifacts between the water marks.',
    cacheSpecSchema,
    cacheStatusSchema,
    [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Phase of the cache.' },
      { name: 'Capacity', type: 'string', jsonPath: '.status.capacity', description: 'Capacity of the cache.' },
      { name: 'Used', type: 'string', jsonPath: '.status.used', description: 'Bytes used by artifacts.' },
      { name: 'Artifacts', type: 'integer', jsonPath: '.status.entries', description: 'Number of cached artifacts.' },
      { name: 'Hit Ratio', type: 'string', jsonPath: '.status.hitRatio', description: 'Share of artifact requests served from the cache.' },
      { name: 'Node', type: 'string', jsonPath: '.status.nodeName', description: 'Node holding the volume.', priority: 1 },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Age of the cache.' },
    ],
  );
  const evalFile = `${EVALUATION.plural}`;
  const cacheFile = `${CACHE.plural}`;
  const files: Record<string, string> = {};
  for (const dir of ['crds', 'charts/rlmesh-runtime/crds']) {
    files[`${dir}/${GROUP}_${evalFile}.yaml`] = evaluation;
    files[`${dir}/${GROUP}_${cacheFile}.yaml`] = cache;
  }
  return files;
}
