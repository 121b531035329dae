// The credential Secret contract shared by the agent (which writes and reads
// these Secrets) and the CLI (which renders them for GitOps users): the keys
// of the control and relay Secrets, the annotation with the SHA-256 of the
// join token that produced them (never the token itself), and what a join
// answers.
import { createHash } from 'node:crypto';

export const CONTROL_KEY = 'control';
export const CLUSTER_ID_KEY = 'cluster-id';
export const RELAY_KEY = 'relay-secret';
export const PULL_KEY = '.dockerconfigjson';
export const PULL_SECRET_TYPE = 'kubernetes.io/dockerconfigjson';
export const TOKEN_HASH_ANNOTATION = 'rlmesh.dev/join-token-sha256';

export type JoinResult = { clusterId: string; control: string; pull: string; relay?: string };

export const tokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');

/** The stringData of a control Secret. */
export const controlSecretData = (control: string, clusterId: string): Record<string, string> => ({ [CONTROL_KEY]: control, [CLUSTER_ID_KEY]: clusterId });
