import { lenientDecode, parseUrl, redactor, redactUrl, urlSecrets } from '../../redact.js';
import { LedgerNeedsMigration, LedgerTooNew, NoLedgerYet, NotALedger } from '../no-ledger.js';

/**
 * SQLSTATEs worth retrying: the transaction did not commit and running it again can
 * succeed. 40001 serialization failure, 40P01 deadlock (another pod's batch locked the
 * same rows in another order), 57P01/57P02 the server is shutting down, 57P03 it is
 * starting (or in recovery after a failover), 53300 too many connections for now, 55P03 a
 * DBA's lock_timeout ran out while maintenance (VACUUM FULL, an index swap) held a table: the
 * statement was cancelled before it changed anything; so was one with 57014, cancelled by an
 * operator's pg_cancel_backend or the role's statement_timeout (most often while it waited
 * for such a lock): it failed the run at once, its running attempts aborted and charged again
 * after their lease. Class 08 (connection exceptions) is matched as a prefix. 57P05, 25P03
 * and 25P04: the server ended a session idle longer than the role's idle_session_timeout,
 * idle_in_transaction_session_timeout or (PostgreSQL 17) transaction_timeout. Its FATAL is
 * the answer to a statement sent just as the session timed out (a pooled session picked in
 * that moment), and the transaction rolled back with the session: run again on a new one it
 * succeeds. Not retried, the claim failed the pass (exit 1) and its running attempts' claims
 * waited for their lease, while the pods beside it waited for them.
 */
const TRANSIENT_SQLSTATES = new Set(['40001', '40P01', '57P01', '57P02', '57P03', '53300', '55P03', '57014', '57P05', '25P03', '25P04']);

/**
 * Of those, the ones a server that is up answers with: it cancelled the statement (its
 * statement_timeout, a lock_timeout, a deadlock or serialization failure) or ended a session
 * it found idle too long. Retried like the
 * rest, but no outage: a stop whose drain meets them fails (exit 1), as it does without a
 * stop, where a drain that cannot reach the server at all ends drained (PostgresLedgerError.unreachable).
 */
const ANSWERED_SQLSTATES = new Set(['40001', '40P01', '55P03', '57014', '57P05', '25P03', '25P04']);

/** Socket-level failures from node:net / node:dns while a server restarts or fails over. */
const TRANSIENT_ERRNOS = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

/**
 * pg's own messages for a connection that died under it (they carry no code). `timeout
 * expired`: a pg.Client's own connect that timed out (the run lock's session; the pool says
 * `Connection terminated due to connection timeout`). Not retried, the lock taken again after a
 * failover whose address was silent for a moment (or a DNS that did not answer) was lost at the
 * first try, 10 s after the cut, instead of retrying for its 30 s.
 */
const TRANSIENT_MESSAGE =
  /Connection terminated|connection error and is not queryable|timeout exceeded when trying to connect|Connection terminated due to connection timeout|^timeout expired\b/i;

/** Whether a failed ledger call may succeed if the transaction is run again. */
export function isTransient(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown; syscall?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (TRANSIENT_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code) || TRANSIENT_ERRNOS.has(code)) return true;
  // A Unix socket (host=/var/run/postgresql) whose server is stopped or not started yet: its
  // socket file is not there. Only a connect's: a TLS file the URL names (sslrootcert=) is no outage.
  if (code === 'ENOENT' && e.syscall === 'connect') return true;
  // Node 20 tries every address of a host name and throws an AggregateError.
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every(isTransient)) return true;
  return typeof e.message === 'string' && TRANSIENT_MESSAGE.test(e.message);
}

/** Where the ledger is, for messages: `host:port/db as user (schema s)`, never a password. */
export function describeTarget(url: string, schema: string, env: NodeJS.ProcessEnv = process.env): string {
  try {
    const u = parseUrl(url);
    if (u === undefined) throw new Error('not a URL');
    // As the driver reads it: `?host=` (a socket directory, or a list), `?port=` and `?user=`
    // win over the authority's, so the message names where it actually connected; what the
    // URL leaves out the driver takes from PGHOST, PGPORT, PGUSER and PGDATABASE.
    const param = (key: string): string => u.searchParams.get(key) ?? '';
    // parseUrl reads an empty host (`postgres://app@/db`) as localhost; the driver, as PGHOST.
    const noHost = /^\s*postgres(?:ql)?:\/\/(?:[^/?#]*@)?(?:[/?#]|$)/i.test(url);
    // A socket directory in the authority is percent-encoded (`@%2Fvar%2Frun%2Fpostgresql/db`):
    // named as the driver decodes it, the path it connected to.
    const host = param('host') || (noHost ? '' : lenientDecode(u.hostname)) || env.PGHOST || 'localhost';
    // A "%" that starts no %XX escape is itself, as the driver reads it (the config refuses one in
    // the database name; CRONSAFE_STATE_POSTGRES or a tool may not): the message named the
    // redacted URL, not the database.
    const username = param('user') || lenientDecode(u.username) || env.PGUSER || '';
    const db = lenientDecode(u.pathname.replace(/^\//, '')) || env.PGDATABASE || username || '(default database)';
    const user = username ? ` as ${username}` : '';
    return `${host}:${param('port') || u.port || env.PGPORT || '5432'}/${db}${user} (schema ${schema})`;
  } catch {
    return `${redactUrl(url)} (schema ${schema})`;
  }
}

/**
 * Remove every spelling of the URL's password (raw, percent-decoded) and the URL itself
 * from a message. pg does not put the password in its errors, but a wrapped error or a
 * DNS failure may quote the connection string; this is the last line of defence.
 */
export function scrub(message: string, url: string): string {
  return redactor(urlSecrets(url))(message.split(url).join(redactUrl(url)));
}

/**
 * An error leaving the PostgreSQL ledger: the message names what was done and where,
 * scrubbed of the password; `code` is the SQLSTATE or errno when there was one.
 */
export class PostgresLedgerError extends Error {
  override name = 'PostgresLedgerError';
  /** Transient because the server could not be reached (refused, lost, starting, stopping), not because it cancelled the statement. */
  readonly unreachable: boolean;
  constructor(
    message: string,
    readonly code?: string,
    readonly transient = false,
  ) {
    super(message);
    this.unreachable = transient && !(code !== undefined && ANSWERED_SQLSTATES.has(code));
  }
}

/**
 * What the driver says when the server asks for a password and the client has none: its SCRAM
 * code (`scram-sha-256`, the server's default since PostgreSQL 14) speaks of a "client password"
 * that "must be a string", the server (`password` auth) of an "empty password".
 */
const NO_PASSWORD = /client password must be a (?:non-empty )?string|empty password returned by client/;
const NO_PASSWORD_HINT =
  'the server asks for a password and none was given: put it in the URL (postgres://user:password@host/db, percent-encoded), or in PGPASSWORD';

/**
 * What the driver says when the URL asks for TLS and the server has none. With `sslmode=prefer`
 * (libpq's default, and what the driver's own warning suggests with `uselibpqcompat=true`) or
 * `allow`, libpq falls back to an unencrypted connection; the pg driver never does, so a URL
 * that worked with psql failed every start with this line alone.
 */
const NO_TLS = /The server does not support SSL connections/;

/** Why the driver asked for TLS (the URL's last sslmode, its ssl=, else PGSSLMODE), and what to write instead. */
export function noTlsHint(url: string, env: NodeJS.ProcessEnv = process.env): string {
  const params = parseUrl(url)?.searchParams;
  const mode = params?.getAll('sslmode').at(-1);
  const asked = mode
    ? `sslmode=${mode}`
    : params?.getAll('sslrootcert').at(-1) === 'system'
      ? 'sslrootcert=system'
      : params?.has('ssl')
        ? `ssl=${params.get('ssl') ?? ''}`
        : env.PGSSLMODE
          ? `sslmode=${env.PGSSLMODE}, from PGSSLMODE`
          : 'TLS';
  const fallback = mode ?? (params?.has('ssl') ? undefined : env.PGSSLMODE);
  const noFallback =
    fallback === 'prefer' || fallback === 'allow'
      ? `; the pg driver, unlike libpq, never falls back to an unencrypted connection (not with uselibpqcompat=true either)`
      : '';
  return `the connection asks for TLS (${asked}) and this server offers none${noFallback}: write sslmode=disable in the URL to connect without TLS, or enable TLS on the server`;
}

/**
 * What the server says to a write when it takes none (`cannot execute INSERT in a read-only
 * transaction`): it alone did not say what to change.
 */
const READ_ONLY_SERVER = '25006';

/**
 * Whether the server refused a write because it takes none now (25006). At start that is a
 * wrong URL or setting (exit 1 at once); once a run has written (its run lock is a write), it
 * is a failover under way: the old primary demoted and still behind the endpoint for a moment,
 * or a provider's read-only switch. The run's own calls then retry it as an outage
 * (PostgresExecutor, the run lock taken again) instead of failing the pass at once.
 */
export function isReadOnlyAnswer(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === READ_ONLY_SERVER;
}
const READ_ONLY_HINT =
  'the server takes no writes: state.postgres names a hot standby (a read replica), or default_transaction_read_only is on for the database or the role (as some providers set it when the disk quota is reached); point state.postgres at the primary, or turn it off';

/**
 * The server's words for a statement that ran past `statement_timeout` (57014, as an
 * operator's cancel): retried, but a timeout shorter than a statement of cronsafe's needs
 * (the first start's migration, a pod waiting for a sibling's) fails every try, and the
 * message named no setting to change.
 */
const STATEMENT_TIMEOUT = /canceling statement due to statement timeout/;

/**
 * The errors of the migration's statements (migrate.ts marks them), or of its transaction
 * (`migrate`). The hint is for them only: a claim or a write cancelled mid-run by the same
 * timeout is retried and most often goes through, and its retry warning said to raise a
 * setting that the run did not need raised.
 */
const MIGRATION_ERRORS = new WeakSet<object>();
export function inMigration(err: unknown): unknown {
  if (typeof err === 'object' && err !== null) MIGRATION_ERRORS.add(err);
  return err;
}
/**
 * The run lock's start given up while the timeout cancelled it at each try (its own few
 * short statements, before any migration: a timeout of 1 ms): the setting is too short for
 * cronsafe's start as surely as for the migration, and was not named. Marked as the
 * migration's errors are.
 */
export const givenUpAtStart = inMigration;
const ofMigration = (err: unknown, what: string): boolean => what === 'migrate' || (typeof err === 'object' && err !== null && MIGRATION_ERRORS.has(err));
const STATEMENT_TIMEOUT_HINT =
  "statement_timeout, set for the role, the database or in the URL's options, is shorter than cronsafe's statements need: raise it (ALTER ROLE <role> SET statement_timeout = '30s') or reset it for the role";

/**
 * What the server says to a role without a privilege it needs on the ledger (`permission
 * denied for table meta`): the table, not the privilege, so a DBA who had granted SELECT on
 * it did not know what was missing (DELETE, for retention and the stop records).
 */
const DENIED_ON_LEDGER = /permission denied for (?:schema|table|relation) /;
const deniedHint = (schema: string): string =>
  `the role needs USAGE on schema ${schema} and SELECT, INSERT, UPDATE and DELETE on all its tables (status, plan and dead-letter list: SELECT): ` +
  `GRANT USAGE ON SCHEMA ${schema} TO <role>; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO <role> (docs/postgres.md)`;

/**
 * Normalise a driver error into a PostgresLedgerError with a scrubbed message. `transient`:
 * whether it was retried as an outage (a failover's read-only answer is, mid-run).
 */
export function ledgerError(err: unknown, what: string, url: string, schema: string, prefix = '', transient = isTransient(err)): PostgresLedgerError {
  const e = err as { message?: unknown; code?: unknown; errors?: unknown };
  let message = typeof e?.message === 'string' && e.message !== '' ? e.message : String(err);
  // AggregateError's own message is empty; its parts say what happened.
  if (Array.isArray(e?.errors) && e.errors.length > 0) {
    message = e.errors.map((x: unknown) => String((x as { message?: unknown } | null)?.message ?? x)).join('; ');
  }
  const code = typeof e?.code === 'string' ? e.code : undefined;
  if (NO_PASSWORD.test(message)) message += ` (${NO_PASSWORD_HINT})`;
  if (NO_TLS.test(message)) message += ` (${noTlsHint(url)})`;
  if (code === READ_ONLY_SERVER) message += ` (${READ_ONLY_HINT})`;
  if (code === '57014' && STATEMENT_TIMEOUT.test(message) && ofMigration(err, what)) message += ` (${STATEMENT_TIMEOUT_HINT})`;
  // Not a step that says what it needs itself (migrate.ts: CREATE, ownership).
  if (code === '42501' && DENIED_ON_LEDGER.test(message) && !message.includes('the role needs')) message += ` (${deniedHint(schema)})`;
  const text = `${prefix}${what} on PostgreSQL ${describeTarget(url, schema)}: ${message}${code ? ` [${code}]` : ''}`;
  return new PostgresLedgerError(scrub(text, url), code, transient);
}

/**
 * The ledger's own states (no ledger yet, one to migrate, not a ledger, too new): callers
 * decide on their class (open.ts: a config error, a reader's "no ledger yet", the daemon's
 * end), so a re-throw keeps it (and NotALedger's key), with where in its message as
 * ledgerError says it. Undefined for any other error.
 */
export function locatedLedgerState(err: unknown, what: string, url: string, schema: string): Error | undefined {
  if (!(err instanceof NoLedgerYet || err instanceof LedgerNeedsMigration || err instanceof NotALedger || err instanceof LedgerTooNew)) return undefined;
  err.message = ledgerError(err, what, url, schema).message;
  return err;
}
