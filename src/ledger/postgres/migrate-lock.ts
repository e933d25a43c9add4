import { setTimeout as sleep } from 'node:timers/promises';
import { backoffDelayMs } from '../backoff.js';
import type { Exec } from './connection.js';
import { q, type Query } from './query.js';
import { StoppedBeforeLedger, stopName } from '../run-lock.js';

/*
 * A migration's DDL (007's ALTER TABLE items) takes an ACCESS EXCLUSIVE lock. Waiting for it
 * with no lock_timeout, behind a session holding any lock on the table (a report left idle in
 * a transaction), it sat in the lock queue, and every running pod's statements on that table
 * queued behind it: the whole pass stalled for as long as the report stayed open. So each try
 * waits at most TRY_LOCK_TIMEOUT_MS, under a savepoint; when it times out the request leaves
 * the queue (the running pods' statements go through), and it is tried again after a backoff,
 * as careful migration tools do (pgroll, GitLab's with_lock_retries).
 */

/** How long one try waits for its lock: the longest the running pods' statements wait behind it. */
export const TRY_LOCK_TIMEOUT_MS = 300;
/** Between tries: 500 ms doubling to 5 s, with equal jitter (backoff.ts). */
const TRY_BACKOFF = { backoffMs: 500, backoffMaxMs: 5_000 };
/** How long a migration keeps trying before the start fails (exit 1) naming what holds the lock. */
export const MIGRATION_LOCK_BUDGET_MS = 300_000;

const LOCK_NOT_AVAILABLE = '55P03';
const SAVEPOINT = 'cronsafe_migration';

/** A session holding a lock on the ledger's tables that the migration waits for. Never its query: it may hold a secret. */
export interface LockHolder {
  pid: number;
  user: string | null;
  application: string | null;
  state: string | null;
  /** Seconds its transaction has been open (null: the role may not see it). */
  seconds: number | null;
  /** When its current (or last) statement started, ISO UTC. */
  queryStart: string | null;
  table: string;
  mode: string;
}

export interface MigrationLockWait {
  /** Told once, the first time a try times out and the sessions holding the lock are known. */
  onBlocked?: (holders: LockHolder[], migration: { version: number; name: string }) => void;
  /** Default MIGRATION_LOCK_BUDGET_MS. */
  budgetMs?: number;
  /** Default TRY_LOCK_TIMEOUT_MS. */
  tryTimeoutMs?: number;
  /**
   * The daemon's stop: once aborted, no try is started again (StoppedBeforeLedger). A daemon
   * SIGTERMed while its first open waited here stayed up until the drain's last resort (exit
   * 75). (A run's start waits in its lock's session, which its stop ends: run-lock.ts.)
   */
  stop?: AbortSignal;
}

/**
 * Sessions other than ours with a lock on a table of the schema (its indexes' are the same sessions'), in a transaction open at
 * least `olderThanMs` (the try's wait: a lock taken since then queued behind it, and a running
 * pod's statements are over in milliseconds).
 */
export const lockHoldersQuery = (schema: string, olderThanMs: number): Query =>
  q(
    `SELECT DISTINCT ON (a.pid, c.relname) a.pid, a.usename AS "user", a.application_name AS application, a.state,
  floor(extract(epoch FROM clock_timestamp() - a.xact_start))::int AS seconds,
  to_char(a.query_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS "queryStart", c.relname AS "table", l.mode
FROM pg_locks AS l
JOIN pg_class AS c ON c.oid = l.relation
JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.granted AND c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p') AND a.pid <> pg_backend_pid()
  AND (a.xact_start IS NULL OR a.xact_start <= clock_timestamp() - make_interval(secs => $2::float8 / 1000))
ORDER BY a.pid, c.relname LIMIT 10`,
    schema,
    olderThanMs,
  );

/** `pid 1234 (user app, application psql, idle in transaction for 12 s, query started ...) on items (AccessShareLock)` */
export function describeHolders(holders: readonly LockHolder[]): string {
  if (holders.length === 0) return 'sessions this role cannot see (ask a superuser to look in pg_locks)';
  return holders
    .map((h) => {
      const about = [h.user && `user ${h.user}`, h.application && `application ${h.application}`, h.state && `${h.state}${h.seconds !== null ? ` for ${h.seconds} s` : ''}`, h.queryStart && `query started ${h.queryStart}`]
        .filter(Boolean)
        .join(', ');
      return `pid ${h.pid} (${about}) on ${h.table} (${h.mode})`;
    })
    .join('; ');
}

/**
 * The warning told once when a migration waits (MigrationLockWait.onBlocked): who holds the
 * lock, as pg_stat_activity says it, and what to do.
 */
export const blockedWarning =
  (schema: string, warn: (msg: string, detail?: Record<string, unknown>) => void): NonNullable<MigrationLockWait['onBlocked']> =>
  (holders, m) =>
    warn(
      `ledger migration ${m.version} (${m.name}) waits for a lock on schema ${schema}'s tables, held by ${describeHolders(holders)}; ` +
        `the running pods go on meanwhile (each try waits ${TRY_LOCK_TIMEOUT_MS} ms, then lets them through), and it tries again for up to ${MIGRATION_LOCK_BUDGET_MS / 60_000} min: ` +
        `end that session (SELECT pg_terminate_backend(pid)) to let it through`,
      { migration: m.version, holders },
    );

/**
 * Run one migration's DDL, each try waiting at most `tryTimeoutMs` for its locks, until it
 * goes through or `budgetMs` is spent (an Error naming the holders: exit 1). Inside the
 * caller's transaction, which holds the migration's advisory lock: a try that times out is
 * rolled back to its savepoint (with its lock_timeout), the rest of the transaction kept.
 */
export async function ddlWithLockRetries(exec: Exec, schema: string, ddl: Query, migration: { version: number; name: string }, wait: MigrationLockWait = {}): Promise<void> {
  const tryTimeoutMs = wait.tryTimeoutMs ?? TRY_LOCK_TIMEOUT_MS;
  const budgetMs = wait.budgetMs ?? MIGRATION_LOCK_BUDGET_MS;
  const started = Date.now();
  let told = false;
  let holders: LockHolder[] = [];
  // SET LOCAL in the savepoint is undone with a failed try, but a try that goes through keeps
  // it to the transaction's end: the caller's (an operator's session sets one) is put back.
  const [prev] = await exec<{ lock_timeout: string }>(q(`SELECT current_setting('lock_timeout') AS lock_timeout`));
  for (let n = 1; ; n++) {
    if (wait.stop?.aborted) throw new StoppedBeforeLedger(stopName(wait.stop), `ledger migration ${migration.version} (${migration.name}) waited for a lock on schema ${schema}'s tables`);
    await exec(q(`SAVEPOINT ${SAVEPOINT}`));
    try {
      await exec(q(`SELECT set_config('lock_timeout', $1, true)`, `${tryTimeoutMs}ms`));
      await exec(ddl);
      await exec(q(`SELECT set_config('lock_timeout', $1, true)`, prev?.lock_timeout ?? '0'));
      await exec(q(`RELEASE SAVEPOINT ${SAVEPOINT}`));
      return;
    } catch (err) {
      if ((err as { code?: unknown })?.code !== LOCK_NOT_AVAILABLE) throw err;
      // The request leaves the lock queue: the statements queued behind it go through now.
      await exec(q(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`));
      await exec(q(`RELEASE SAVEPOINT ${SAVEPOINT}`));
    }
    const found = await exec<LockHolder>(lockHoldersQuery(schema, tryTimeoutMs));
    if (found.length > 0) holders = found;
    if (!told && found.length > 0) {
      told = true;
      wait.onBlocked?.(found, migration);
    }
    const delay = backoffDelayMs(n, TRY_BACKOFF, Math.random);
    const spent = Date.now() - started;
    if (spent + delay > budgetMs) {
      throw new Error(
        `migration ${migration.version} (${migration.name}) of schema ${schema} gave up after ${n} tries over ${Math.round(spent / 1000)} s, ` +
          `each waiting ${tryTimeoutMs} ms for its lock on the schema's tables, held by ${describeHolders(holders)}: ` +
          `end that session (SELECT pg_terminate_backend(pid)) and start cronsafe again; the running pods went on meanwhile`,
      );
    }
    await sleep(delay, undefined, { signal: wait.stop }).catch(() => undefined); // a stop ends the wait
  }
}
