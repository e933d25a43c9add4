import { accessSync, constants, existsSync, statfsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type Database from 'better-sqlite3';
import { checkJob, JOB_KEY } from '../identity.js';
import { LedgerNeedsMigration, LedgerTooNew, NoLedgerYet, sqliteLedgerFound } from '../no-ledger.js';
import { newDatabase } from './connection.js';
import type { RunStart, RunStartReader } from '../types.js';
import { GET_META_SQL } from './meta.js';
import { assertLedgerFile } from './migrate.js';
import { MIGRATIONS } from './migrations/index.js';
import { LAST_RUN_START_SQL } from './runs.js';
import { noAccess } from './unwritable.js';

/** The schema version this cronsafe reads and writes. */
const KNOWN = Math.max(...MIGRATIONS.map((m) => m.version));

/** Errors that mean "SQLite wanted to create the WAL index (-shm) and may not". */
const NO_SHM = /^SQLITE_(READONLY|CANTOPEN)/;

/** Errors that mean "SQLite could not make or grow a file" (the -shm, the -wal). */
const NO_SPACE = /^SQLITE_(IOERR|CANTOPEN|FULL)/;

/** The file system of `file` has no block or no inode left for this user. */
function noSpaceLeft(file: string): boolean {
  try {
    const s = statfsSync(dirname(file));
    return s.bavail === 0 || (s.files > 0 && s.ffree === 0);
  } catch {
    return false;
  }
}

/**
 * Open the ledger at `file` for reading only (status, dead-letter list): no migration,
 * no write, no file created. A WAL database needs its `-shm` index; when the directory is
 * read-only and no writer left one (the last connection removes it), the file is opened
 * `immutable` instead, which is exact as long as no write-ahead log is pending (checked).
 * So it is, too, when SQLite would make the `-wal` or `-shm` for a reader who may not write
 * the ledger (leftBehindUnwritable), and when its file system is full (no space for them).
 * Throws, with the path, when there is no ledger (NoLedgerYet) or its schema is not this cronsafe's;
 * LedgerOwnedByAnotherJob when `job` is given and another job's name is recorded.
 * `older`: a ledger of an older schema is opened as it is (openOlderRunStarts), not refused.
 */
export function openSqliteReadOnly(file: string, busyTimeoutMs: number, job?: string, older = false): Database.Database {
  if (!sqliteLedgerFound(file)) throw new NoLedgerYet(`no ledger file at ${file}: no run has created it yet (check state.sqlite)`);
  // An empty file is an empty database to SQLite, which the next run makes the ledger: a
  // first run's until it writes it (it takes its flock on the file first), or left by one
  // that could not write it (a full disk, no file descriptor left).
  if (sizeOf(file) === 0 && !sizeOf(`${file}-wal`)) {
    throw new NoLedgerYet(`no ledger in ${file} yet: the file is empty (a first run is creating it now, or could not write it: a full disk?); the next run creates it`);
  }
  refuseUnreadable(file);
  let full = false;
  if (!leftBehindUnwritable(file)) {
    const db = newDatabase(file, { readonly: true, fileMustExist: true, timeout: busyTimeoutMs });
    try {
      checkSchema(db, file, job, older);
      return db;
    } catch (err) {
      db.close();
      const code = String((err as { code?: unknown }).code);
      // A full file system refuses the -shm too (SQLITE_IOERR_SHMSIZE): status and
      // dead-letter list, which an operator reaches for when runs fail on a full state
      // volume, failed with it. Read as from a read-only directory.
      full = !NO_SHM.test(code) && NO_SPACE.test(code) && noSpaceLeft(file);
      if (!NO_SHM.test(code) && !full) throw err;
    }
  }
  const wal = statSync(`${file}-wal`, { throwIfNoEntry: false });
  if (wal && wal.size > 0) {
    throw new Error(
      full
        ? `cannot read ${file} read-only: its write-ahead log (${file}-wal) needs a ${file}-shm index, which its file system has no space left for: free some`
        : `cannot read ${file} read-only: its write-ahead log (${file}-wal) needs a ${file}-shm index, which this reader may not make (a read-only directory, or a ledger it may not write)`,
    );
  }
  const db = newDatabase(`file:${file.replace(/[%?#]/g, (c) => `%${c.charCodeAt(0).toString(16)}`)}?immutable=1`, { readonly: true });
  try {
    checkSchema(db, file, job, older);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * A ledger this user may not read (mode 0600 of the run's user, under a umask of 077): SQLite
 * said only "unable to open database file". Name the file, its owner and mode instead.
 */
function refuseUnreadable(file: string): void {
  const why = noAccess(file, 'read');
  if (why !== undefined) throw new Error(`${why.text}; ${why.mine ? `give its owner read permission (chmod u+r ${file})` : 'run this as that user'}`, { cause: why.cause });
}

/** The size of the regular file `file`; undefined when there is none. */
function sizeOf(file: string): number | undefined {
  const st = statSync(file, { throwIfNoEntry: false });
  return st?.isFile() ? st.size : undefined;
}

/**
 * Whether opening `file` would make its `-wal` or `-shm` for a reader who may not write the
 * ledger (an operator of the state directory's group, say). SQLite makes them owned by the
 * reader, with the ledger's mode, and leaves them: the ledger's owner could not write them,
 * and every run after failed ("attempt to write a readonly database"). Root's are given to
 * the ledger's owner, and a reader who may write the ledger makes files its writers can use.
 */
function leftBehindUnwritable(file: string): boolean {
  if (existsSync(`${file}-wal`) && existsSync(`${file}-shm`)) return false;
  try {
    accessSync(file, constants.W_OK);
    return false;
  } catch {
    return true;
  }
}

/** A reader must not guess at a schema it does not know; say which way the versions differ. */
function checkSchema(db: Database.Database, file: string, job: string | undefined, older: boolean): void {
  assertLedgerFile(db, file);
  const table = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).get();
  // No table at all (assertLedgerFile refused any other's): an empty database, as a first
  // run has it until its migrations commit, or leaves it when it could not write them (a full
  // disk); the next run makes it the ledger. Said to be "no cronsafe ledger", plan exited 1.
  if (table === undefined) throw new NoLedgerYet(`no ledger in ${file} yet: it holds no tables (a first run is creating it now, or could not write it: a full disk?); the next run creates it`);
  const v = (db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number | null }).v ?? 0;
  if (v < KNOWN && older) {
    // Its first run between the table and its first migration: no runs table yet.
    if (v < 1) throw new NoLedgerYet(`no ledger in ${file} yet: its first run is creating it now`);
    // A ledger from before job names (no meta table) is read as it is, as an unnamed one is.
    const named = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'`).get() !== undefined;
    if (job !== undefined && named) checkJob(db.prepare(GET_META_SQL).pluck().get(JOB_KEY) as string | undefined, job);
    return;
  }
  if (v < KNOWN) {
    throw new LedgerNeedsMigration(
      `ledger ${file} has schema version ${v}, older than this cronsafe's (${KNOWN}); \`cronsafe run\` migrates it (this command does not)`,
    );
  }
  if (v > KNOWN) throw new LedgerTooNew(`ledger ${file} has schema version ${v}, newer than this cronsafe knows (${KNOWN}); upgrade cronsafe`);
  // Checked, not recorded: a ledger no job has adopted yet is read as it is.
  if (job !== undefined) checkJob(db.prepare(GET_META_SQL).pluck().get(JOB_KEY) as string | undefined, job);
}

/**
 * The SQLite ledger at `file`, of an older schema than this cronsafe's, opened read-only for
 * the one read `cronsafe schedule` makes: the latest run's start (its runs table, the same
 * since the first schema). Never migrated: migrated by a newer cronsafe's `schedule`, the
 * job's own runs, on the older cronsafe still deployed, were refused ("newer than this
 * cronsafe knows") until it was upgraded. `job` is checked when the ledger records one.
 */
export function openOlderRunStarts(file: string, busyTimeoutMs: number, job?: string): RunStartReader {
  const db = openSqliteReadOnly(file, busyTimeoutMs, job, true);
  try {
    const last = db.prepare(LAST_RUN_START_SQL);
    return {
      lastRunStart: (atOrBefore) => Promise.resolve((last.get({ atOrBefore: atOrBefore ?? null }) as RunStart | undefined) ?? null),
      close: () => {
        db.close();
        return Promise.resolve();
      },
    };
  } catch (err) {
    db.close();
    throw err;
  }
}
