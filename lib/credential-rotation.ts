// A credential rotation as the control plane sends it over the session
// (CredentialRotation), checked before anything is written: a purpose the
// agent stores, and a value of the form a join gives that purpose (control and
// relay: the bare credential; pull: the dockerconfigjson for the platform
// registry). A problem names the field that is wrong, never the value: it is a
// secret.
import { z } from 'zod';
import { CREDENTIAL_PREFIX, CREDENTIAL_PURPOSES, credentialPattern, type CredentialPurpose } from './credential-secret.ts';

export type Rotation = { purpose: CredentialPurpose; value: string };
export type RotationCheck = { ok: true; rotation: Rotation } | { ok: false; problem: string };

const purposeSchema = z.enum(CREDENTIAL_PURPOSES);
const form = (purpose: CredentialPurpose) => `${CREDENTIAL_PREFIX[purpose]} followed by 32 or more letters and digits`;
const bare = (purpose: CredentialPurpose) => z.string().regex(credentialPattern(purpose), { message: `is not a ${purpose} credential (${form(purpose)})` });

const registryAuth = z
  .object({
    username: z.string({ message: 'is missing' }).min(1, { message: 'is empty' }),
    password: bare('pull'),
    auth: z.string({ message: 'is missing' }),
  })
  .refine((a) => a.auth === Buffer.from(`${a.username}:${a.password}`).toString('base64'), { message: 'is not base64 of username:password', path: ['auth'] });

/** A dockerconfigjson whose only registry is `registryHost`, with the pull credential for it. */
const pullConfig = (registryHost: string) =>
  z.object(
    {
      auths: z
        .record(z.string(), registryAuth, { message: 'is not an object of registries' })
        .refine((auths) => Object.keys(auths).length === 1 && registryHost in auths, {
          message: `must name exactly one registry, ${registryHost} (controlPlane.registryHost), which this cluster pulls the platform's images from`,
        }),
    },
    { message: 'expected a JSON object with "auths"' },
  );

/** auths["registry.example"].password */
const where = (path: PropertyKey[]): string =>
  path.length ? `${path.map((k, i) => (/^[A-Za-z_]\w*$/.test(String(k)) ? `${i ? '.' : ''}${String(k)}` : `[${JSON.stringify(String(k).slice(0, 60))}]`)).join('')} ` : '';

/** Checks a rotation for a cluster that pulls from `registryHost`. */
export function checkRotation(r: { purpose: string; value: string }, registryHost: string): RotationCheck {
  const purpose = purposeSchema.safeParse(r.purpose);
  if (!purpose.success) return { ok: false, problem: `the purpose is not one this agent stores (${CREDENTIAL_PURPOSES.join(', ')})` };
  const p = purpose.data;
  if (p !== 'pull') {
    const v = bare(p).safeParse(r.value);
    return v.success ? { ok: true, rotation: { purpose: p, value: v.data } } : { ok: false, problem: `the value ${v.error.issues[0]!.message}` };
  }
  let json: unknown;
  try {
    json = JSON.parse(r.value);
  } catch {
    // JSON.parse's own message quotes the text, which is the secret
    return { ok: false, problem: 'the value is not JSON (a pull credential comes as a kubernetes.io/dockerconfigjson)' };
  }
  const v = pullConfig(registryHost).safeParse(json);
  if (!v.success) {
    const issue = v.error.issues[0]!;
    return { ok: false, problem: `the value is not a dockerconfigjson for ${registryHost}: ${where(issue.path)}${issue.message}` };
  }
  return { ok: true, rotation: { purpose: 'pull', value: r.value } };
}
