// Whether a new assignment is refused because the cluster drains: the
// operator's drain (rlmesh drain) first, as only the operator can end it; then
// the platform's own, as the platform last said it on the session.
import { operatorDrainRefusal, platformDrainRefusal, type OperatorDrain } from '../lib/operator-drain.ts';
import type { DrainRefusal } from './assignments.ts';

/** The platform's drain as its last ClusterState said (null: not draining). */
export type PlatformDrain = { since?: string } | null;

export function drainRefusal(platform: PlatformDrain, operator: OperatorDrain | null, namespace: string): DrainRefusal | undefined {
  if (operator) return { reason: 'OperatorDrain', message: operatorDrainRefusal(operator, namespace) };
  if (platform) return { reason: 'ClusterDraining', message: platformDrainRefusal(platform.since) };
  return undefined;
}
