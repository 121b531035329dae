// How untrusted request text appears in log lines and answers: on one line,
// cut to 100 characters, and for a request target without the credentials
// it may carry. A presigned URL's signature sits in its query, and
// `user:pass@` in its authority; the proxy refuses the second and forwards
// the first, and neither may reach a log line, a metric or an answer.

/** Shows untrusted text (a requested host) safely on one line. */
export function shown(text: string): string {
  const clean = text.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > 100 ? `${clean.slice(0, 100)}…` : clean;
}

/**
 * A request target as the proxy may show it: scheme, host, port and path
 * kept; userinfo replaced by `<redacted>@`, a query by `?<redacted>`, a
 * fragment by `#<redacted>`. Works on every form a client can send:
 * `http://…` (any scheme), `host:port` (CONNECT) and `/path` (origin form).
 * The authority ends where the proxy's parser ends it (at `/`, `?` or `#`),
 * so whatever that parser would read as userinfo is what is hidden.
 */
export function shownTarget(target: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(target)?.[0] ?? '';
  const rest = target.slice(scheme.length);
  const authorityEnd = rest.search(/[/?#]/);
  let authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
  let tail = authorityEnd < 0 ? '' : rest.slice(authorityEnd);
  const at = authority.lastIndexOf('@');
  if (at >= 0) authority = `<redacted>@${authority.slice(at + 1)}`;
  const secretStart = tail.search(/[?#]/);
  if (secretStart >= 0) tail = `${tail.slice(0, secretStart)}${tail[secretStart]}<redacted>`;
  return shown(`${scheme}${authority}${tail}`);
}
