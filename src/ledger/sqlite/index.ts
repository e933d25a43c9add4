import { dirname } from 'node:path';
import type { Ledger } from '../types.js';
import { isBusy, newDatabase } from './connection.js';
import { againWhileBusy, BUSY_SLICE_MS, BUSY_TIMEOUT_MS, openedFile, SqliteLedger } from './ledger.js';
import { claimJob, refuseAnotherJob } from './meta.js';
import { assertLedgerFile, migrate } from './migrate.js';
import { openSqliteReadOnly } from './read-only.js';
import { journalOf } from './start-journal.js';
import { refuseUnwritable, unwritableCompanion } from './unwritable.js';
import { makeDirs } from '../../make-dirs.js';
import { refuseDatabaseCompanions } from './companions.js';

export { SqliteLedger } from './ledger.js';

/** Options of openSqliteLedger. */
export interface SqliteOpenOptions {
  /**
   * The config `name` of the job opening the ledger: recorded as its owner on first use,
   * and refused (LedgerOwnedByAnotherJob) when another name is recorded. Absent: no check
   * (tests and tools that read any ledger).
   */
  job?: string;
  /**
   * False: `job` is checked but never recorded; a ledger with no job recorded yet is
   * LedgerNotOwnedYet (a start that found the run lock held: identity.ts). Default true.
   */
  adopt?: boolean;
  /** Only read: see OpenAs.readOnly (src/ledger/open.ts) and read-only.ts. */
  readOnly?: boolean;
  /**
   * The run's connection (it holds the flock): claims and successes go through the start
   * journal and are written behind in batches (write-behind.ts). Off: each settle is its
   * own transaction, as every other connection's.
   */
  writeBehind?: boolean;
  /**
   * An operator's write command (requeue, dead-letter retry): it waits for another
   * process's write lock in slices too, so that a signal (Ctrl-C) ends it at once, as the
   * other commands without a drain end, instead of after SQLite's whole busy wait.
   */
  operator?: boolean;
  /**
   * The run's stop (SIGTERM): while the open waits for another process's write lock, in
   * slices, it ends the wait with StoppedBeforeLedger (the run drains, nothing claimed).
   */
  stop?: AbortSignal;
}

/**
 * Open (creating it and its parent directory if needed) the SQLite ledger at `file`
 * and bring its schema up to date. One connection, statements prepared once.
 *
 * WAL + synchronous=NORMAL: a commit is durable against a process crash or SIGKILL
 * (the WAL is in the OS page cache); only an OS crash or power loss can lose the
 * last transactions, never corrupt the file. The verbs are synchronous underneath
 * (better-sqlite3); the async interface is for the PostgreSQL adapter's sake.
 */
export async function openSqliteLedger(file: string, opts: SqliteOpenOptions = {}): Promise<Ledger> {
  // Status and dead-letter list: no directory, file, migration or pragma write (read-only.ts).
  if (opts.readOnly) {
    refuseDatabaseCompanions(file);
    const db = openSqliteReadOnly(file, BUSY_TIMEOUT_MS, opts.job);
    db.pragma('cache_size = -4096'); // as below: a scan of a large ledger must not grow the cache to 16 MiB
    return new SqliteLedger(db, journalOf(file));
  }
  if (file !== ':memory:') {
    makeDirs(dirname(file));
    refuseUnwritable(file);
    refuseDatabaseCompanions(file);
  }
  // An operator's connection, and the run's, wait for the write lock in slices from the
  // start: their open writes too (the migration check is an immediate transaction), and one
  // wait inside SQLite of BUSY_TIMEOUT_MS kept a Ctrl-C from ending an operator's command,
  // and a run's SIGTERM from draining it, until the wait was over (a run then failed, exit 1).
  // So does any open given a stop (the daemon's at start-up): it ends the wait.
  const sliced = opts.operator === true || opts.writeBehind === true || opts.stop !== undefined;
  const db = newDatabase(file, { timeout: sliced ? BUSY_SLICE_MS : BUSY_TIMEOUT_MS });
  // The file SQLite opened: if another is put at its path later, its log must not stay there (SqliteLedger's close).
  const opened = file === ':memory:' ? undefined : openedFile(file);
  try {
    // Its read waits for a lock too (another connection's in exclusive locking mode, a last
    // close's checkpoint): sliced, as the steps below, it waited BUSY_SLICE_MS only, and the
    // run failed at once, said as a lock held "longer than cronsafe waits".
    if (sliced) await inSlices(() => assertLedgerFile(db), () => db.open, opts.stop);
    else assertLedgerFile(db);
    const setUp = (): void => {
      // Before the first table exists, so a new file can shrink after pruning (retention).
      // On an older file this is a no-op: switching needs a VACUUM (docs/operations.md).
      db.pragma('auto_vacuum = INCREMENTAL');
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.pragma(`busy_timeout = ${sliced ? BUSY_SLICE_MS : BUSY_TIMEOUT_MS}`);
      db.pragma('foreign_keys = ON');
      // A batch statement that touches hundreds of pages keeps a statement journal;
      // on disk (the default) it cost ~40% of discoverAndClaim. It is bounded by the batch.
      db.pragma('temp_store = MEMORY');
      // better-sqlite3 builds SQLite with a 16 MiB page cache; it fills on a large backlog
      // and is most of the native memory that grows with it. 2 MiB holds the id index's
      // interior pages at 1,000,000 items (~1% of its ~60 MB); its leaves are written at
      // random places whatever the cache, and come from the OS page cache. 4 MiB measured no
      // faster (docs/benchmarks.md).
      db.pragma('cache_size = -2048');
      // Discovery writes land all over the id index, so the WAL fills quickly; each
      // checkpoint fsyncs twice. 10,000 pages (~40 MB) cuts those ~10x; the size limit
      // gives the disk back after a checkpoint.
      db.pragma('wal_autocheckpoint = 10000');
      db.pragma('journal_size_limit = 67108864');
      if (opts.job !== undefined) refuseAnotherJob(db, opts.job);
      migrate(db);
      if (opts.job !== undefined) claimJob(db, opts.job, opts.adopt !== false);
    };
    // Each step that fails on SQLITE_BUSY wrote nothing (a pragma, or a transaction rolled back): it runs again.
    if (sliced) await inSlices(setUp, () => db.open, opts.stop);
    else setUp();
    // The run's connection waits for another process's write lock in slices, between
    // which its event loop runs (SqliteLedger's #op): the drain must end inside the grace.
    // So does an operator's (requeue, dead-letter retry): a signal ends it between two.
    return new SqliteLedger(db, file === ':memory:' ? undefined : journalOf(file), opts.writeBehind === true, sliced, opened);
  } catch (err) {
    db.close();
    throw unwritableCompanion(file, err) ?? err;
  }
}

/**
 * `step` at once, and tried again in slices while it fails on SQLITE_BUSY (againWhileBusy, as
 * SqliteLedger's #op); `stop` aborted, the wait ends with StoppedBeforeLedger.
 */
async function inSlices(step: () => void, open: () => boolean, stop?: AbortSignal): Promise<void> {
  try {
    return step();
  } catch (err) {
    if (!isBusy(err)) throw err;
  }
  return againWhileBusy(step, open, stop);
}
