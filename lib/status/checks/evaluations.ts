// Evaluations by phase, and the last failures with their reasons
// (RLMeshEvaluations in the runs namespace). A failure is most often the
// evaluation's own, so failures warn; evaluations waiting long warn too.
import * as k8s from '@kubernetes/client-node';
import { EVALUATION, GROUP, PHASES, VERSION, type RLMeshEvaluation } from '../../crds/types.ts';
import { listPages } from '../../list-pages.ts';
import { runsNamespace } from '../reads.ts';
import { ago, type CheckResult, type StatusContext } from '../types.ts';

const RECENT_MS = 3600_000;
const created = (e: RLMeshEvaluation): number => new Date(e.metadata.creationTimestamp ?? 0).getTime();
const WAITING_LONG_MS = 10 * 60_000;

export function evaluationsVerdict(namespace: string, items: RLMeshEvaluation[], now: number): CheckResult {
  const id = 'evaluations';
  const by = new Map<string, number>();
  for (const e of items) by.set(e.status?.phase ?? 'New', (by.get(e.status?.phase ?? 'New') ?? 0) + 1);
  const counts = ['New', ...PHASES].filter((p) => by.get(p)).map((p) => `${p} ${by.get(p)}`);
  const found = items.length ? `${items.length} in ${namespace}: ${counts.join(', ')}` : `none in ${namespace}`;
  const when = (e: RLMeshEvaluation): number => (e.status?.finishTime ? Date.parse(e.status.finishTime) : created(e)) || 0;
  const failed = items.filter((e) => e.status?.phase === 'Failed').sort((a, b) => when(b) - when(a));
  const last = failed.slice(0, 3).map((e) => `${e.metadata.name} ${ago(now - when(e))} ago: ${e.status?.reason ?? 'Failed'}${e.status?.message ? ` (${e.status.message.slice(0, 160)})` : ''}`);
  const failures = last.length ? `; last failures: ${last.join('; ')}` : '';
  const waiting = items.filter((e) => e.status?.phase === 'Waiting' && now - (created(e) || now) > WAITING_LONG_MS);
  if (waiting.length) {
    const w = waiting[0]!;
    return { id, verdict: 'warn', found: `${found}; ${waiting.length} waiting over ${WAITING_LONG_MS / 60_000} min, e.g. ${w.metadata.name}: ${w.status?.reason ?? ''} ${w.status?.message?.slice(0, 200) ?? ''}`.trim() + failures, fix: 'The reason says what the evaluation waits for (and the checks above whether it is this cluster).' };
  }
  if (failed.some((e) => now - when(e) < RECENT_MS)) return { id, verdict: 'warn', found: found + failures, fix: `Read each failure's reason: kubectl -n ${namespace} describe rle <name>; an evaluation's own exit code is its author's to fix.` };
  return { id, verdict: 'pass', found: found + failures, fix: 'Nothing to do.' };
}

export async function checkEvaluations(ctx: StatusContext): Promise<CheckResult> {
  const namespace = await runsNamespace(ctx);
  const custom = ctx.kc.makeApiClient(k8s.CustomObjectsApi);
  const { items } = await listPages(
    (p) => custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: EVALUATION.plural, ...p }) as Promise<{ items: RLMeshEvaluation[]; metadata?: { _continue?: string } }>,
    (e: RLMeshEvaluation) => ({ metadata: e.metadata, status: e.status }) as RLMeshEvaluation,
  );
  return evaluationsVerdict(namespace, items, ctx.now());
}
