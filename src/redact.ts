/**
 * Secret redaction for messages and logs: a leaf module (no imports), so that every layer
 * (config, the PostgreSQL adapter, metrics) can use it without pulling in another.
 */

/**
 * Query parameters whose value may be a secret: libpq's `password`, and the tokens, keys
 * and signatures a push gateway behind a proxy may take (`?token=`, `?api_key=`, `?sig=`).
 */
const SECRET_PARAM = /([?&][^=&#]*(?:pass|pwd|token|secret|key|auth|sig|credential)[^=&#]*=)[^&#]*/gi;

/** libpq's keyword form (`host=db user=app password=...`): the password's value, quoted or not. */
const KEYWORD_PASSWORD = /(^|\s)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)/gi;

/**
 * Replace the password of a URL with `***`, both in the userinfo
 * (`postgres://u:***@host/db`) and in a query parameter that may hold a secret
 * (`password=`, which libpq accepts, `token=`, `api_key=`, ...: SECRET_PARAM); and in what
 * a user may have written instead of a URL: libpq's keyword form (`password=***`), a
 * password with a raw '#', '/' or '?' (no URL: the userinfo is taken to the last '@'),
 * one slash too few, blanks in front.
 * Anything else is returned unchanged, byte for byte.
 */
export function redactUrl(url: string): string {
  const m = /^(\s*[a-z][a-z0-9+.-]*:\/*)([^/?#]*)(.*)$/is.exec(url);
  if (!m) return redactLoose(url.replace(KEYWORD_PASSWORD, '$1$2***'));
  const [, scheme = '', authority = '', rest = ''] = m;
  // userinfo ends at the LAST '@' of the authority (WHATWG URL), so a raw '@' in a password is covered.
  let at = authority.lastIndexOf('@');
  let [head, tail] = [authority, rest];
  if ((at < 0 && parseUrl(url.trim()) === undefined) || rawAtAfterAuthority(rest)) {
    // A raw '#', '/' or '?' in the password ended the authority early: not a URL, or
    // (with a raw '@' before it) one whose host and path are pieces of the password.
    [head, tail] = [authority + rest, ''];
    at = head.lastIndexOf('@');
  }
  let auth = head;
  if (at >= 0) {
    const userinfo = head.slice(0, at);
    const colon = userinfo.indexOf(':');
    // `https://TOKEN:@gw`, an empty password (curl's `-u TOKEN:`), is the token as the user too.
    if (colon >= 0 && colon === userinfo.length - 1 && tokenOnlyUserinfo(scheme, userinfo.slice(0, colon))) auth = `***:${head.slice(at)}`;
    else if (colon >= 0) auth = `${userinfo.slice(0, colon)}:***${head.slice(at)}`;
    else if (tokenOnlyUserinfo(scheme, userinfo)) auth = `***${head.slice(at)}`;
    // No `//` and no ':' in the userinfo: `app:pw@db:5432/x`, a URL without its scheme,
    // read as scheme `app:` and user `pw`.
    else if (!scheme.includes('/')) auth = `***${head.slice(at)}`;
  }
  return scheme + (auth + tail).replace(SECRET_PARAM, '$1***');
}

/**
 * What is no URL at all but holds one with its password (`//app:pw@db/x`, `postgres//app:pw@db/x`,
 * a URL in quotes: `"postgres://app:pw@db/x"`): from the ':' after the user (after the
 * first `//`, when one comes before it) to the last '@'. Else the text as it is.
 */
function redactLoose(text: string): string {
  const at = text.lastIndexOf('@');
  if (at < 0) return text;
  const before = text.slice(0, at);
  const slashes = before.indexOf('//');
  const colon = before.indexOf(':', slashes >= 0 && before.includes(':', slashes + 2) ? slashes + 2 : 0);
  return colon < 0 ? text : `${text.slice(0, colon + 1)}***${text.slice(at)}`;
}

/**
 * An http(s) URL's userinfo without a password (`https://TOKEN@gateway`, or an empty one:
 * `https://TOKEN:@gateway`, as urlSecrets reads it): how a token is
 * given to a push gateway behind a proxy (basic auth with the token as the user), so it is
 * a secret. A database URL's user (`postgres://app@db`) is not, and names who connects.
 */
function tokenOnlyUserinfo(scheme: string, userinfo: string): boolean {
  return userinfo !== '' && /^\s*https?:/i.test(scheme);
}

/**
 * A raw '@' after a URL's authority (`rest`: from its first '/', '?' or '#') that is not in
 * a query parameter's value: in the path, the fragment, or a parameter's name. It is a
 * password with a raw '@' and then '/', '?' or '#' (`u:p@ss/word@db/x`), whose pieces new
 * URL and the driver read as host and path. In a value (`?application_name=etl@prod`) it
 * is legal and meant.
 */
export function rawAtAfterAuthority(rest: string): boolean {
  const hash = rest.indexOf('#');
  if (hash >= 0 && rest.includes('@', hash)) return true;
  const [path = '', query] = (hash >= 0 ? rest.slice(0, hash) : rest).split(/\?(.*)/s);
  if (path.includes('@')) return true;
  return query !== undefined && query.split('&').some((param) => param.split('=')[0]!.includes('@'));
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

/** A query parameter's name that says its value may be a secret (as SECRET_PARAM). */
const SECRET_NAME = /pass|pwd|token|secret|key|auth|sig|credential/i;

/**
 * Every spelling of the secrets in a URL that a text may hold: the userinfo's password (an
 * http(s) URL's user when there is no password and it is TOKEN_MIN characters or more:
 * tokenOnlyUserinfo) and
 * the value of each query parameter that may be a secret (SECRET_PARAM), each as written
 * (percent-encoded), percent-decoded, and as a driver decodes a query ('+' a blank).
 */
/** The shortest user of an http(s) URL without a password that is taken for a token in handler output. */
const TOKEN_MIN = 12;

export function urlSecrets(url: string): string[] {
  const u = parseUrl(url.trim());
  if (u === undefined) return [];
  const found = [u.password, safeDecode(u.password), lenientDecode(u.password)];
  // Scrubbed from handler output only when long enough to be a token: a name given alone
  // (`https://cronsafe@gw`, `https://push@gw`) would take every `cronsafe` out of the log.
  if (u.password === '' && /^https?:$/.test(u.protocol) && safeDecode(u.username).length >= TOKEN_MIN) found.push(u.username, safeDecode(u.username), lenientDecode(u.username));
  for (const m of u.search.matchAll(/[?&]([^=&#]*)=([^&#]*)/g)) {
    if (SECRET_NAME.test(m[1]!)) found.push(m[2]!, safeDecode(m[2]!), safeDecode(m[2]!.replace(/\+/g, ' ')));
  }
  return found;
}

/**
 * Text with the secrets in it replaced by `***`. `cut`: the text was cut out of a longer one
 * at its start (a tail) or its end (a budget): a secret's last (first) characters there are
 * one too, or a cut through a password would show most of it.
 */
export type Redact = (text: string, cut?: 'start' | 'end') => string;

/** The Redact for no secrets. */
export const noRedact: Redact = (text) => text;

/**
 * A Redact for these secrets: each occurrence of one becomes `***`, the longest first (an
 * encoded spelling may hold the decoded one). Values shorter than 3 characters are left
 * alone: replacing every `a` of a handler's output would hide everything and protect nothing.
 */
export function redactor(secrets: Iterable<string>): Redact {
  const kept = [...secrets].filter((s) => s.length >= 3 && !/^\**$/.test(s));
  // Also as a JSON string spells it (a '"' or '\\' escaped): a log line (ctx.log's) or a
  // handler's JSON output holds it that way.
  const list = [...new Set([...kept, ...kept.map((s) => JSON.stringify(s).slice(1, -1))])].sort((a, b) => b.length - a.length);
  if (list.length === 0) return noRedact;
  return (text, cut) => {
    for (const s of list) if (text.includes(s)) text = text.split(s).join('***');
    return cut === undefined ? text : redactPiece(text, list, cut);
  };
}

/** A piece (3 characters or more) of a secret where the text was cut, as `***`: the longest that fits. */
function redactPiece(text: string, sorted: readonly string[], cut: 'start' | 'end'): string {
  for (let k = sorted[0]!.length - 1; k >= 3; k--) {
    for (const s of sorted) {
      if (s.length <= k) break;
      if (cut === 'start' && text.startsWith(s.slice(-k))) return `***${text.slice(k)}`;
      if (cut === 'end' && text.endsWith(s.slice(0, k))) return `${text.slice(0, -k)}***`;
    }
  }
  return text;
}

/**
 * A URL's user or password as sent: each `%XX` escape decoded, a `%` that starts none taken
 * as itself (a password from a Secret through `${VAR}`, `50%off`, is often not percent-encoded,
 * while `new URL` has encoded its blanks, `=` and `;`). The text as it is when the escapes
 * are no UTF-8.
 */
export function lenientDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/%(?![0-9A-Fa-f]{2})/g, '%25'));
  } catch {
    return s;
  }
}

/** decodeURIComponent, or the text as it is when it is not valid percent-encoding. */
export function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
