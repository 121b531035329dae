// The platform registry's token service (docker/distribution token auth): the
// registry sends a client without a valid bearer token here, and this answers
// with a short-lived token that carries what the client may do. It runs beside
// the control plane's API, not inside it, because the registry serves while the
// API is away, and it reads the API's stores rather than owning any state.
//
//   node controlplane/registry-auth/main.ts --listen 127.0.0.1:5001 --stores-dir DIR \
//     --signing-key KEY --signing-cert CERT --publisher-file FILE [--service S] [--issuer I] \
//     [--public REPO…] [--evaluation-repository REPO…]
//
// --public (repeatable; default rlmesh/charts/): repositories anyone pulls without credentials.
// --evaluation-repository (repeatable; default rlmesh-evaluations/): repositories every cluster's pull
// credential pulls beside the runtime ones. A value ending in "/" is a namespace. See grants.ts.
//
// GET /token?service=&scope=… with optional Basic credentials (docker, skopeo,
// helm, containerd's fallback), and POST /token with grant_type=password
// (containerd's first try). Prints {"url": …} on stdout when ready.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { accessFor, parseScope, policyFrom, type Identity, type Policy, type Scope } from './grants.ts';
import { Identifier, type Identified } from './identify.ts';
import { issueToken, loadSigner } from './token.ts';
import { errorFields } from '../../lib/error-fields.ts';

const TOKEN_TTL_SECONDS = 300;

function fail(message: string): never {
  process.stderr.write(`rlmesh registry token service: ${message}\n`);
  process.exit(2);
}

const { values: args } = parseArgs({
  options: {
    listen: { type: 'string', default: '127.0.0.1:0' },
    'stores-dir': { type: 'string' },
    'signing-key': { type: 'string' },
    'signing-cert': { type: 'string' },
    'publisher-file': { type: 'string' },
    service: { type: 'string', default: 'rlmesh-registry' },
    issuer: { type: 'string', default: 'rlmesh-registry-token' },
    public: { type: 'string', multiple: true },
    'evaluation-repository': { type: 'string', multiple: true },
  },
  strict: true,
});
for (const f of ['stores-dir', 'signing-key', 'signing-cert', 'publisher-file'] as const) if (!args[f]) fail(`--${f} is required`);
const m = /^(.+):(\d+)$/.exec(args.listen);
if (!m) fail(`--listen ${args.listen} is not host:port`);

let policy: Policy;
try {
  policy = policyFrom(args.public, args['evaluation-repository']);
} catch (err) {
  fail((err as Error).message);
}

const log = pino({ base: { component: 'registry-token' }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination(2));
const signer = loadSigner(args['signing-key']!, args['signing-cert']!, args.issuer, args.service);
const [pubUser, ...pubRest] = readFileSync(args['publisher-file']!, 'utf8').trim().split(':');
const identifier = new Identifier(args['stores-dir']!, { username: pubUser!, password: pubRest.join(':') });

function basic(req: IncomingMessage): { username: string; password: string } | undefined {
  const h = req.headers.authorization;
  if (!h?.startsWith('Basic ')) return undefined;
  const raw = Buffer.from(h.slice(6), 'base64').toString('utf8');
  const i = raw.indexOf(':');
  return i < 0 ? { username: raw, password: '' } : { username: raw.slice(0, i), password: raw.slice(i + 1) };
}

async function form(req: IncomingMessage): Promise<URLSearchParams> {
  let body = '';
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 64 * 1024) throw new Error('request body too large');
  }
  return new URLSearchParams(body);
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://token');
  if (url.pathname === '/healthz') return answer(res, 200, { ok: true });
  if (url.pathname !== '/token' || (req.method !== 'GET' && req.method !== 'POST')) return answer(res, 404, { errors: [{ code: 'NOT_FOUND', message: 'GET or POST /token' }] });

  let service: string | null;
  let scopes: string[];
  let creds: { username: string; password: string } | undefined;
  if (req.method === 'POST') {
    const f = await form(req);
    if (f.get('grant_type') !== 'password') return answer(res, 400, { error: 'unsupported_grant_type', error_description: 'only grant_type=password is served' });
    service = f.get('service');
    scopes = (f.get('scope') ?? '').split(' ').filter(Boolean);
    creds = { username: f.get('username') ?? '', password: f.get('password') ?? '' };
  } else {
    service = url.searchParams.get('service');
    scopes = url.searchParams.getAll('scope').flatMap((s) => s.split(' ')).filter(Boolean);
    creds = basic(req);
  }
  if (service !== null && service !== args.service) return answer(res, 400, { errors: [{ code: 'DENIED', message: `this token service serves ${args.service}, not ${service}` }] });

  const parsed = scopes.map(parseScope);
  if (parsed.some((s) => s === undefined)) return answer(res, 400, { errors: [{ code: 'DENIED', message: `malformed scope in ${JSON.stringify(scopes)}: expected type:name:actions` }] });

  const id: Identified = creds ? identifier.identify(creds.username, creds.password) : { ok: true, who: { kind: 'anonymous' } };
  if (!id.ok) {
    log.warn({ user: creds?.username, scopes }, `refused: ${id.why}`);
    return answer(res, 401, { errors: [{ code: 'UNAUTHORIZED', message: `the registry refused these credentials: ${id.why}` }] });
  }
  const access = accessFor(id.who, parsed as Scope[], policy);
  const subject = subjectOf(id.who);
  const token = issueToken(signer, subject, access, TOKEN_TTL_SECONDS);
  log.info({ identity: id.who.kind, ...('clusterId' in id.who ? { clusterId: id.who.clusterId } : {}), requested: scopes, granted: access.map((a) => `${a.name}:${a.actions.join(',')}`) }, 'token issued');
  const issuedAt = new Date().toISOString();
  return answer(res, 200, req.method === 'POST' ? { access_token: token, expires_in: TOKEN_TTL_SECONDS, issued_at: issuedAt } : { token, access_token: token, expires_in: TOKEN_TTL_SECONDS, issued_at: issuedAt });
}

const subjectOf = (who: Identity): string => ('clusterId' in who ? `${who.kind}:${who.clusterId}` : who.kind);

const server = createServer((req, res) => {
  handle(req, res).catch((err: unknown) => {
    log.error(errorFields(err), 'token request failed');
    if (!res.headersSent) answer(res, 500, { errors: [{ code: 'UNKNOWN', message: 'the token service failed; see its log' }] });
  });
});
server.listen(Number(m[2]), m[1], () => {
  const a = server.address() as { address: string; port: number };
  process.stdout.write(`${JSON.stringify({ url: `http://${a.address}:${a.port}/token` })}\n`);
});
for (const s of ['SIGTERM', 'SIGINT'] as const) process.once(s, () => server.close(() => process.exit(0)));
