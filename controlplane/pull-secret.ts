// What the cluster receives for each credential purpose. The pull credential
// travels as the content of a kubernetes.io/dockerconfigjson Secret for the
// platform registry (user = cluster id); control and relay are bare tokens.
import type { CredentialPurpose } from './store.ts';

export function dockerConfigJson(registryHost: string, clusterId: string, password: string): string {
  const auth = Buffer.from(`${clusterId}:${password}`).toString('base64');
  return JSON.stringify({ auths: { [registryHost]: { username: clusterId, password, auth } } });
}

export function credentialWireValue(registryHost: string, clusterId: string, purpose: CredentialPurpose, value: string): string {
  return purpose === 'pull' ? dockerConfigJson(registryHost, clusterId, value) : value;
}
