// What the cluster receives for each credential purpose: the pull credential
// as the content of a kubernetes.io/dockerconfigjson Secret for the platform
// registry (user = cluster id); control and relay as bare tokens.
import { dockerConfigJson, type CredentialPurpose } from '../lib/credential-secret.ts';

export function credentialWireValue(registryHost: string, clusterId: string, purpose: CredentialPurpose, value: string): string {
  return purpose === 'pull' ? dockerConfigJson(registryHost, clusterId, value) : value;
}
