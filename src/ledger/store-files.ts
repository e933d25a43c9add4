import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import path from 'node:path';
import type { StateConfig } from '../config/types.js';

/**
 * The files the store keeps on disk, which are never items wherever they sit (the scan
 * skips them): SQLite's ledger, its write-ahead log, shared-memory index, rollback journal
 * and start journal (sqlite/start-journal.ts, journalPath); none for a database. A leaf:
 * the scan, which config loading also uses, must not pull in the store.
 */
export function storeFiles(state: StateConfig): string[] {
  const db = state.sqlite;
  return db === undefined ? [] : [db, `${db}-wal`, `${db}-shm`, `${db}-journal`, `${db}-starts`];
}

/** How the ledger's quota check (block-probe.ts, quotaUsedUp) begins the name of its file. */
export const QUOTA_PROBE_NAME = '.cronsafe-quota-probe-';

/**
 * The beginnings of the names of files the store makes for a moment beside the ledger: the
 * quota check's one-block file, made in the ledger's directory when SQLite reports an I/O
 * error (and left there if the process is killed in that instant). Each is the path of that
 * directory joined with the name's beginning; the scan skips the files in it whose names
 * begin so (ScanOptions.skipPrefixes), as it skips storeFiles. Without this, a source that
 * holds the ledger's directory, with an include glob that matches dot files (`.*` at any depth),
 * could list the probe and record it as an item, one whose file was gone for its attempt.
 */
export function storeProbes(state: StateConfig): string[] {
  const db = state.sqlite;
  return db === undefined ? [] : [path.join(path.dirname(db), QUOTA_PROBE_NAME)];
}

/**
 * What a run writes into its lock file: `host:pid:runId@job` and a newline (sqlite/flock.ts).
 * The job (config `name`) tells a start that finds the lock held by another job (a
 * `lock.path` two configs share) from an overlap of its own runs. Earlier versions wrote
 * `host:pid:runId`, which this still matches, and they accept the new line (the runId field is `\S+`).
 */
const HOLDER_LINE = /^[^\s:]+:\d+:\S+\n?$/;

/**
 * The same line from a host whose name holds a blank or a `:` (Linux takes any byte but NUL
 * in a host name: `my host`, `x:y`): HOLDER_LINE refused it, so the lock file each run wrote
 * was "not a cronsafe lock" to the next start, and every run after the first on that host
 * failed with exit 78 until the file was emptied. Told apart by the run id a run writes
 * (newRunId: base-36 time, `-`, 8 hex digits) and a job name as NAME_RE allows it.
 */
const ODD_HOST_HOLDER_LINE = /^[^\n]*:\d+:[0-9a-z]+-[0-9a-f]{8}(@[a-z0-9-]+)?\n?$/;

/** The lock file line of the run `owner` (`host:pid:runId`) of the job `job`. */
export const holderLine = (owner: string, job: string): string => `${owner}@${job}`;

/** A holder line's run (`host:pid:runId`, as in the ledger's runs) and job (null when the line names none). */
export function parseHolder(line: string): { owner: string; job: string | null } {
  const at = line.lastIndexOf('@');
  return at < 0 ? { owner: line, job: null } : { owner: line.slice(0, at), job: line.slice(at + 1) };
}

/**
 * True when a lock file's text is one a run may write over: a run's holder line, or blanks
 * (`touch` and flock(1) leave it empty, `echo > file` a newline). Anything else is a file a
 * user named by mistake: start-up refuses it (config/check-paths.ts), and the run's recheck
 * of its lock file never writes into it (sqlite/flock.ts).
 */
export const isLockFileText = (text: string): boolean => text.trim() === '' || HOLDER_LINE.test(text) || ODD_HOST_HOLDER_LINE.test(text);

/**
 * The files SQLite keeps beside a ledger `<db>` under these suffixes: opening the ledger
 * deletes or overwrites what is there. Another SQLite database at such a path (a ledger
 * named `<db>-wal`) was deleted by the next run of `<db>`. (The start journal, `-starts`,
 * refuses what is not one of its own: sqlite/start-journal.ts.)
 */
export const COMPANION_SUFFIXES = ['-wal', '-shm', '-journal'] as const;

const SQLITE_HEADER = 'SQLite format 3\0';

/** Whether `file` is a regular file that begins as an SQLite database does; false when missing or unreadable. */
export function isSqliteDatabase(file: string): boolean {
  const head = readHead(file, SQLITE_HEADER.length);
  return head !== undefined && head.length === SQLITE_HEADER.length && head.toString('latin1') === SQLITE_HEADER;
}

/** Whether `file` is a regular file whose first 4 KiB hold no NUL byte (text, as no SQLite database is); false when missing or unreadable. */
export function isTextFile(file: string): boolean {
  const head = readHead(file, 4096);
  return head !== undefined && head.length > 0 && !head.includes(0);
}

/** Up to `n` bytes from the start of the regular file `file` (never through a link, never blocking on a FIFO); undefined when it is none or cannot be read. */
function readHead(file: string, n: number): Buffer | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    if (!fstatSync(fd).isFile()) return undefined;
    const buf = Buffer.alloc(n);
    return buf.subarray(0, readSync(fd, buf, 0, n, 0));
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
