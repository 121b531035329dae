// A Secret's metadata alone (a PartialObjectMetadata GET): whoever reads it this
// way never receives the Secret's data, so cannot print or log it. Used by the
// agent to publish its credential Secrets' state and by rlmesh status.
import * as k8s from '@kubernetes/client-node';
import { isNotFound } from './kube-errors.ts';

const METADATA_ONLY = k8s.setHeaderOptions('Accept', 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1');

/** The Secret's metadata, or undefined when it does not exist. */
export async function readSecretMetadata(core: k8s.CoreV1Api, namespace: string, name: string): Promise<k8s.V1ObjectMeta | undefined> {
  try {
    return (await core.readNamespacedSecret({ namespace, name }, METADATA_ONLY)).metadata ?? {};
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** When an object was last written: its newest managedFields time, else its creation. */
export function lastWritten(meta: k8s.V1ObjectMeta): Date | undefined {
  const times = (meta.managedFields ?? []).map((f) => (f.time ? new Date(f.time).getTime() : 0)).filter((t) => t > 0);
  if (times.length) return new Date(Math.max(...times));
  return meta.creationTimestamp ? new Date(meta.creationTimestamp) : undefined;
}
