// The release's signatures, made by Sigstore's cosign with a key the release is
// given (a cosign key pair's private half, its password in COSIGN_PASSWORD, as
// cosign reads it). No transparency log: the signatures, attestations and blob
// bundles stand on the key alone, and are verified with its public half
// (--insecure-ignore-tlog=true). Keyless signing (Fulcio + Rekor) is the
// production path documented in docs/images-and-release.md.
//
// cosign comes from PATH, or from the project's build of it (test/support/build-cosign.sh).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findTool } from './tools.ts';

/** How cosign reaches the registry: its address scheme and its push credential (a docker config file). */
export type RegistryAccess = { plainHttp: boolean; authFile?: string };

export type CosignRun = { status: number; stdout: string; stderr: string };

/**
 * Runs cosign with `env` added to this process's environment, never prompting.
 * A docker config file given as `authFile` reaches cosign as DOCKER_CONFIG, a folder holding it as config.json.
 */
export function runCosign(args: string[], opts: { env?: NodeJS.ProcessEnv; authFile?: string; cosign?: string } = {}): CosignRun {
  const cosign = opts.cosign ?? findTool('cosign');
  const dockerConfig = opts.authFile ? mkdtempSync(join(tmpdir(), 'rlmesh-cosign-auth-')) : undefined;
  try {
    if (dockerConfig) symlinkSync(opts.authFile!, join(dockerConfig, 'config.json'));
    const r = spawnSync(cosign, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 256 * 2 ** 20,
      env: { ...process.env, COSIGN_YES: 'true', ...(dockerConfig ? { DOCKER_CONFIG: dockerConfig } : {}), ...opts.env },
    });
    if (r.error) throw new Error(`cosign ${args[0]} could not run (${r.error.message}): is ${cosign} an executable cosign?`, { cause: r.error });
    return { status: r.status ?? 1, stdout: r.stdout, stderr: r.stderr };
  } finally {
    if (dockerConfig) rmSync(dockerConfig, { recursive: true, force: true });
  }
}

/** The flags cosign needs to reach a registry over plain HTTP. */
export const registryFlags = (plainHttp: boolean): string[] => (plainHttp ? ['--allow-http-registry=true', '--allow-insecure-registry=true'] : []);

export class Signer {
  private readonly key: string;
  private readonly password: string;
  private readonly access: RegistryAccess;

  /**
   * Checks, before anything is built, that cosign is there and that the key opens with the
   * password in COSIGN_PASSWORD (which no message repeats).
   */
  constructor(key: string, access: RegistryAccess, env: NodeJS.ProcessEnv = process.env) {
    const password = env.COSIGN_PASSWORD;
    if (password === undefined) {
      throw new Error(
        `release: --signing-key ${key} is given but COSIGN_PASSWORD is not set; cosign reads the key's password from that variable. ` +
          `Set it to the password the key was made with (COSIGN_PASSWORD='' for a key without one) and run the release again.`,
      );
    }
    this.key = key;
    this.password = password;
    this.access = access;
    this.publicKey();
  }

  private cosign(args: string[], what: string): string {
    const r = runCosign(args, { env: { COSIGN_PASSWORD: this.password }, ...(this.access.authFile ? { authFile: this.access.authFile } : {}) });
    if (r.status !== 0) throw new Error(`release: cosign could not ${what}: ${r.stderr.trim() || r.stdout.trim()}`);
    return r.stdout;
  }

  /** The key's public half (PEM), which verifies everything signed here. */
  publicKey(): string {
    try {
      return this.cosign(['public-key', '--key', this.key], `read the signing key ${this.key}`);
    } catch (err) {
      throw new Error(`${(err as Error).message}\nThe release signs with a cosign private key (cosign generate-key-pair) whose password is in COSIGN_PASSWORD: check the file and the password.`, { cause: err });
    }
  }

  /** Signs `ref` (repository@digest: an image or a chart) in its registry. */
  sign(ref: string): void {
    this.cosign(['sign', '--key', this.key, '--tlog-upload=false', ...registryFlags(this.access.plainHttp), ref], `sign ${ref}`);
  }

  /** Attaches `predicateFile` to `ref` as a signed in-toto attestation of `type` (cosign's name: cyclonedx, slsaprovenance1, …). */
  attest(ref: string, type: string, predicateFile: string): void {
    this.cosign(['attest', '--key', this.key, '--tlog-upload=false', '--type', type, '--predicate', predicateFile, ...registryFlags(this.access.plainHttp), ref], `attest ${type} for ${ref}`);
  }

  /**
   * Signs the file `blob` into `<blob>.cosign.bundle`, whose path it returns: cosign v2's own bundle format
   * (its default), which `cosign verify-blob --key … --bundle …` checks offline. The newer Sigstore bundle
   * (--new-bundle-format, *.sigstore.json) cannot be verified without a trusted root from Sigstore's TUF
   * repository, or one written by hand.
   */
  signBlob(blob: string): string {
    const bundle = `${blob}.cosign.bundle`;
    this.cosign(['sign-blob', '--key', this.key, '--tlog-upload=false', '--bundle', bundle, blob], `sign ${blob}`);
    return bundle;
  }
}
