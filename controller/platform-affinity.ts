// The required node affinity of every pod the controller creates: a node of the
// runtime's platform (lib/fixed-names.ts), since the runtime image runs in each of
// them, and the named node when the pod must run there.
import type { V1Affinity } from '@kubernetes/client-node';
import { PLATFORM_NODE_REQUIREMENTS } from '../lib/fixed-names.ts';

export function platformAffinity(nodeName?: string): V1Affinity {
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [
          {
            matchExpressions: PLATFORM_NODE_REQUIREMENTS.map((r) => ({ ...r, values: [...r.values] })),
            ...(nodeName ? { matchFields: [{ key: 'metadata.name', operator: 'In', values: [nodeName] }] } : {}),
          },
        ],
      },
    },
  };
}
