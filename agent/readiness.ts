// Whether the agent is ready (/readyz): its credentials are valid and its
// session to the control plane is live. The ops server answers from the first
// second, long before the credentials and the session exist, so they are
// attached here as they come. Every reason is a phrase of the agent's own (readiness-phrases.ts).
import { VERSION_REFUSED } from './readiness-phrases.ts';

export class Readiness {
  /** why the credentials are not usable, or undefined once they are: a phrase of the agent's own */
  credentialProblem: string | undefined = 'credentials not loaded yet';
  #session: { live: boolean; currentState: string; versionSkew?: { verdict: string } | undefined } | undefined;
  #credentials: { ageSeconds: number } | undefined;

  attach(parts: { session?: { live: boolean; currentState: string; versionSkew?: { verdict: string } | undefined }; credentials?: { ageSeconds: number } }): void {
    this.#session = parts.session ?? this.#session;
    this.#credentials = parts.credentials ?? this.#credentials;
  }

  readonly notReady = (): string | undefined => {
    if (this.credentialProblem) return this.credentialProblem;
    if (this.#session?.live) return undefined;
    const skew = this.#session?.versionSkew;
    if (this.#session?.currentState === 'unsupported' && skew?.verdict === 'unsupported') return VERSION_REFUSED;
    return `no live session to the control plane (${this.#session?.currentState ?? 'not started'})`;
  };

  /** seconds since the control credential in use last changed (0 before there is one) */
  readonly credentialAgeSeconds = (): number => this.#credentials?.ageSeconds ?? 0;
}
