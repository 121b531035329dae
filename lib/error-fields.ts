// One way to turn anything thrown into words for a message, a log line or a
// status condition: the API server's Status message for a Kubernetes refusal,
// the service's error name and HTTP status for an S3 one, the low-level cause
// (ECONNREFUSED, a TLS failure) that undici/fetch keeps under `cause`, the
// message of a plain Error, and something readable for a non-Error throw.
// URL query strings and user info are cut from the text: a presigned URL's
// signature or a credential in a URL must never reach a log or an event.

/**
 * client-node's ApiException, recognized by its shape rather than its class:
 * importing the class would pull the whole Kubernetes client into every
 * bundle that reports an error, the egress proxy's among them.
 */
type ApiException = Error & { code: number; body: unknown; headers: unknown };
function isApiException(err: unknown): err is ApiException {
  return err instanceof Error && typeof (err as Partial<ApiException>).code === 'number' && 'body' in err && 'headers' in err;
}

type Thrown = {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  statusCode?: unknown;
  cause?: { code?: unknown; message?: unknown };
  $metadata?: { httpStatusCode?: unknown };
};

/** The HTTP status a Kubernetes API (or other HTTP client) error carries. */
export function statusCode(err: unknown): number | undefined {
  if (isApiException(err)) return err.code;
  const e = err as Thrown | undefined;
  if (typeof e?.statusCode === 'number') return e.statusCode;
  if (typeof e?.code === 'number') return e.code;
  return undefined;
}

/** What went wrong, in one line, without a secret. */
export function errorMessage(err: unknown): string {
  return redact(describe(err));
}

/** Fields for a log line: the message, and the HTTP status or system error code when there is one. */
export function errorFields(err: unknown): { err: string; status?: number; code?: string } {
  const status = statusCode(err);
  const code = systemCode(err);
  return { err: errorMessage(err), ...(status !== undefined ? { status } : {}), ...(code ? { code } : {}) };
}

function describe(err: unknown): string {
  if (isApiException(err)) return apiStatusMessage(err);
  if (typeof err === 'string') return err || 'an empty error';
  if (err === null || err === undefined || typeof err !== 'object') return String(err);
  const e = err as Thrown;
  const message = typeof e.message === 'string' && e.message ? e.message : typeof e.name === 'string' && e.name ? e.name : undefined;
  if (message === undefined) return err instanceof Error ? err.constructor.name : safeJson(err);
  const s3Status = e.$metadata?.httpStatusCode;
  if (typeof s3Status === 'number') return `${typeof e.name === 'string' ? e.name : 'S3Error'} (HTTP ${s3Status}): ${message}`;
  const cause = e.cause?.code ?? e.cause?.message;
  return typeof cause === 'string' && cause && !message.includes(cause) ? `${message} (${cause})` : message;
}

/** The Status message ("pods \"x\" is forbidden: exceeded quota: ..."), the cluster's own words. */
function apiStatusMessage(err: ApiException): string {
  let body: unknown = err.body;
  if (typeof body === 'string') {
    const raw = body;
    try {
      body = JSON.parse(raw);
    } catch {
      return raw || `HTTP ${err.code}`;
    }
  }
  const msg = (body as { message?: unknown } | undefined)?.message;
  return typeof msg === 'string' && msg ? msg : `HTTP ${err.code}`;
}

function systemCode(err: unknown): string | undefined {
  const e = err as Thrown | undefined;
  const code = typeof e?.code === 'string' ? e.code : e?.cause?.code;
  return typeof code === 'string' ? code : undefined;
}

function safeJson(v: object): string {
  try {
    return JSON.stringify(v).slice(0, 500);
  } catch {
    return Object.prototype.toString.call(v);
  }
}

const URL_SECRETS = /\b([a-z][a-z0-9+.-]*:\/\/)(?:[^\s/@'"]+@)?([^\s?#'"]*)\?[^\s#'")]*/gi;
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@'"]+@/gi;
const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/g;

function redact(text: string): string {
  return text.replace(URL_SECRETS, '$1$2?…').replace(URL_USERINFO, '$1').replace(BEARER, '$1 …');
}
