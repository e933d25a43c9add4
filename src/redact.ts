/**
 * Secret redaction for messages and logs: a leaf module (no imports), so that every layer
 * (config, the PostgreSQL adapter, metrics) can use it without pulling in another.
 */

/**
 * Query parameters whose value may be a secret: libpq's `password`, and the tokens, keys
 * and signatures a push gateway behind a proxy may take (`?token=`, `?api_key=`, `?sig=`).
 */
const SECRET_PARAM = /([?&][^=&#]*(?:pass|pwd|token|secret|key|auth|sig|credential)[^=&#]*=)[^&#]*/gi;

/**
 * Replace the password of a URL with `***`, both in the userinfo
 * (`postgres://u:***@host/db`) and in a query parameter that may hold a secret
 * (`password=`, which libpq accepts, `token=`, `api_key=`, ...: SECRET_PARAM).
 * Anything else is returned unchanged, byte for byte.
 */
export function redactUrl(url: string): string {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)(.*)$/is.exec(url);
  if (!m) return url;
  const [, scheme = '', authority = '', rest = ''] = m;
  // userinfo ends at the LAST '@' of the authority (WHATWG URL), so a raw '@' in a password is covered.
  const at = authority.lastIndexOf('@');
  let auth = authority;
  if (at >= 0) {
    const userinfo = authority.slice(0, at);
    const colon = userinfo.indexOf(':');
    if (colon >= 0) auth = `${userinfo.slice(0, colon)}:***${authority.slice(at)}`;
  }
  return scheme + auth + rest.replace(SECRET_PARAM, '$1***');
}

/**
 * `new URL`, or undefined when it throws, also for libpq's `postgresql://user:pw@/db?host=
 * /socket` (userinfo and no host: the socket directory in the query), which WHATWG URLs
 * refuse: it is read with libpq's default host, localhost (`?host=` still wins for libpq).
 */
export function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    const m = /^(postgres(?:ql)?:\/\/[^/?#]*@)([/?#].*)?$/is.exec(url);
    if (!m) return undefined;
    try {
      return new URL(`${m[1]}localhost${m[2] ?? ''}`);
    } catch {
      return undefined;
    }
  }
}
