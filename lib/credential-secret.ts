// The credential Secret contract shared by the agent (which writes and reads
// these Secrets), the CLI (which renders them for GitOps users) and the
// control plane (which mints the credentials): the credentials' purposes and
// forms, the keys of the control and relay Secrets, the pull credential as a
// dockerconfigjson, the annotation with the SHA-256 of the join token that
// produced them (never the token itself), and what a join answers.
import { createHash } from 'node:crypto';

export const CREDENTIAL_PURPOSES = ['control', 'pull', 'relay'] as const;
export type CredentialPurpose = (typeof CREDENTIAL_PURPOSES)[number];
export const CREDENTIAL_PREFIX = { control: 'rlm_cc_', pull: 'rlm_rp_', relay: 'rlm_rs_' } as const satisfies Record<CredentialPurpose, string>;
/** A credential as the control plane mints it: its purpose's prefix and 32 or more base62 characters. */
export const credentialPattern = (purpose: CredentialPurpose): RegExp => new RegExp(`^${CREDENTIAL_PREFIX[purpose]}[0-9A-Za-z]{32,}$`);

/** The pull credential as the cluster receives it: a dockerconfigjson for the platform registry (user = cluster id). */
export function dockerConfigJson(registryHost: string, username: string, password: string): string {
  const auth = Buffer.from(`${username}:${password}`).toString('base64');
  return JSON.stringify({ auths: { [registryHost]: { username, password, auth } } });
}

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
