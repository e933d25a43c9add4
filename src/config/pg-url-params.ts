import { queryParams } from '../ledger/pg-url-query.js';

/**
 * state.postgres's query parameters that the pg driver reads as numbers, and libpq's that
 * take an integer, checked when the config is read: a bad one is exit 78 naming the
 * parameter, not a failure at the first connect (exit 1 after contacting the server) or a
 * value ignored in silence. Only the value is shown: these parameters are never secrets,
 * and the URL, with its password, is not quoted.
 */

/** The largest value PostgreSQL's integer settings take (and a Node timer's, in ms). */
const INT_MAX = 2_147_483_647;

/** A whole number as the pg driver reads it (parseInt for the server's settings, a Node timer's Number for its own): digits, blanks around. */
const WHOLE = /^\s*\+?\d+\s*$/;

/**
 * The driver sends these to the server at connect, as `String(parseInt(value, 10))`: `abc`
 * was `NaN`, which the server refused (22023) at every connect, exit 1 once the retries gave
 * up; `30s` was 30 (ms), not 30 s as libpq and the server read it.
 */
const SERVER_TIMEOUTS = ['statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout'];

/**
 * libpq's integer parameters (seconds or counts, keepalives 0 or 1). The pg driver does not read
 * them from the URL (cronsafe gives a connect 10 s and turns TCP keepalives on itself), but
 * libpq, psql and other tools given the same URL refuse a value that is no integer.
 */
const LIBPQ_INTEGERS = ['connect_timeout', 'keepalives', 'keepalives_idle', 'keepalives_interval', 'keepalives_count', 'tcp_user_timeout'];
/** As libpq's parse_int_param reads one: blanks around an optionally signed run of digits. */
const LIBPQ_INTEGER = /^\s*[+-]?\d+\s*$/;

const shown = (value: string): string => JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);

/** What is wrong with one parameter's value, or undefined. An empty value is none, as the driver reads it. */
function paramProblem(key: string, value: string): string | undefined {
  if (value === '') return undefined;
  if (SERVER_TIMEOUTS.includes(key)) {
    const sent = parseInt(value, 10);
    const refused = Number.isNaN(sent) || sent < 0 || sent > INT_MAX;
    if (WHOLE.test(value) && !refused) return undefined;
    const read = refused
      ? 'the pg driver sends a value the server refuses at every connect (22023)'
      : `the pg driver reads only its leading digits (${sent} ms here), not a unit as libpq does`;
    return `expected ?${key}= to be a whole number of milliseconds from 0 to ${INT_MAX}, got ${shown(value)}: ${read}`;
  }
  if (key === 'query_timeout') {
    // The driver's own timer: `0`, like any value not from 1 to 2^31-1, is a timer of 1 ms.
    if (WHOLE.test(value) && Number(value) >= 1 && Number(value) <= INT_MAX) return undefined;
    return `expected ?query_timeout= to be a whole number of milliseconds from 1 to ${INT_MAX}, got ${shown(value)}: the pg driver times each statement out after it, and after 1 ms for anything else`;
  }
  if (LIBPQ_INTEGERS.includes(key) && !LIBPQ_INTEGER.test(value)) {
    return `expected ?${key}= to be an integer, got ${shown(value)}: libpq refuses it (the pg driver cronsafe uses ignores ${key}, but the same URL given to psql fails)`;
  }
  return undefined;
}

/**
 * A `%` in the database name that starts no `%XX` escape (`jobs%zz`): libpq refuses the URL,
 * and the pg driver then re-reads the whole URL with such `%`s as themselves, so the name it
 * connects to is not the one meant. Errors showed the redacted URL, not what was wrong. Or
 * escapes that are no UTF-8 (`%C3` alone), which the driver cannot decode.
 */
function badEscape(url: string): string | undefined {
  const path = /^[^:]*:\/\/[^/?#]*(\/[^?#]*)?/s.exec(url)?.[1] ?? '';
  const bad = /%(?![0-9A-Fa-f]{2}).{0,2}/s.exec(path)?.[0];
  if (bad !== undefined) return `expected each "%" in the database name to start a %XX escape (two hex digits), got ${JSON.stringify(bad)}: write %25 for a "%" itself`;
  try {
    decodeURIComponent(path);
  } catch {
    // `%C3` alone: the driver's decodeURI threw `URI malformed` at every connect (exit 1).
    return `expected the database name's %XX escapes to spell UTF-8 text, got ${JSON.stringify(path.slice(1))}`;
  }
  return undefined;
}

/**
 * The URL as the pg driver parses it: one with a space or a `%` that starts no `%XX` escape
 * is encoded once more first (pg-connection-string), so that such a `%` is read as itself.
 */
function asDriverReadsIt(url: string): URL | undefined {
  const reencoded = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(url) ? encodeURI(url).replace(/%25(\d\d)/g, '%$1') : url;
  for (const candidate of [reencoded, reencoded.replace('@/', '@___DUMMY___/')]) {
    try {
      // A URL without a host (`user:pw@/db?host=/run/postgresql`) is read with a stand-in, as the driver does.
      return new URL(candidate);
    } catch {
      /* try the next */
    }
  }
  return undefined;
}

/**
 * A `%` in the user name or password that starts no `%XX` escape (`pw%zz`): libpq refuses
 * the URL (psql and other tools given it fail), and the pg driver re-reads the whole URL
 * with every such `%` as itself, encoding it once more: the URL's escapes that hold a letter
 * were then no longer decoded (`@%2Ftmp%2Fsock/db`, a socket directory, was looked up as a
 * host name). Neither is quoted: the password must not reach a log.
 */
function badUserinfoPercent(url: string): string | undefined {
  const authority = /^[^:]*:\/\/([^/?#]*)/s.exec(url)?.[1] ?? '';
  const at = authority.lastIndexOf('@');
  if (at < 0 || !/%(?![0-9A-Fa-f]{2})/.test(authority.slice(0, at))) return undefined;
  return 'expected each "%" in the user name and password to start a %XX escape (two hex digits; not shown: it may be the password): libpq refuses such a URL, and the pg driver then leaves its other escapes holding a letter (%2F) undecoded; write %25 for a "%" itself';
}

/**
 * A user name or password whose `%XX` escapes are no UTF-8 (`%C3` alone): the driver's
 * decodeURIComponent threw `URI malformed` at every connect (exit 1). Neither is quoted.
 */
function badUserinfoEscape(parsed: URL | undefined): string | undefined {
  try {
    decodeURIComponent(parsed?.username ?? '');
    decodeURIComponent(parsed?.password ?? '');
    return undefined;
  } catch {
    return "expected the user name's and password's %XX escapes to spell UTF-8 text (the pg driver cannot decode them), or a \"%\" itself written %25";
  }
}

/**
 * The port the driver connects to, the URL's `?port=` (the last one not empty) else its own:
 * `:0` (a URL takes it) or `?port=abc` passed validate and every run exited 1 at the connect
 * ("the port is not a number from 1 to 65535"). libpq refuses both too. PGPORT is left to
 * the connect (connection.ts portProblem): it is the environment's, not state.postgres's.
 */
function badPort(url: string, parsed: URL | undefined): string | undefined {
  const param = queryParams(url)
    .getAll('port')
    .filter((v) => v !== '')
    .at(-1);
  const port = param ?? parsed?.port ?? '';
  return port === '' || (/^\s*\d+\s*$/.test(port) && Number(port) >= 1 && Number(port) <= 65535) ? undefined : portMessage(port);
}

const portMessage = (port: string): string => `expected the port (the URL's, or its ?port= parameter) to be a number from 1 to 65535, got ${shown(port)}`;

/**
 * The URL's own port where the URL parser refuses it (`:70000`, `:abc`, `:-1`, `db:5432:5432`):
 * such a URL was refused as malformed with the hint to percent-encode "/", "?", "#" and "@"
 * in the password, which was not what was wrong. Said only where the host is the URL's for
 * sure (`hostCertain`: after the authority's last "@", or in a URL with no "@" at all): a raw
 * "/" in a password cuts the authority short, and what then follows a ":" is a piece of the
 * password, for which the hint is right.
 */
export function authorityPortProblem(url: string, hostCertain: (authority: string) => boolean): string | undefined {
  const authority = /^[^:]*:\/\/([^/?#]*)/s.exec(url)?.[1];
  if (authority === undefined || !hostCertain(authority)) return undefined;
  const port = /^(?:\[[^\]]*\]|[^:[\]]*):(.*)$/s.exec(authority.slice(authority.lastIndexOf('@') + 1))?.[1];
  if (port === undefined || port === '' || (/^\d+$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)) return undefined;
  return portMessage(port);
}

/**
 * `?ssl=` and `?binary=`, which the pg driver reads from the URL as strings: `ssl=true` or
 * `1` is on, `0` off, `no-verify` on without the certificate checked, and any other value a
 * string it takes as on, certificate checked: `ssl=false` (meant as off) connected with SSL
 * and failed at every run on a server without it (exit 1). Any `binary=` but an empty one
 * turns binary results on, `binary=false` included. Checked for the value the driver uses
 * (the last one); `ssl=` not when sslmode or a certificate file is given, which decide then.
 */
function badSwitches(params: URLSearchParams): string[] {
  const last = (key: string): string => params.getAll(key).at(-1) ?? '';
  const problems: string[] = [];
  const ssl = last('ssl');
  const decided = ['sslmode', 'sslcert', 'sslkey', 'sslrootcert'].some((k) => last(k) !== '');
  if (ssl !== '' && !decided && !['true', '1', '0', 'no-verify'].includes(ssl)) {
    problems.push(`expected ?ssl= to be true, 1, 0 or no-verify, got ${shown(ssl)}: the pg driver takes any other value as on (certificate checked); for no SSL write ssl=0 or sslmode=disable`);
  }
  const binary = last('binary');
  if (binary !== '' && !['true', '1'].includes(binary)) {
    problems.push(`expected ?binary= to be true or 1, got ${shown(binary)}: the pg driver takes any value as on; leave it out for text results`);
  }
  return problems;
}

/** Every problem of state.postgres's port, user name and password escapes, database name and query parameters (none: empty). */
export function postgresUrlProblems(url: string): string[] {
  const problems: string[] = [];
  const parsed = asDriverReadsIt(url);
  const port = badPort(url, parsed);
  if (port !== undefined) problems.push(port);
  const userinfo = badUserinfoPercent(url) ?? badUserinfoEscape(parsed);
  if (userinfo !== undefined) problems.push(userinfo);
  const escape = badEscape(url);
  if (escape !== undefined) problems.push(escape);
  const params = queryParams(url);
  problems.push(...badSwitches(params));
  const seen = new Set<string>();
  for (const [key, value] of params) {
    const problem = paramProblem(key, value);
    if (problem === undefined || seen.has(problem)) continue;
    seen.add(problem);
    problems.push(problem);
  }
  return problems;
}

/** C0 controls and DEL, but NUL (str() and `%00` are refused with their own words). */
const CONTROL = /[\x01-\x1f\x7f]/;
const CONTROL_NAMES: Record<string, string> = { '\t': 'a TAB', '\n': 'a line break (LF)', '\r': 'a carriage return (CR)', '\x7f': 'a DEL' };

/** Line breaks at the very end: a Secret's file as an editor or `echo` writes it. Taken off (schema-fields.ts). */
export const TRAILING_LINE_BREAKS = /[\r\n]+$/;

/**
 * A control character in a URL (a TAB pasted from a spreadsheet, a line break inside a value):
 * the URL parser drops TABs and line breaks wherever they are, so `/e<TAB>u` connected to
 * database `eu`, and a password or host with one was another; other controls reach the server.
 * Where it is (the user name, the password, the host, the database name, a parameter), never
 * the text around it: it may be the password. Undefined when there is none (line breaks at the
 * very end are taken off before: TRAILING_LINE_BREAKS).
 */
export function controlCharProblem(url: string): string | undefined {
  const at = url.search(CONTROL);
  if (at < 0) return undefined;
  const ch = url[at]!;
  const which = CONTROL_NAMES[ch] ?? `a control character (U+${ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')})`;
  return `expected no control character in it, found ${which} in ${urlPart(url, at)} (the URL parser drops TABs and line breaks: postgres://app@db/e<TAB>u connects to database eu; other controls reach the server); remove it (line breaks at the very end, as a Secret's file has, are taken off)`;
}

/** Which part of a postgres URL the character at `at` is in. */
function urlPart(url: string, at: number): string {
  const scheme = url.indexOf('://');
  if (scheme < 0 || at < scheme + 3) return 'the scheme';
  const start = scheme + 3;
  const rest = url.slice(start);
  const authorityEnd = start + (rest.search(/[/?#]/) < 0 ? rest.length : rest.search(/[/?#]/));
  if (at < authorityEnd) {
    const userinfoEnd = url.lastIndexOf('@', authorityEnd - 1);
    if (userinfoEnd < start || at > userinfoEnd) return 'the host or port';
    const colon = url.indexOf(':', start);
    return colon >= 0 && colon < userinfoEnd && at > colon ? 'the password' : 'the user name';
  }
  const query = url.indexOf('?', authorityEnd);
  const hash = url.indexOf('#', authorityEnd);
  if (hash >= 0 && at > hash) return 'the fragment';
  if (query < 0 || at < query) return 'the database name';
  const param = url.slice(query + 1, at + 1).split('&').at(-1) ?? '';
  const eq = param.indexOf('=');
  if (eq < 0) return 'a parameter\'s name';
  const key = param.slice(0, eq);
  return CONTROL.test(key) ? 'a parameter\'s name' : `the value of ?${key}=`;
}
