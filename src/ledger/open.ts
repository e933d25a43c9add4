import { accessSync, constants as fsConstants, readFileSync, statSync, statfsSync, utimesSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { quotaUsedUp } from '../block-probe.js';
import { OutOfDescriptors, sqliteOutOfDescriptors } from '../descriptors.js';
import { whereItIs } from '../real-path.js';
import { BUSY_TIMEOUT_MS, exclusiveHolder } from './sqlite/busy.js';
import type { Config, StateConfig } from '../config/types.js';
import { ConfigError, EdgeError, StateTooNew, StateUnavailable, coerceError, errorCode, inConfigFile } from '../errors.js';
import { LedgerNotOwnedYet, LedgerOwnedByAnotherJob } from './identity.js';
import { LedgerNeedsMigration, LedgerTooNew, LedgerUnwritable, NoLedgerYet, NotALedger, sqliteLedgerFound } from './no-ledger.js';
import { PassConfigDiffers, StoppedBeforeLedger, StoppedBeforeLock, type PassConfig, type RunLock } from './run-lock.js';
import type { Ledger, RunStartReader } from './types.js';

/** The schema a PostgreSQL ledger lives in when `state.schema` is not set. */
export const DEFAULT_POSTGRES_SCHEMA = 'cronsafe';

/** Who opens the ledger (the config), so that a ledger of another job is refused. */
export interface OpenAs {
  /** config.name: recorded as the ledger's owner on first use; another name is refused. */
  job: string;
  /** For the message. */
  configPath?: string;
  /**
   * Only read (status, dead-letter list): no migration and no write (the owner is checked,
   * never recorded), so it works on a read-only state directory or with a read-only
   * database role. A ledger that does not exist yet, or whose schema is older or newer
   * than this cronsafe's, is an error that says so. Write verbs on such a ledger fail.
   */
  readOnly?: boolean;
  /**
   * An operator's write command (requeue, dead-letter retry), not a run: on PostgreSQL it
   * waits for a lock on the ledger's tables a few seconds at most, as a reader does, and
   * fails naming who holds it (SQLite's busy timeout does the same there).
   */
  operator?: boolean;
  /**
   * False: the job is checked but never recorded; a ledger with no job recorded yet is
   * LedgerNotOwnedYet (SQLite; identity.ts). For a start that found the run lock held.
   */
  adopt?: boolean;
  /** The run's own connection, under its lock: SQLite writes claims behind (sqlite/write-behind.ts). */
  writeBehind?: boolean;
  /**
   * The run's stop: SQLite's open stops waiting for another connection's write lock, a
   * PostgreSQL open's migration for a lock on the ledger's tables (StoppedBeforeLedger).
   */
  stop?: AbortSignal;
  /** PostgreSQL: told of each transient error about to be retried (see retryWarnings). */
  onRetry?: (info: { what: string; attempt: number; delayMs: number; error: Error }) => void;
  /**
   * PostgreSQL: told once when the open's migration waits for a lock on the ledger's tables
   * (a session left open in a transaction on `items`), naming the sessions that hold it.
   */
  warn?: (msg: string, detail?: Record<string, unknown>) => void;
}

/**
 * How long a start that found a new SQLite ledger's run lock held waits for the run holding
 * it to record its job's name (Store.openForSkip): that run's open, a second or so after its
 * lock on a busy node; more only when another connection holds the ledger's write lock.
 */
const SKIP_OWNER_WAIT_MS = 10_000;

/** Retries are told at most this often: an outage of 30 s is a few lines, not one per try. */
const RETRY_WARNING_EVERY_MS = 10_000;

/**
 * OpenAs.onRetry for a run: a warning when PostgreSQL answers with a transient error (a
 * restart, a connection limit reached: 53300) that is being retried, at most once per
 * RETRY_WARNING_EVERY_MS. Without it a pod waiting out a full connection slot said nothing
 * until it gave up or finished with nothing done. The error names host:port, never the password.
 */
export function retryWarnings(log: Logger): NonNullable<OpenAs['onRetry']> {
  let last = -Infinity;
  return ({ what, attempt, delayMs, error }) => {
    const now = Date.now();
    if (now - last < RETRY_WARNING_EVERY_MS) return;
    last = now;
    log.warn({ doing: what, attempt, retryInMs: delayMs, err: error.message }, 'state store: a transient error; retrying');
  };
}

/** OpenAs.warn: a warning line of `log` (a migration waiting for a lock, postgres/migrate-lock.ts). */
const migrationWarnings = (log: Logger | undefined): OpenAs['warn'] => log && ((msg, detail) => log.warn(detail ?? {}, msg));

/**
 * Open the ledger the config names. A ConfigError (exit 78) when the choice cannot
 * work, so a CronJob with a bad `state` fails at once instead of being retried: among
 * those, a ledger that belongs to another job (`as.job`), refused before any item is read.
 * Each adapter (with better-sqlite3 or pg) is loaded only when it is used, so the
 * commands that never open a ledger do not pay for loading one. `as.readOnly`: see OpenAs.
 */
export async function openLedger(state: StateConfig, as?: OpenAs): Promise<Ledger> {
  try {
    if (state.postgres !== undefined) {
      const { openPostgresLedger } = await import('./postgres/index.js');
      return await openPostgresLedger({ url: state.postgres, schema: state.schema ?? DEFAULT_POSTGRES_SCHEMA, job: as?.job, adopt: as?.adopt, readOnly: as?.readOnly, operator: as?.operator, onRetry: as?.onRetry, warn: as?.warn, stop: as?.stop });
    }
    if (state.sqlite === undefined) {
      throw new ConfigError('state.sqlite is required (the path of the ledger file)', undefined, 'state.sqlite');
    }
    const { openSqliteLedger } = await import('./sqlite/index.js');
    return await openSqliteLedger(state.sqlite, { job: as?.job, adopt: as?.adopt, readOnly: as?.readOnly, writeBehind: as?.writeBehind, operator: as?.operator, stop: as?.stop });
  } catch (err) {
    if (err instanceof LedgerOwnedByAnotherJob) throw ownedByAnother(state, err, as?.configPath);
    if (err instanceof NotALedger) throw notALedger(err, as?.configPath);
    throw err;
  }
}

/** Store.openRunStarts for a ledger of an older schema (openReader refused it: LedgerNeedsMigration). */
async function openOlderRunStarts(state: StateConfig, job: string): Promise<RunStartReader> {
  if (state.postgres !== undefined) {
    const { openOlderPostgresRunStarts } = await import('./postgres/index.js');
    return openOlderPostgresRunStarts({ url: state.postgres, schema: state.schema ?? DEFAULT_POSTGRES_SCHEMA, readOnly: true }, job);
  }
  const { openOlderRunStarts: open } = await import('./sqlite/read-only.js');
  return open(state.sqlite!, BUSY_TIMEOUT_MS, job);
}

/** PostgreSQL: state.schema names another program's schema, or state.postgres a database that cannot hold a ledger (postgres/migrate.ts). */
function notALedger(err: NotALedger, configPath?: string): ConfigError {
  return new ConfigError(`${configPath ? `${configPath}: ` : ''}${err.key}: ${err.message}`, configPath, err.key);
}

/** A rename of `name` meets the owner check too: where to read how to keep the ledger. */
const RENAMING = 'To rename a job and keep its ledger, see docs/operations.md, "Renaming a job".';

function ownedByAnother(state: StateConfig, err: LedgerOwnedByAnotherJob, configPath?: string): ConfigError {
  const where = configPath ? `${configPath}: ` : '';
  const owner = JSON.stringify(err.owner);
  const job = JSON.stringify(err.job);
  if (state.postgres !== undefined) {
    const schema = state.schema ?? DEFAULT_POSTGRES_SCHEMA;
    return new ConfigError(
      `${where}state.schema: the PostgreSQL schema "${schema}" is the ledger of job ${owner}, and this config's name is ${job}. ` +
        `Two jobs must not share a ledger (each would take the other's items as its own): give this job its own state.schema, or fix name. ${RENAMING}`,
      configPath,
      'state.schema',
    );
  }
  return new ConfigError(
    `${where}state.sqlite: ${state.sqlite} is the ledger of job ${owner}, and this config's name is ${job}. ` +
      "Two jobs must not share a ledger (each would take the other's items as its own): give this job its own state.sqlite " +
      `(or leave it unset: the default, <config dir>/.cronsafe/<name>.db, is one file per name), or fix name. ${RENAMING}`,
    configPath,
    'state.sqlite',
  );
}

/** The state store the config names: the one seam between the run engine and an adapter. */
export interface Store {
  /** For messages: `sqlite <path>` or `postgres` (its errors name host and database). */
  readonly label: string;
  /**
   * Open the ledger read-only, or null when no run has created it yet (SQLite: no file, and
   * no adapter loaded; PostgreSQL: no ledger in the schema), so that a command that only
   * looks (plan, schedule) answers "never ran" on either store and creates nothing.
   * Any other failure as openLedger's.
   */
  openReader(): Promise<Ledger | null>;
  /**
   * As openReader, for `cronsafe schedule`, which reads only the latest run's start: a ledger
   * of an older schema than this cronsafe's is read as it is, never migrated. Migrated, the
   * older cronsafe still running the job (an upgrade rolled out to the operator's machine
   * first, or half-way) refused it as "newer than this cronsafe knows" at its next run. A
   * ledger that records another job is refused (78) as openLedger refuses it.
   */
  openRunStarts(): Promise<RunStartReader | null>;
  /**
   * Take the run lock without waiting, whichever kind this store needs (ledger/run-lock.ts);
   * null when another run holds it. StateUnavailable (exit 1) when it cannot be taken.
   * `scheduledTime`: the occurrence the run is for, which PostgreSQL's pods of one fire share.
   * `held`: told which lock another run holds, when the store can tell (SQLite's three).
   */
  /**
   * `stop`: PostgreSQL stops trying once it aborts, when the lock cannot be had now (StoppedBeforeLock).
   * `passConfig`: PostgreSQL records it with a pass this run starts, and refuses to join a
   * pass of its group recorded with another (PassConfigDiffers, a ConfigError: exit 78).
   */
  takeRunLock(owner: string, log: Logger, scheduledTime?: Date, held?: (lock: string) => void, stop?: AbortSignal, passConfig?: PassConfig): Promise<RunLock | null>;
  /**
   * Open the ledger; an unreachable store is StateUnavailable (exit 1) with a message naming
   * the store and its path, a ledger of another job a ConfigError (exit 78). `readOnly`:
   * for commands that only look (status, dead-letter list); see OpenAs.readOnly. `log`: a
   * run's, warned of PostgreSQL's transient errors while they are retried (retryWarnings),
   * and of a migration that waits for a lock. `migrationLog`: warned of that wait only (the
   * daemon's, whose opens during an outage are said once by the daemon itself).
   */
  openLedger(opts?: { readOnly?: boolean; operator?: boolean; writeBehind?: boolean; log?: Logger; migrationLog?: Logger; stop?: AbortSignal; adopt?: boolean }): Promise<Ledger>;
  /**
   * A start that found the run lock held: open the ledger to record the skip, never
   * recording this job as its owner while the run holding it may be about to record its own
   * (a new SQLite ledger, two jobs started at once): the skip waited for that name, and a
   * job not the owner is the ConfigError (78) of openLedger, not a skip (0). Null when no
   * name came in time (the holder stopped before it recorded one): the skip is not recorded.
   */
  openForSkip(stop?: AbortSignal): Promise<Ledger | null>;
  /** A write that failed (a read-only state directory, a full disk), as an error naming the store, not a driver stack. */
  unavailable(doing: string, err: unknown): StateUnavailable;
  /**
   * `validate`: what the run refuses to use beside the ledger (SQLite's start journal
   * replaced by a link, a FIFO or a directory; the same, or another database, where SQLite
   * keeps its -wal, -shm or -journal) as the run's ConfigError (exit 78). Loads no
   * database driver; nothing to check for PostgreSQL.
   */
  assertOwnFiles(): Promise<void>;
}

/**
 * SQLite's bare "database is locked" (SQLITE_BUSY): another connection held a lock on the
 * ledger for longer than this one waits (BUSY_TIMEOUT_MS). Say who that may be and what to
 * do. A connection in exclusive locking mode (a `sqlite3` shell that ran `PRAGMA
 * locking_mode=EXCLUSIVE` and read a table) keeps its lock until it closes: that was said as
 * a write "held longer than cronsafe waits", sending the operator to wait and try again.
 */
function busy(sqlite: string | undefined, err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (sqlite === undefined || typeof code !== 'string' || !code.startsWith('SQLITE_BUSY')) return '';
  const file = whereItIs(sqlite);
  const holder = exclusiveHolder(file);
  if (holder !== undefined) {
    const who = holder.pid === 0 ? 'another process (in another PID namespace: another container or pod?)' : `another process (pid ${holder.pid}${holder.command ? `, ${holder.command}` : ''})`;
    return ` (${who} holds the ledger file ${file} in exclusive locking mode (PRAGMA locking_mode=EXCLUSIVE): SQLite keeps that lock until the connection closes, so no wait ends it; close that connection (quit the sqlite3 shell), then run this again)`;
  }
  return ` (another connection held a lock on the ledger file ${file} for longer than cronsafe waits for it (${BUSY_TIMEOUT_MS / 1000} s): a run writing it, another tool with a transaction open on it, or a connection in exclusive locking mode (PRAGMA locking_mode=EXCLUSIVE), which keeps it until it closes; try again once it is done)`;
}

/**
 * A damaged ledger (SQLITE_CORRUPT: a copy cut short, a page overwritten; SQLITE_NOTADB: its
 * header overwritten): SQLite's "database disk image is malformed" or "file is not a
 * database" named the file but not what to do, at every run, while the Job failed into its
 * backoffLimit. Said, with what moving it aside costs; the file itself is left as it is.
 */
function damaged(sqlite: string | undefined, err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (sqlite === undefined || typeof code !== 'string' || !/^SQLITE_(CORRUPT|NOTADB)/.test(code)) return '';
  // Where SQLite keeps its -wal and -shm: beside the file a link at state.sqlite points to.
  const file = whereItIs(path.resolve(sqlite));
  return ` (the ledger file ${file} is damaged: stop the job, then restore it from a backup (removing any ${file}-wal and -shm beside it, which belong to the damaged file), or move it aside to start a new ledger, which runs every item again and forgets the dead letters)`;
}

/**
 * SQLite says only "disk I/O error" when a full file system refuses it a file it must make
 * or grow (the -shm of a ledger that a clean close left without one, at the next open):
 * that reads as a failing disk; and "unable to open database file" when no inode is left
 * for its -wal. Said plainly when the ledger's file system has no block or no inode left,
 * or this user's quota there is used up (quotaUsedUp); '' otherwise.
 */
function noSpaceLeft(sqlite: string | undefined, err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (sqlite === undefined || typeof code !== 'string' || !/^SQLITE_(IOERR|CANTOPEN)/.test(code)) return '';
  const dir = path.dirname(whereItIs(sqlite));
  try {
    const s = statfsSync(dir);
    if (s.bavail > 0 && !(s.files > 0 && s.ffree === 0)) return quotaUsedUp(dir) ? ` (this user's disk quota on the file system of state.sqlite (${dir}) is used up (EDQUOT), though the file system has room: raise the quota, or free some of it)` : '';
  } catch {
    return '';
  }
  return ` (the file system of state.sqlite (${dir}) has no space left: free some, or give it a larger volume)`;
}

/**
 * SQLite says only "unable to open database file" or "attempt to write a readonly database"
 * when the ledger's file system is mounted read-only (a volume mounted `readOnly`, a
 * snapshot, a disk remounted read-only after errors): `dead-letter retry`, `requeue` and
 * the run's own writes said no more than that. access(2) answers EROFS for a write check
 * there, even for root. Said plainly; '' otherwise.
 */
function readOnlyFs(sqlite: string | undefined, err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (sqlite === undefined || typeof code !== 'string' || !/^SQLITE_(CANTOPEN|READONLY|IOERR)/.test(code)) return '';
  const dir = path.dirname(whereItIs(sqlite));
  try {
    accessSync(dir, fsConstants.W_OK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EROFS') return '';
    return ` (the file system of state.sqlite (${dir}) is mounted read-only: mount it read-write)`;
  }
  // ext4's errors=remount-ro on Linux 6.x marks the file system `emergency_ro`: writes fail
  // EROFS while access(2) and the mount's flags still say read-write (SQLite said only
  // "unable to open database file"). Setting the directory's times to what they are tells.
  try {
    const st = statSync(dir);
    utimesSync(dir, st.atime, st.mtime);
    return '';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EROFS') return '';
  }
  return ` (the file system of state.sqlite (${dir}) went read-only after an error (ext4 errors=remount-ro: see the kernel log): repair it and mount it again)`;
}

/**
 * SQLite says "disk I/O error" too when a write would take the ledger (or its -wal, or the
 * start journal) past the process's file size limit (RLIMIT_FSIZE: `ulimit -f`, systemd's
 * LimitFSIZE=): the kernel refuses it with EFBIG, on a healthy disk with room to spare. Said
 * plainly when such a limit is set and one of those files is within a write of it; ''
 * otherwise.
 */
function fileSizeLimit(sqlite: string | undefined, err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (sqlite === undefined || typeof code !== 'string' || !code.startsWith('SQLITE_IOERR')) return '';
  let limit: number;
  try {
    const line = /^Max file size\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    limit = line?.[1] === undefined ? Number.NaN : Number(line[1]);
  } catch {
    return '';
  }
  if (!Number.isSafeInteger(limit)) return ''; // unlimited (or unknown)
  const file = whereItIs(sqlite);
  // A write of SQLite is a page or a few (64 KiB covers the largest page size).
  const size = (f: string): number => {
    try {
      return statSync(f, { throwIfNoEntry: false })?.size ?? 0;
    } catch {
      return 0; // unreadable directory: no hint, never a second error
    }
  };
  const near = [file, `${file}-wal`, `${file}-starts`].some((f) => size(f) + 65_536 > limit);
  return near ? ` (the process's file size limit (ulimit -f, LimitFSIZE=) is ${limit} bytes and the ledger's files reached it: raise or remove the limit)` : '';
}

/**
 * lock.path could not be created (nor its directory) because its file system is full (no
 * block or no inode left: ENOSPC) or the user's quota is (EDQUOT). It was said as "state
 * store unavailable (sqlite <ledger>): cannot take the run lock ...", sending the operator
 * to the ledger, whose volume may be another and have room. Exit 1, as before.
 */
function lockFileNoSpace(lockPath: string, err: unknown): StateUnavailable | undefined {
  // errorCode: Node 20 names EDQUOT 'UNKNOWN'.
  const code = errorCode(err);
  const where = (err as NodeJS.ErrnoException).path;
  if ((code !== 'ENOSPC' && code !== 'EDQUOT') || where === undefined) return undefined;
  const lock = path.resolve(lockPath);
  const at = path.resolve(where);
  if (at !== lock && !lock.startsWith(`${at}/`)) return undefined;
  const why = code === 'ENOSPC' ? 'no space left on its file system (no free block or inode)' : "the user's disk quota on its file system is used up";
  return new StateUnavailable(
    `cannot create the lock file ${lockPath} (lock.path): ${code}: ${why}${at === lock ? '' : ` (creating ${where})`}: free some, or set lock.path on a file system with room`,
    { cause: err },
  );
}

/**
 * An operator's write command (requeue, dead-letter retry) on a ledger no job has recorded
 * its name in yet: it changes nothing there, since it cannot tell whose items they are.
 */
function notOwnedYet(label: string, job: string): StateUnavailable {
  return new StateUnavailable(
    `state store unavailable (${label}): no job is recorded as the ledger's owner yet (no run has named it): nothing changed, so as not to make it job ${JSON.stringify(job)}'s; ` +
      `if it is this job's ledger, \`cronsafe run\` of this config records its name (it refuses another job's), then run this again`,
  );
}

/** The store `config.state` names. Does nothing yet: the lock and the ledger are taken when asked for. */
export function openStore(config: Config): Store {
  const { state } = config;
  const label = state.postgres !== undefined ? 'postgres' : `sqlite ${state.sqlite ?? '(no path)'}`;
  const unavailable = (doing: string, err: unknown): StateUnavailable => {
    // A low `ulimit -n`: said as that, not as the loader's or SQLite's words (descriptors.ts).
    if (err instanceof OutOfDescriptors) return err;
    const hint = readOnlyFs(state.sqlite, err) || noSpaceLeft(state.sqlite, err);
    const fds = hint === '' && state.sqlite !== undefined ? sqliteOutOfDescriptors(state.sqlite, err) : undefined;
    if (fds) return fds;
    return new (err instanceof LedgerTooNew ? StateTooNew : StateUnavailable)(`state store unavailable (${label}): ${doing}${coerceError(err).message}${hint || fileSizeLimit(state.sqlite, err) || busy(state.sqlite, err) || damaged(state.sqlite, err)}`);
  };
  return {
    label,
    async openReader() {
      if (state.postgres === undefined) {
        let found: boolean;
        try {
          found = state.sqlite !== undefined && sqliteLedgerFound(state.sqlite);
        } catch (err) {
          if (err instanceof ConfigError) throw inConfigFile(config.configPath, err); // a loop of links
          throw unavailable('', err);
        }
        if (!found) return null;
      }
      return this.openLedger({ readOnly: true }).catch((err: unknown) => {
        if ((err as { cause?: unknown }).cause instanceof NoLedgerYet) return null;
        throw err;
      });
    },
    async openRunStarts() {
      try {
        return await this.openReader();
      } catch (err) {
        if (!((err as { cause?: unknown }).cause instanceof LedgerNeedsMigration)) throw err;
      }
      try {
        return await openOlderRunStarts(state, config.name);
      } catch (err) {
        if (err instanceof LedgerOwnedByAnotherJob) throw inConfigFile(config.configPath, ownedByAnother(state, err, config.configPath));
        if (err instanceof NoLedgerYet) return null;
        throw unavailable('', err);
      }
    },
    async takeRunLock(owner, log, scheduledTime, held, stop, passConfig) {
      // Before the flocks, which create the lock file and the ledger file: a run refused for
      // what stands beside the ledger (a directory at its -wal) left both behind, the ledger
      // an empty file that status then took for a first run still creating it.
      await this.assertOwnFiles();
      try {
        return await takeRunLock(config, owner, log, scheduledTime, held, stop, passConfig);
      } catch (err) {
        if (err instanceof StoppedBeforeLock) throw err; // the run drains: execute.ts says it
        if (err instanceof PassConfigDiffers) throw inConfigFile(config.configPath, err); // PostgreSQL: exit 78, naming the file
        if (err instanceof NotALedger) throw notALedger(err, config.configPath); // PostgreSQL: migrated before the lock
        if (err instanceof LedgerOwnedByAnotherJob) throw ownedByAnother(state, err, config.configPath);
        if (err instanceof EdgeError) throw err; // a CRONSAFE_RUN_GROUP of blanks: it says so itself
        if (err instanceof LedgerUnwritable) throw unavailable('', err); // names the ledger, not the lock file
        const full = state.postgres === undefined ? lockFileNoSpace(config.lock.path, err) : undefined;
        if (full) throw full;
        // PostgreSQL's lock errors name the database already; the flock's name only its file.
        throw unavailable(state.postgres === undefined ? `cannot take the run lock ${config.lock.path}: ` : '', err);
      }
    },
    async openLedger(opts = {}) {
      try {
        // [issue 10, case 1] the ledger belongs to config.name: another job's is refused.
        return await openLedger(state, {
          job: config.name,
          configPath: config.configPath,
          readOnly: opts.readOnly,
          operator: opts.operator,
          writeBehind: opts.writeBehind,
          stop: opts.stop,
          // An operator's command never records its job as the ledger's owner: a ledger no
          // run has named yet (its first run between its migration and its name, or one that
          // died there) became the requeue's job's, and the job it belonged to was refused (78).
          adopt: opts.operator === true ? false : opts.adopt,
          onRetry: opts.log && retryWarnings(opts.log),
          warn: migrationWarnings(opts.log ?? opts.migrationLog),
        });
      } catch (err) {
        if (err instanceof ConfigError) throw inConfigFile(config.configPath, err); // [issue 10, case 1]
        if (err instanceof StoppedBeforeLedger) throw err; // the run drains: holding-lock.ts says it
        if (err instanceof LedgerNotOwnedYet) {
          if (opts.operator === true) throw notOwnedYet(label, config.name);
          throw err; // openForSkip waits for the holder's name
        }
        const failed = unavailable('', err);
        // For openReader, and for openRunStarts, which reads an older ledger as it is.
        if (err instanceof NoLedgerYet || err instanceof LedgerNeedsMigration) failed.cause = err;
        // PostgresLedgerError's own word (not imported here: SQLite runs never load pg).
        failed.unreachable = (err as { transient?: unknown }).transient === true;
        throw failed;
      }
    },
    async openForSkip(stop) {
      // PostgreSQL checks and records the owner before its run lock (postgres/run-lock.ts);
      // with allowNetworkFilesystem no run flocks the SQLite ledger file to wait on.
      if (state.sqlite === undefined || state.sqlite === ':memory:' || state.allowNetworkFilesystem) return this.openLedger({ stop });
      const { lockLedgerFile } = await import('./sqlite/flock.js');
      const until = Date.now() + SKIP_OWNER_WAIT_MS;
      for (;;) {
        try {
          return await this.openLedger({ stop, adopt: false });
        } catch (err) {
          if (!(err instanceof LedgerNotOwnedYet)) throw err;
        }
        // No run holds the ledger file (the lock held was lock.path, shared with another
        // job's ledger; or the holder stopped before it recorded itself): none will record a
        // name now. This start records its own, under that flock, so that no run begins
        // on the ledger meanwhile.
        const release = lockLedgerFile(state.sqlite);
        if (release) {
          try {
            return await this.openLedger({ stop });
          } finally {
            release();
          }
        }
        if (Date.now() >= until || stop?.aborted) return null;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    unavailable: (doing, err) => unavailable(`${doing}: `, err),
    async assertOwnFiles() {
      if (state.postgres !== undefined || state.sqlite === undefined || state.sqlite === ':memory:') return;
      const { assertJournalOurs } = await import('./sqlite/start-journal.js');
      const { refuseDatabaseCompanions } = await import('./sqlite/companions.js');
      try {
        assertJournalOurs(state.sqlite);
        // Before the ledger exists too (validate opens only one that does): a directory, a
        // link or another database at `<ledger>-wal` passed validate, and every run was 78.
        refuseDatabaseCompanions(state.sqlite);
      } catch (err) {
        throw err instanceof ConfigError ? inConfigFile(config.configPath, err) : err;
      }
    },
  };
}

/**
 * SQLite: the flocks (sqlite/run-lock.ts). PostgreSQL: the advisory lock in the database,
 * shared by the pods of one run group (postgres/run-lock.ts, with pg: loaded only here).
 */
async function takeRunLock(config: Config, owner: string, log: Logger, scheduledTime?: Date, held?: (lock: string) => void, stop?: AbortSignal, passConfig?: PassConfig): Promise<RunLock | null> {
  const { state } = config;
  if (state.postgres === undefined) {
    // Loaded by the run that takes it, not by every command that opens the store.
    const { takeSqliteRunLock } = await import('./sqlite/run-lock.js');
    return takeSqliteRunLock({ lockPath: config.lock.path, ledgerFile: state.sqlite, allowNetworkFilesystem: state.allowNetworkFilesystem, owner, job: config.name, warn: (detail, msg) => log.warn(detail, msg), held });
  }
  const { groupIsOneJob, runGroup, tryPostgresRunLock } = await import('./postgres/run-lock.js');
  const group = runGroup(process.env, scheduledTime, owner);
  const lock = await tryPostgresRunLock(
    { url: state.postgres, schema: state.schema ?? DEFAULT_POSTGRES_SCHEMA, name: config.name, group, oneJob: groupIsOneJob(process.env), owner, ...(stop ? { stop } : {}), ...(passConfig ? { passConfig } : {}) },
    (msg, detail) => log.warn(detail ?? {}, msg),
  );
  if (lock) log.info({ group, joined: lock.joined }, lock.joined ? 'joined the pass of this run group' : 'run lock taken (PostgreSQL advisory lock)');
  return lock;
}
