// Whether the agent is ready (/readyz): its credentials are valid and its
// session to the control plane is live. The ops server answers from the first
// second, long before the credentials and the session exist, so they are
// attached here as they come.
export class Readiness {
  /** why the credentials are not usable, or undefined once they are */
  credentialProblem: string | undefined = 'credentials not loaded yet';
  #session: { live: boolean; currentState: string } | undefined;
  #credentials: { ageSeconds: number } | undefined;

  attach(parts: { session?: { live: boolean; currentState: string }; credentials?: { ageSeconds: number } }): void {
    this.#session = parts.session ?? this.#session;
    this.#credentials = parts.credentials ?? this.#credentials;
  }

  readonly notReady = (): string | undefined =>
    this.credentialProblem ?? (this.#session?.live ? undefined : `no live session to the control plane (${this.#session?.currentState ?? 'not started'})`);

  /** seconds since the control credential in use last changed (0 before there is one) */
  readonly credentialAgeSeconds = (): number => this.#credentials?.ageSeconds ?? 0;
}
