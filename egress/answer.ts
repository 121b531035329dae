// What the proxy answers a client whose request it does not relay (a refusal,
// a failure or a limit), as the proxy itself and the parent-proxy connector
// build it.

export type Decision = 'allowed' | 'refused' | 'dns-failure' | 'connect-failure' | 'connect-timeout' | 'limited' | 'client-closed';

export interface Answer {
  status: number;
  decision: Decision;
  rule: string;
  body: string;
  retryAfter?: boolean;
  /** close the client connection after the answer (a request body was left unread) */
  close?: boolean;
}
