// The reasons /readyz gives, as phrases written here, never text the platform
// sent (a join refusal's message, the version policy's line, a name from GET
// /v1/info): whatever reads /readyz (a probe, a dashboard, a terminal) shows only
// what this agent chose to say. The agent's log line beside each has the details.

export const NEW_INSTALL_COMMAND = 'a used or expired token needs a new install command: open Clusters → New install command and run it as helm upgrade --install';

export const SEE_LOG = 'the agent log says why';

/** By the code the agent itself gave a join or discovery failure (JoinError.code). */
const JOIN_PHRASES: Record<string, string> = {
  token_used: `join token already used; ${NEW_INSTALL_COMMAND}`,
  token_expired: `join token expired; ${NEW_INSTALL_COMMAND}`,
  token_invalid: `join token invalid; ${NEW_INSTALL_COMMAND}`,
  unreachable: `cannot reach the control plane at controlPlane.apiHost (${SEE_LOG}: firewall, proxy, DNS or TLS)`,
  bad_info: 'GET /v1/info did not name the session address: check that controlPlane.apiHost is the rlmesh API',
  bad_response: "the control plane's join answer is incomplete: check that controlPlane.apiHost is the rlmesh API",
  untrusted_session_endpoint: `GET /v1/info named a session endpoint which the agent refuses (${SEE_LOG})`,
  registry_host_mismatch: `the control plane's registry is not controlPlane.registryHost, so the join token was not used (${SEE_LOG})`,
};

/** Why the join failed; `code` undefined: not a refusal but the Kubernetes side (Secrets, the join Lease). */
export function joinPhrase(code: string | undefined): string {
  if (code === undefined) return `join failed while reading or writing the credential Secrets or the join Lease (${SEE_LOG})`;
  return JOIN_PHRASES[code] ?? `the control plane refused the join (${SEE_LOG}); the agent retries`;
}

/** Why GET /v1/info failed. */
export const discoveryPhrase = (code: string | undefined): string => `cannot discover the session endpoint: ${(code && JOIN_PHRASES[code]) || SEE_LOG}`;

export const VERSION_REFUSED = `no live session to the control plane: it refused this agent's version (${SEE_LOG}, and which chart versions it supports)`;
