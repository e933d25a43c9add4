import pg from 'pg';
import { backoffDelayMs } from '../backoff.js';
import { isReadOnlyAnswer, isTransient, ledgerError, locatedLedgerState, type PostgresLedgerError } from './errors.js';
import { LedgerOwnedByAnotherJob } from '../identity.js';
import { StoppedBeforeLedger } from '../run-lock.js';
import type { NamedQuery, Query } from './query.js';
import { coerceError } from '../../errors.js';
import { killableSocket } from './socket.js';
import { decodedParam, queryParts, systemRootCert } from '../pg-url-query.js';

/** How long a transient failure is retried before the call gives up (DESIGN: a failover). */
export const RETRY_BUDGET_MS = 30_000;
/** At start a database that is down is reported quickly: the Job retries the pod anyway. */
export const START_BUDGET_MS = 5_000;
/** Backoff between retries: 100 ms doubling to 2 s, with equal jitter (see backoff.ts). */
const RETRY_BACKOFF = { backoffMs: 100, backoffMaxMs: 2_000 };

export interface PostgresOptions {
  /** postgres:// URL (state.postgres). Never logged: messages use describeTarget/redactUrl. */
  url: string;
  /** state.schema (a checked identifier). */
  schema: string;
  /** Transient errors are retried this long per call. Default RETRY_BUDGET_MS. */
  retryBudgetMs?: number;
  /** The same, while opening. Default START_BUDGET_MS. */
  startBudgetMs?: number;
  /** Connections in the pool. Default 4: the runner makes a few calls at a time. */
  poolMax?: number;
  /** Sessions refuse writes (default_transaction_read_only), and open() does not migrate. */
  readOnly?: boolean;
  /**
   * An operator's write command (requeue, dead-letter retry): its sessions wait for a lock
   * on the ledger's tables at most READ_LOCK_TIMEOUT_MS, as a reader's do, and then fail
   * naming the holders. Without it they waited silently for as long as a `LOCK TABLE`,
   * `VACUUM FULL` or hung migration held it (on SQLite the same command fails after 5 s).
   */
  operator?: boolean;
  /** Told before each retry (logging). */
  onRetry?: (info: { what: string; attempt: number; delayMs: number; error: PostgresLedgerError }) => void;
}

/**
 * int8 comes back from pg as a string (it may not fit a double); every bigint in the
 * ledger is epoch ms, a size or a count, all far below 2^53, so convert once, here,
 * and refuse anything that would lose precision rather than round it silently.
 */
function parseInt8(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new RangeError(`bigint ${text} from the ledger is beyond 2^53`);
  return n;
}
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary' ? parseInt8 : (pg.types.getTypeParser(oid, format) as (text: string) => unknown)) as typeof pg.types.getTypeParser,
};

/**
 * Every session reads committed, whatever a DBA made the default (REPEATABLE READ or
 * SERIALIZABLE for the database or the role): the migration and the run lock's join decision
 * read rows after waiting for a lock, and must see what was committed while they waited, not
 * a snapshot from before. (`\ `: a blank inside a value of `options`.)
 */
const READ_COMMITTED = 'default_transaction_isolation=read\\ committed';

/**
 * Arrays sent as text (numberArray, and node-postgres's own for a JS array) write a null
 * element as `NULL`; with `array_nulls = off` (a role's or database's setting, kept for old
 * clients) the server reads it as the string "NULL", and every pass failed at its first
 * discovery: `invalid input syntax for type bigint: "NULL" [22P02]` (exit 1).
 */
const ARRAY_NULLS = 'array_nulls=on';

/**
 * How long a read-only session (status, dead-letter list, plan, schedule, requeue's read)
 * waits for a lock on the ledger's tables: another session's `LOCK TABLE`, a migration or
 * VACUUM FULL left hanging. Without it the command waited silently for as long as the lock
 * was held; it now fails, naming the sessions that hold the locks (lockHolders).
 */
export const READ_LOCK_TIMEOUT_MS = 5_000;

/**
 * Connection settings shared by the pool and the run lock's dedicated session. `settings`:
 * server settings for the session (`-c name=value` at connect: no extra round trip).
 */
export function clientConfig(opts: PostgresOptions, settings: readonly string[] = []): pg.ClientConfig {
  const all = [
    READ_COMMITTED,
    ARRAY_NULLS,
    ...(opts.readOnly ? ['default_transaction_read_only=on'] : []),
    ...(opts.readOnly || opts.operator ? [`lock_timeout=${READ_LOCK_TIMEOUT_MS}`] : []),
    ...settings,
  ];
  const { url, options } = takeOptions(systemCAs(opts.url));
  // Ours last: for a setting given twice the server keeps the last `-c`.
  const merged = [options, ...all.map((x) => `-c ${x}`)].filter((x) => x !== '').join(' ');
  return {
    connectionString: url,
    application_name: 'cronsafe',
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
    // A host name is looked up in a child that a connect timeout kills (socket.ts).
    stream: killableSocket,
    types,
    ...(merged !== '' ? { options: merged } : {}),
  };
}

/**
 * The URL's own `options=` (a provider's endpoint id, a search_path), and the URL without it.
 * pg lets a connection string's parameters win over the config's, so left in the URL it
 * would replace the sessions' settings (the claim session's plans, a reader's read-only).
 * Given twice, the last counts (as pg and libpq read it). Without it, PGOPTIONS, which pg
 * reads only when no options are given: ours would otherwise drop it from some sessions.
 */
function takeOptions(url: string): { url: string; options: string } {
  const fromEnv = process.env.PGOPTIONS ?? '';
  const query = queryParts(url);
  if (query === undefined) return { url, options: fromEnv };
  // The other parameters stay as written (queryParts).
  const kept: string[] = [];
  let options: string | undefined;
  for (const part of query.parts) {
    const [key, value] = decodedParam(part) ?? [];
    if (key === 'options') options = value;
    else kept.push(part);
  }
  if (options === undefined) return { url, options: fromEnv };
  // `options=` (empty) is none, for pg too.
  return { url: query.rebuild(kept), options: options || fromEnv };
}

/**
 * libpq 16's `sslrootcert=system` (verify the server against the system's CAs) as the driver
 * does that: no sslrootcert (it read `system` as a file path and failed every start with
 * ENOENT), and sslmode=verify-full, which the driver verifies against Node's CAs. The config
 * refuses a weaker sslmode beside it (schema-fields.ts), as libpq does.
 */
function systemCAs(url: string): string {
  const query = systemRootCert(url) ? queryParts(url) : undefined;
  if (query === undefined) return url;
  const kept = query.parts.filter((part) => !['sslrootcert', 'sslmode'].includes(decodedParam(part)?.[0] ?? ''));
  return query.rebuild([...kept, 'sslmode=verify-full']);
}

/**
 * Why the driver cannot connect to the port it would use (the URL's, its `?port=`, else
 * PGPORT, else 5432), or undefined. net.connect throws at once on a port that is not a
 * number from 0 to 65535 (`?port=abc`, `PGPORT=99999`), and pg 8's client then never ends
 * (end() waits for a close that never comes): the process exited 13 with no message.
 * `port`: a client's, as the driver computed it; asked before its first connect.
 */
export function portProblem(port: number): string | undefined {
  if (Number.isInteger(port) && port >= 1 && port <= 65535) return undefined;
  return 'the port is not a number from 1 to 65535 (the URL\'s port, its ?port= parameter, else PGPORT)';
}

/**
 * The hot paths run on dedicated sessions, one statement at a time in autocommit, each
 * statement prepared once (docs/postgres.md, "Claims"):
 * - `claims`: the claim loop's claims (with the completions of the slots they refill) and
 *   sweeps;
 * - `discovery`: the scan's inserts and checks of known ids.
 * `synchronous_commit = off`: a statement returns without waiting for its WAL flush (~2.7
 * ms on a local disk), which would otherwise be paid every few items. Only a crash of the
 * database server can forget such commits, never a pod crash, and only the last ~600 ms of
 * them (3 x wal_writer_delay); what that means for each is in SharedPassLedger and
 * docs/postgres.md. Their statements are planned once, generically (parsing and planning a
 * claim cost more than running it), so these sessions allow no plan that reads the table
 * past an index: every one of their statements reaches rows by index, and a plan made
 * while the table was small must stay right once it is large.
 */
const BY_INDEX = ['enable_seqscan=off', 'enable_hashjoin=off', 'enable_mergejoin=off'];
export const SESSIONS = {
  claims: ['synchronous_commit=off', ...BY_INDEX],
  discovery: ['synchronous_commit=off', ...BY_INDEX],
} as const;
export type SessionName = keyof typeof SESSIONS;

/**
 * A statement that waits for a lock (an operator's LOCK TABLE, VACUUM FULL, an index build)
 * stays queued on the server after its client is gone: a pod SIGKILLed, or one that left at
 * the end of its grace period. Once the lock is released it ran all the same, so a dead pod's
 * claim charged attempts to items that never started. With this check (PostgreSQL 14+) the
 * server polls the socket of a running statement every second and ends it once the client
 * has hung up. A server without the setting skips it (no error, as a startup `-c` would give),
 * and its statements run as before. Asked of current_setting, not pg_settings: a DBA may
 * revoke that view from PUBLIC, and every connection would fail.
 */
export const CHECK_CLIENT = `SELECT set_config('client_connection_check_interval', '1000', false) WHERE current_setting('client_connection_check_interval', true) IS NOT NULL`;

/**
 * The least `idle_in_transaction_session_timeout` the pooled sessions keep. A role's shorter
 * one (20 ms) ended a session between two statements of a transaction whenever the pod was
 * slow to send the next (a loaded node): the open's migration check and the writes were
 * retried until their budget ran out, and starts failed (exit 1 after ~5 s). Raised to this
 * much only: a pod stalled that long in a transaction (a node cut off) still has it ended, and
 * its row locks freed, well before TCP gives up on it. (The run lock's session turns it off:
 * run-lock.ts.) Compared as an interval, which reads the setting's units (`20ms`, `1min`).
 */
const IDLE_IN_TRANSACTION_FLOOR_MS = 10_000;
const IDLE_IN_TRANSACTION_FLOOR = `SELECT set_config('idle_in_transaction_session_timeout', '${IDLE_IN_TRANSACTION_FLOOR_MS}', false)
WHERE current_setting('idle_in_transaction_session_timeout')::interval BETWEEN interval '1 microsecond' AND interval '${IDLE_IN_TRANSACTION_FLOOR_MS} milliseconds'`;

/**
 * A new pool whose connections each run CHECK_CLIENT (and IDLE_IN_TRANSACTION_FLOOR) before their first use (pg-pool awaits
 * `onConnect`; a failure there fails the checkout, which is retried like a failed connect).
 */
function newPool(config: pg.PoolConfig): pg.Pool {
  // @types/pg types the hook as returning void; pg-pool 3.14 awaits what it returns.
  const hooked: pg.PoolConfig & { onConnect: (client: pg.ClientBase) => Promise<void> } = {
    ...config,
    onConnect: async (client) => {
      await client.query(`${CHECK_CLIENT};\n${IDLE_IN_TRANSACTION_FLOOR}`);
    },
  };
  const pool = new pg.Pool(hooked);
  // An idle connection that the server drops (restart, failover) is reported here;
  // without a listener the process would crash. The next checkout gets a new one.
  pool.on('error', () => undefined);
  return pool;
}

export type Exec = <R extends pg.QueryResultRow = pg.QueryResultRow>(query: Query) => Promise<R[]>;

/** Exec on one client (a pooled connection in a transaction, or the run lock's session). */
export const execOn =
  (client: pg.ClientBase): Exec =>
  async <R extends pg.QueryResultRow>(query: Query) =>
    (await client.query<R>(query)).rows;

/** Runs the ledger's transactions on a pool, retrying transient failures with backoff. */
export class PostgresExecutor {
  readonly pool: pg.Pool;
  /** Dedicated sessions (one connection each, opened on first use), see SESSIONS. */
  readonly #sessions = new Map<SessionName, pg.Pool>();
  #closed: Promise<void> | undefined;
  /**
   * Set when a call spent its whole budget; until a call succeeds again, calls try once
   * and fail at once. Otherwise a run that lost its database would wait a full budget
   * for every write of its drain (results, hand-backs, finishRun), far past its deadline.
   */
  #down = false;
  /** portProblem's answer ('' when none), asked before the first connect. */
  #portChecked: string | undefined;
  /** Set by opened(): a server that now refuses writes is failing over (retryable), see isReadOnlyAnswer. */
  #open = false;
  /**
   * Set once a write of this process's ledger was taken by the server (#noted). Until then a
   * read-only answer is the server's state, not a failover's moment: a pod that joined its
   * group's pass (its run lock wrote nothing) on a database turned read-only retried its first
   * write for 30 s, saying "a transient error; retrying", and then exited 1, where a start
   * fails at once saying what to change.
   */
  #wrote = false;

  constructor(readonly opts: PostgresOptions) {
    this.pool = newPool({ ...clientConfig(opts), max: opts.poolMax ?? 4, idleTimeoutMillis: 30_000 });
  }

  /**
   * Run `fn` in one transaction (BEGIN ... COMMIT) on a pooled connection; on a
   * transient failure roll back, drop the connection and run it again, until the budget
   * is spent. `fn` must be safe to re-run: it only sees uncommitted state of its own.
   * `lockTimeoutMs`: the transaction waits at most this long for a lock (a row another
   * session holds in an open transaction), and then fails at once, not retried. `fn`'s
   * `attempt` (1 for the first try): a retry may find the first try committed, its answer
   * lost to a cut connection (FinishOps.fail allows for it).
   */
  tx<T>(what: string, fn: (exec: Exec, attempt: number) => Promise<T>, budgetMs = this.opts.retryBudgetMs ?? RETRY_BUDGET_MS, lockTimeoutMs?: number): Promise<T> {
    return this.retrying(
      what,
      budgetMs,
      async (attempt) => {
        const client = await this.pool.connect();
        // While checked out, a dying socket is reported on the client: the query rejects too.
        const ignore = (): void => undefined;
        client.on('error', ignore);
        let failure: unknown;
        try {
          await client.query('BEGIN');
          if (lockTimeoutMs !== undefined) await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(lockTimeoutMs))}`);
          const exec: Exec = async <R extends pg.QueryResultRow>(query: Query) => this.#noted(await client.query<R>(query)).rows;
          const out = await fn(exec, attempt);
          await client.query('COMMIT');
          return out;
        } catch (err) {
          failure = err;
          await client.query('ROLLBACK').catch(() => undefined);
          throw err;
        } finally {
          client.off('error', ignore);
          // A broken connection must not go back to the pool.
          client.release(failure !== undefined && this.#retryable(failure) ? coerceError(failure) : undefined);
        }
      },
      lockTimeoutMs !== undefined,
    );
  }

  /**
   * One statement outside a transaction (reads), retried like tx(). `again`: the statement
   * for the tries after the first, when a retry must allow for the first try's commit (its
   * answer lost to a cut connection).
   */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(what: string, query: Query, again: Query = query): Promise<R[]> {
    return this.retrying(what, this.opts.retryBudgetMs ?? RETRY_BUDGET_MS, async (attempt) => this.#noted(await this.pool.query<R>(attempt > 1 ? again : query)).rows);
  }

  /**
   * One prepared statement in autocommit on a dedicated session (SESSIONS), retried like
   * tx(). A retry after a lost acknowledgement may find the first try committed: a claim
   * then stays with its owner unknown to it (SharedPassLedger.siblings hands it back), a
   * discovery finds its rows known. `again`: as for query() (a name of its own: a retry may
   * run on the same session).
   */
  on<R extends pg.QueryResultRow = pg.QueryResultRow>(session: SessionName, what: string, query: NamedQuery, again: NamedQuery = query): Promise<R[]> {
    let pool = this.#sessions.get(session);
    if (!pool) {
      pool = newPool({ ...clientConfig(this.opts, SESSIONS[session]), application_name: `cronsafe-${session}`, max: 1, idleTimeoutMillis: 30_000 });
      this.#sessions.set(session, pool);
    }
    const p = pool;
    return this.retrying(what, this.opts.retryBudgetMs ?? RETRY_BUDGET_MS, async (attempt) => this.#noted(await p.query<R>(attempt > 1 ? again : query)).rows);
  }

  /** Retry `fn` on transient errors; anything thrown out is a scrubbed PostgresLedgerError. `ownLockTimeout`: `fn` sets a lock_timeout of its own, which fails it at once (tx). */
  async retrying<T>(what: string, budgetMs: number, fn: (attempt: number) => Promise<T>, ownLockTimeout = false): Promise<T> {
    const { url, schema } = this.opts;
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      if (this.#closed) throw ledgerError(new Error('the ledger is closed'), what, url, schema);
      try {
        // A client made to read its port never connects.
        this.#portChecked ??= portProblem(new pg.Client(clientConfig(this.opts)).port) ?? '';
        if (this.#portChecked !== '') throw new Error(this.#portChecked);
        const out = await fn(attempt);
        this.#down = false;
        return out;
      } catch (err) {
        // A read-only open of an empty schema keeps its class (plan and schedule tell a job
        // that never ran from a store that is down), with where in its message.
        const state = locatedLedgerState(err, what, url, schema);
        if (state) throw state;
        if (err instanceof LedgerOwnedByAnotherJob) throw err; // config error naming state.schema (open.ts)
        if (err instanceof StoppedBeforeLedger) throw err; // the open's stop (migrate-lock.ts): no failure of the store
        if (!this.#retryable(err)) throw ledgerError(err, what, url, schema);
        // Its own lock_timeout ran out: waiting again would only wait again, and no outage to mark (#down).
        if (ownLockTimeout && (err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) throw ledgerError(err, what, url, schema);
        // Our own lock_timeout (read-only and operator sessions): waiting again would only wait again.
        if ((this.opts.readOnly || this.opts.operator) && (err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) {
          const holders = await lockHolders(this.opts);
          throw ledgerError(err, what, url, schema, `waited ${READ_LOCK_TIMEOUT_MS / 1000} s for a lock on the ledger's tables${holders}: `);
        }
        const delayMs = backoffDelayMs(attempt, RETRY_BACKOFF, Math.random);
        const spent = Date.now() - started;
        if (this.#down || spent + delayMs > budgetMs) {
          this.#down = true;
          const prefix = `gave up after ${attempt} attempt(s) over ${(spent / 1000).toFixed(1)} s: `;
          // A failover's read-only moment that outlasted the budget is an outage too: a drain that
          // meets it ends drained (exit 75), as one that cannot reach the server does.
          throw ledgerError(err, what, url, schema, prefix, true);
        }
        this.opts.onRetry?.({ what, attempt, delayMs, error: ledgerError(err, what, url, schema) });
        await new Promise((r) => setTimeout(r, delayMs));
      }
    }
  }

  /**
   * The ledger is open for a run or the daemon (openPostgresLedger): from now on, once the
   * server has taken a write of this ledger (#wrote), a write it refuses as read-only (25006)
   * is retried like an outage, not thrown at once. A pass
   * whose server failed over to a moment of read-only (the demoted primary still behind the
   * endpoint) failed at its next claim with exit 1, its running attempts' claims left for the
   * lease (90 s) and charged again, where a restart of the same length rode through. Not for
   * read-only sessions (they refuse writes themselves) nor an operator's command (it fails at
   * once, as at start: most often a URL naming a replica).
   */
  opened(): void {
    this.#open = !this.opts.readOnly && !this.opts.operator;
  }

  /** Whether a failed call may succeed when run again: transient, or a failover's read-only moment (opened, and a write was taken before). */
  #retryable(err: unknown): boolean {
    return isTransient(err) || (this.#open && this.#wrote && isReadOnlyAnswer(err));
  }

  /** A statement's result, noting (#wrote) when it was a write the server took. */
  #noted<T extends pg.QueryResult>(result: T): T {
    if (WRITE_COMMANDS.has(result.command)) this.#wrote = true;
    return result;
  }

  /** Idempotent (memoized): ends the pool once. */
  close(): Promise<void> {
    this.#closed ??= Promise.all([this.pool.end(), ...[...this.#sessions.values()].map((p) => p.end())]).then(
      () => undefined,
      () => undefined,
    );
    return this.#closed;
  }
}

const LOCK_NOT_AVAILABLE = '55P03';

/** The commands a server that takes no writes refuses (a result's `command`, its CommandComplete tag). */
const WRITE_COMMANDS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

/** Who holds the locks on the schema's tables that others wait for (pid, user, application, state, since), asked of the server. */
const HOLDERS_SQL = `SELECT DISTINCT a.pid, a.usename AS "user", a.application_name AS app, a.state,
  to_char(coalesce(a.xact_start, a.backend_start) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS since,
  c.relname AS "table", l.mode
FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND n.nspname = $1 AND l.mode IN ('AccessExclusiveLock', 'ExclusiveLock', 'ShareRowExclusiveLock', 'ShareLock')
  AND a.pid <> pg_backend_pid()
ORDER BY a.pid LIMIT 5`;

/**
 * `: held by pid 1234 (user app, application psql, idle in transaction since ...) on items
 * (AccessExclusiveLock)`, or '' when it cannot be told (the lock is gone, the role may not
 * see the others' sessions). Never the holder's query: it may hold a secret. On a fresh
 * connection, tried once, and never failing the caller.
 */
async function lockHolders(opts: PostgresOptions): Promise<string> {
  const client = new pg.Client({ ...clientConfig({ ...opts, readOnly: false }), connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ pid: number; user: string | null; app: string | null; state: string | null; since: string | null; table: string; mode: string }>(HOLDERS_SQL, [opts.schema]);
    if (rows.length === 0) return '';
    const who = rows.map((r) => {
      const about = [r.user && `user ${r.user}`, r.app && `application ${r.app}`, r.state && `${r.state}${r.since ? ` since ${r.since}` : ''}`].filter(Boolean).join(', ');
      return `pid ${r.pid}${about ? ` (${about})` : ''} on ${r.table} (${r.mode})`;
    });
    return `, held by ${who.join('; ')} (pg_terminate_backend(pid) ends a session left hanging)`;
  } catch {
    return '';
  } finally {
    await client.end().catch(() => undefined);
  }
}
