import * as z from 'zod';
import { assertFires, parseCron } from '../schedule/cron.js';
import { assertTimeZone } from '../schedule/zone.js';
import { describeValue } from './messages.js';
import { parseUrl, rawAtAfterAuthority } from '../redact.js';
import { systemRootCert } from '../ledger/pg-url-query.js';
import { authorityPortProblem, controlCharProblem, postgresUrlProblems, TRAILING_LINE_BREAKS } from './pg-url-params.js';
import { EMPTY_OR_DOT_SEGMENT, endsInLoneBackslash, hasEmptyOrDotSegment, LONE_BACKSLASH } from '../glob-backslash.js';
import { globProblem, negatesWhole, SLOW_EXTGLOB, slowExtglob } from '../globs.js';

// zod compiles a fast path per object schema (new Function) on its first parse; a config is
// parsed once per process, so compiling costs more than it saves (~8 ms of every start-up,
// docs/benchmarks.md). zod is used for nothing else.
z.config({ jitless: true });

// The leaf validators the config schema (schema.ts) is built of, each with its own error
// text; the formatter in messages.ts adds the key, the file and what was found.

/** Node clamps timers above 2^31-1 ms to 1 ms, so a longer timeout would fire at once. */
export const MAX_TIMER_SECONDS = 2_147_483;

export const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const int = (min: number, max?: number) => {
  const error = max === undefined ? `expected an integer >= ${min}` : `expected an integer from ${min} to ${max}`;
  const s = z.int({ error }).min(min);
  return max === undefined ? s : s.max(max);
};

/** Seconds: `positive` excludes 0; every value is capped so it is usable as a timer. */
export const seconds = (positive: boolean) => {
  const lo = positive ? '> 0' : '>= 0';
  const error = `expected a number of seconds ${lo} and <= ${MAX_TIMER_SECONDS}`;
  const s = z.number({ error }).max(MAX_TIMER_SECONDS);
  return positive ? s.positive() : s.nonnegative();
};

/**
 * No path, argv element or environment value can hold a NUL byte (C strings end there):
 * Node refuses one at its first use, which would be a `fatal:` or a spawn that fails for
 * every item on every run. The value is not shown: handler.env values may be secrets.
 */
export const noNul = [(v: string) => !v.includes('\0'), { error: 'expected no NUL byte ("\\0"): a path, an argument or an environment value cannot hold one' }] as const;

export const str = (what = 'a non-empty string') =>
  z
    .string({ error: `expected ${what}` })
    // abort: an empty value is one problem, said once; the checks added after str() (a
    // pattern, a URL) said it again in other words (`got ""`, then `got 0 characters ...`).
    .min(1, { abort: true })
    .refine(...noNul);

export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.map((v) => JSON.stringify(v)).join(', ')}` });

/** A refine's error text with the found value, as the formatter adds it for built-in checks. */
export const got = (expected: string) => (iss: { input?: unknown }) => `${expected}, got ${describeValue(iss.input)}`;

/**
 * Run a cross-key check even when a sibling key has an issue (zod skips it by default),
 * so one run reports every problem; but only on a mapping, since the check reads its
 * keys. Such checks see unvalidated values and must not trust their types.
 */
export const always = {
  when: (p: { value: unknown }) => typeof p.value === 'object' && p.value !== null && !Array.isArray(p.value),
};

/**
 * A raw '@' after the authority, not in a query parameter's value (redact.ts): a password
 * with a raw '@' and then '/', '?' or '#' (`u:p@ss/word@db/x`), which new URL and the driver
 * read as host `ss` and a database named `word@db/x`; the password would reach the
 * connection errors. `?application_name=etl@prod` is taken.
 */
const rawAtAfterHost = (v: string): boolean => rawAtAfterAuthority(/^[^:]*:\/\/[^/?#]*(.*)$/s.exec(v)?.[1] ?? '');

/**
 * A port the URL parser refuses (pg-url-params.ts), said as such, where the host is certain:
 * the authority holds the URL's last "@" before any raw "@" after it (rawAtAfterHost), or
 * the URL has none.
 */
const urlPortProblem = (v: string): string | undefined =>
  authorityPortProblem(v, (authority) => (authority.includes('@') ? !rawAtAfterHost(v) : !v.includes('@')));

/**
 * A URL as written: `scheme://` first. `new URL` also takes blanks in front and one slash
 * (`postgres:/u:pw@db/x`), which the driver then reads as something else (a database named
 * `u:pw@db/x` on localhost, a host named `base`).
 */
const asUrl = (v: string, protocols: string[]): URL | undefined => {
  const u = parseUrl(v);
  return u !== undefined && protocols.includes(u.protocol) && v.toLowerCase().startsWith(`${u.protocol}//`) && !rawAtAfterHost(v) ? u : undefined;
};
/**
 * A postgres URL read as written (asUrl). Checks of its query must ask it first: in a URL
 * refused as malformed, what follows a raw "?" may be a piece of the password, and a message
 * quoting a parameter's value would show it.
 */
export const wellFormedPostgresUrl = (v: string): boolean => asUrl(v, ['postgres:', 'postgresql:']) !== undefined;

/**
 * The refused URL is shown redacted, and a raw '/', '?', '#' or '@' in a password is what
 * made it malformed: said, since `postgres://app:***@db/x` looks well-formed.
 */
const ENCODE_HINT = ', with "/", "?", "#" and "@" in its user name and password percent-encoded (%2F, %3F, %23, %40)';
/**
 * A value with neither `://` nor `@` has no URL's parts to redact: it is likely a Secret's
 * other key (`secretKeyRef: {key: password}` where the URL was meant), the password itself,
 * which the error would put in the pod's log. It is described, not shown.
 */
const NOT_SHOWN = (v: string): string => `${v.length} character${v.length === 1 ? '' : 's'} with no "://" (not shown: it may be a password)`;
export const url = (protocols: string[], what: string) =>
  str(what).refine((v) => asUrl(v, protocols) !== undefined, {
    error: (iss) => {
      const v = typeof iss.input === 'string' ? iss.input : '';
      const withUser = v.includes('@') && protocols.some((p) => v.toLowerCase().startsWith(`${p}//`));
      if (typeof iss.input === 'string' && !v.includes('://') && !v.includes('@')) return `expected ${what}, got ${NOT_SHOWN(v)}`;
      return got(`expected ${what}${withUser ? ENCODE_HINT : ''}`)(iss);
    },
  });

/**
 * libpq's sslmode values, and the pg driver's own `no-verify`. The driver takes any other
 * (MySQL's `DISABLED`, a typo, a capital) as verify-full: a URL that meant to turn TLS off
 * then failed every start with "The server does not support SSL connections" (exit 1).
 */
export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'];

/**
 * libpq's list of hosts (`postgres://u@db1:5432,db2:5432/x?target_session_attrs=read-write`,
 * for a primary that moves between them). The pg driver connects to one host only: the list
 * was refused as a URL with a password to percent-encode, or, without ports, looked up as one
 * host name (`getaddrinfo ENOTFOUND db1,db2`, exit 1 after 5 s).
 */
const hostList = (v: string): boolean => {
  const authority = /^[^:]*:\/\/([^/?#]*)/s.exec(v)?.[1] ?? '';
  return authority.slice(authority.lastIndexOf('@') + 1).includes(',');
};
const HOST_LIST =
  'expected one host: the pg driver does not take libpq\'s list of hosts (db1,db2): name one endpoint that follows the primary (a Kubernetes Service, a virtual IP, a DNS name your failover updates)';

/**
 * Nothing after the authority's "@" but a query, a fragment or the end (`postgres://app:pw@`,
 * `...@${DB_HOST}` with DB_HOST empty): the pg driver takes an empty host only before "/"
 * (the local socket), and failed every run with "Invalid URL" (exit 1).
 */
const noHost = (v: string): boolean => /^[^:]*:\/\/[^/?#]*@(?:[?#]|$)/s.test(v);

/**
 * A percent-encoded NUL (`%00`, in a user, a database, a password or a parameter; `str`
 * refuses a raw one): the protocol's strings end at NUL, so the server refused the
 * connection ("invalid startup packet layout", class 08), which was retried as an outage,
 * and every run failed (exit 1).
 */
const hasNul = (v: string): boolean => v.includes('%00');

/**
 * A PostgreSQL URL (`url`) whose sslmode, when given, is one the driver reads as meant. Line
 * breaks at its very end (a Secret's file, `echo`'s) are taken off: the URL parser dropped
 * them, but the checks of its parameters and the sessions' settings read the last one with
 * them (`sslrootcert=system<LF>` was read as a file name); anywhere else a control character
 * is refused (controlCharProblem).
 */
export const postgresUrl = (what: string) =>
  z.preprocess(
    (v) => (typeof v === 'string' ? v.replace(TRAILING_LINE_BREAKS, '') : v),
    str(what)
      // Before the others: they read the URL as the parser does, without the character.
      .refine((v) => controlCharProblem(v) === undefined, { error: (iss) => got(controlCharProblem(String(iss.input)) ?? '')(iss), abort: true })
      .refine((v) => !hostList(v), { error: HOST_LIST, abort: true })
      .refine((v) => !hasNul(v), {
        error: got('expected no NUL character (%00) in it: PostgreSQL takes none in a user name, a password, a database name or a parameter'),
        abort: true,
      })
      .refine((v) => !noHost(v), {
        error: got('expected a host after "@" (or "/" then the database, for the local socket: postgres://user@/db)'),
        abort: true,
      })
      .refine((v) => urlPortProblem(v) === undefined, { error: (iss) => urlPortProblem(String(iss.input)) ?? '', abort: true })
      .pipe(postgresUrlOf(what)),
  );

const postgresUrlOf = (what: string) =>
  url(['postgres:', 'postgresql:'], what).superRefine((v, ctx) => {
    const modes = asUrl(v, ['postgres:', 'postgresql:'])?.searchParams.getAll('sslmode') ?? [];
    // An empty value is no mode: the driver reads it as none given, as libpq does.
    const bad = modes.find((m) => m !== '' && !SSL_MODES.includes(m));
    if (bad !== undefined) ctx.addIssue({ code: 'custom', message: `expected sslmode to be one of ${SSL_MODES.join(', ')}, got ${JSON.stringify(bad)}` });
    // libpq 16's `sslrootcert=system` (the system's CAs; some providers' URLs carry it) allows
    // only verify-full, as libpq does: a weaker mode would take any certificate.
    const mode = modes.at(-1) ?? '';
    if (bad === undefined && systemRootCert(v) && mode !== '' && mode !== 'verify-full') {
      ctx.addIssue({ code: 'custom', message: `expected sslmode=verify-full (or none) with sslrootcert=system, got sslmode=${JSON.stringify(mode)}: libpq refuses a weaker mode with the system's CAs` });
    }
    // Only in a URL read as written: in one refused above, what follows a raw "?" may be the password's.
    if (wellFormedPostgresUrl(v)) for (const message of postgresUrlProblems(v)) ctx.addIssue({ code: 'custom', message });
  });

/** Globs are matched against ids, which are relative and never climb out of the directory. */
export const glob = str('a glob relative to source.directory')
  .refine((g) => !g.startsWith('/') && !g.split('/').includes('..'), {
    error: got('expected a glob relative to source.directory (no leading "/", no ".." segment)'),
  })
  // A leading "!" negates the whole glob ("every file but this one"), not an exception to
  // the other globs as in .gitignore: include ["*.txt", "!bad.txt"] would take every file.
  // An extglob "!(...)" is no negation: it matches what its pattern does not, as meant.
  // Ids name files and never end in "/", so such a glob matches nothing, silently: an
  // exclude ["tmp/"] (as .gitignore writes a directory) left tmp/ in the scan.
  .refine((g) => !g.endsWith('/'), {
    error: got('expected a glob that can match a file: one ending in "/" matches none (ids name files); write "dir" to exclude a directory, "dir/**" for the files under it'),
  })
  // Ids have no empty and no "." segment: `a//b.txt` or `a/./b.txt` matched nothing, silently
  // (an exclude so written left its files in).
  .refine((g) => !hasEmptyOrDotSegment(g), {
    error: got(EMPTY_OR_DOT_SEGMENT),
  })
  // A lone backslash at the end escapes nothing: ids write a backslash of a name as `\\`,
  // so `tmp\` (a Windows-style directory) matched no item, silently: the exclude left tmp/ in.
  .refine((g) => !endsInLoneBackslash(g), {
    error: got(LONE_BACKSLASH),
  })
  .refine((g) => !negatesWhole(g), {
    error: got('expected a glob without a leading "!" (it would match every other file, not leave this one out): list the files to leave out in source.exclude'),
  })
  // Matching time exponential in the name, which anyone who can name a file chooses: a hang.
  .superRefine((g, ctx) => {
    const slow = slowExtglob(g);
    if (slow !== undefined) ctx.addIssue({ code: 'custom', message: `${SLOW_EXTGLOB} (got ${JSON.stringify(g)}, whose ${slow} can)` });
  })
  // Compiled as the scan compiles it, so that what validate takes the run can use.
  // Not for a lone backslash at the end, refused above: it fails to compile too, as
  // "Unterminated group", a group the glob does not have.
  .superRefine((g, ctx) => {
    if (endsInLoneBackslash(g)) return;
    const problem = globProblem(g);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `expected a glob the scan can compile: ${problem}` });
  });

/**
 * The schedule module's own parser and zone check, so `cronsafe validate` accepts exactly
 * what the scheduler runs: 5 fields or an @macro, field ranges, case-sensitive IANA zones
 * as Kubernetes' spec.timeZone wants them. Their messages already name the bad value.
 */
export const fromThrow = (check: (v: string) => unknown) => (v: string, ctx: z.RefinementCtx) => {
  // An empty string is str()'s `min(1)` error already: checked again, it was a second error
  // about the same value in other words.
  if (v === '') return;
  try {
    check(v);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
  }
};
export const cron = str('a cron expression').superRefine(fromThrow((v) => assertFires(parseCron(v))));
export const timeZone = str('an IANA time zone name').superRefine(fromThrow(assertTimeZone));

/**
 * A path in the config. A leading "~" is not the home directory (no shell expands it): it
 * was a directory named "~" beside the config, where a ledger or outputs were created.
 */
export const pathTo = (what: string) =>
  str(what).refine((v) => !/^~(\/|$)/.test(v), {
    error: got('expected a path without a leading "~": cronsafe does not expand it to the home directory (a shell would), so it names a directory "~" beside the config; write the absolute path, or ${HOME}/...'),
  });

/**
 * The path of a file cronsafe creates (state.sqlite, lock.path). One ending in "/" (or a
 * "." or ".." segment) names a directory: the file was created under the directory's name
 * (`lock.path: ./locks/` made a file `locks`).
 */
export const filePath = (example: string) =>
  pathTo('a file path').refine((v) => !v.endsWith('/') && !/(^|\/)\.\.?$/.test(v), {
    error: got(`expected the path of a file, not of a directory: add the file's name (e.g. <directory>/${example})`),
  });

/**
 * Kubernetes object names (DNS-1123 subdomain: every "."-separated label starts and ends
 * with a letter or digit, as the API server checks it) and namespaces (DNS-1123 label).
 * `a..b` or `a.-b` passed here and the API server refused the Lease (422) at every run.
 */
export const K8S_NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const flag = () => z.boolean({ error: 'expected true or false' });
