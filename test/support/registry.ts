// Reads from the local registry the way a registry client does: ask, get a
// token challenge (test/cluster/up runs it with token auth), fetch a token
// from the realm (anonymously, or with Basic credentials), ask again.
import { readFileSync } from 'node:fs';
import { clusterInfo, registryAuthFile } from './cluster.ts';

export type RegistryCredentials = { username: string; password: string };

/** The publisher account of the local registry (registry-auth.json). */
export function publisher(): RegistryCredentials {
  const auths = (JSON.parse(readFileSync(registryAuthFile(), 'utf8')) as { auths: Record<string, { auth: string }> }).auths;
  const [username, ...rest] = Buffer.from(Object.values(auths)[0]!.auth, 'base64').toString('utf8').split(':');
  return { username: username!, password: rest.join(':') };
}

export type TokenAnswer = { status: number; token?: string; access: { name: string; actions: string[] }[]; message?: string };

/** A token for `scope` from the realm the registry names, and the access it carries. */
export async function registryToken(scope: string, creds?: RegistryCredentials): Promise<TokenAnswer> {
  const challenge = await fetch(`http://${clusterInfo().registry}/v2/`);
  const header = challenge.headers.get('www-authenticate') ?? '';
  const param = (k: string) => new RegExp(`${k}="([^"]*)"`).exec(header)?.[1];
  const realm = param('realm');
  if (challenge.status !== 401 || !realm) throw new Error(`the registry did not ask for a token (status ${challenge.status}, www-authenticate ${JSON.stringify(header)})`);
  const url = `${realm}?service=${encodeURIComponent(param('service') ?? '')}&scope=${encodeURIComponent(scope)}`;
  const res = await fetch(url, creds ? { headers: { authorization: `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}` } } : {});
  const body = (await res.json()) as { token?: string; errors?: { message: string }[] };
  if (!body.token) return { status: res.status, access: [], message: body.errors?.map((e) => e.message).join('; ') ?? '' };
  const claims = JSON.parse(Buffer.from(body.token.split('.')[1]!, 'base64url').toString('utf8')) as { access: TokenAnswer['access'] };
  return { status: res.status, token: body.token, access: claims.access };
}

/** GET /v2/<repository>/<path> with a token for pulling that repository. */
export async function registryGet(repository: string, path: string, opts: { accept?: string; creds?: RegistryCredentials } = {}): Promise<Response> {
  const t = await registryToken(`repository:${repository}:pull`, opts.creds);
  return fetch(`http://${clusterInfo().registry}/v2/${repository}/${path}`, {
    headers: { ...(opts.accept ? { accept: opts.accept } : {}), ...(t.token ? { authorization: `Bearer ${t.token}` } : {}) },
  });
}
