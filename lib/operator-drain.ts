// The operator's drain, held on the cluster's side: ConfigMap
// rlmesh-operator-drain in the release namespace. `rlmesh drain` creates it
// (keys since and by, owned by the agent's Deployment so that helm uninstall
// removes it and an upgrade keeps it), `rlmesh drain --undo` deletes it; the
// agent only reads it (get, list and watch on that one name) and, while it
// exists, refuses every new assignment whatever the platform says. A ConfigMap
// of its own keeps the rights small on both sides: the operator needs create
// on ConfigMaps and delete on this one name, the agent no write at all, and
// the platform, which only talks to the agent, cannot end it.
import type * as k8s from '@kubernetes/client-node';
import { NAMES } from './fixed-names.ts';

export const OPERATOR_DRAIN_CONFIGMAP = NAMES.operatorDrainConfigMap;

/** A drain the operator holds: since when, and who (the Kubernetes user `rlmesh drain` ran as, when it could tell). */
export type OperatorDrain = { since: string; by?: string };

export const UNDO_DRAIN = 'rlmesh drain --undo';

export function operatorDrainConfigMap(d: OperatorDrain, namespace: string): k8s.V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: OPERATOR_DRAIN_CONFIGMAP,
      namespace,
      labels: { 'app.kubernetes.io/name': OPERATOR_DRAIN_CONFIGMAP, 'app.kubernetes.io/part-of': 'rlmesh-runtime', 'app.kubernetes.io/managed-by': 'rlmesh-cli' },
    },
    data: { since: d.since, ...(d.by ? { by: d.by } : {}) },
  };
}

/**
 * The drain a ConfigMap holds. It exists, so the cluster is drained: a missing
 * or unreadable `since` (a hand-made ConfigMap) still drains, dated by its creation.
 */
export function parseOperatorDrain(cm: k8s.V1ConfigMap): OperatorDrain {
  const raw = cm.data?.since;
  const created = cm.metadata?.creationTimestamp;
  const fallback = created ? new Date(created).toISOString() : new Date(0).toISOString();
  const since = raw && !Number.isNaN(Date.parse(raw)) ? new Date(raw).toISOString() : fallback;
  const by = cm.data?.by?.slice(0, 200);
  return { since, ...(by ? { by } : {}) };
}

/** The refusal of an assignment while the operator drains: what, why, and what to do. */
export function operatorDrainRefusal(d: OperatorDrain, namespace: string): string {
  return (
    `refused: the cluster's operator drained this cluster at ${d.since} (rlmesh drain, ConfigMap ${namespace}/${OPERATOR_DRAIN_CONFIGMAP}), ` +
    `so it takes no new evaluations while those it holds run to their end; submit to another cluster, or ask the cluster's operator to run ${UNDO_DRAIN}`
  );
}

/** The refusal of an assignment while the platform drains (it sent one anyway). */
export function platformDrainRefusal(since: string | undefined): string {
  return (
    `refused: the platform drains this cluster${since ? ` (since ${since})` : ''} and still sent this new evaluation; the cluster takes none while draining ` +
    `and those it holds run to their end; submit to another cluster, or end the drain on the platform first (reference control plane: POST /v1/clusters/{id}/resume)`
  );
}
