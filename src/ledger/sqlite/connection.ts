import { createRequire } from 'node:module';
import type Database from 'better-sqlite3';
import { requireNative } from '../../descriptors.js';

/**
 * better-sqlite3, loaded at the first open: its loader's "Cannot find module" for want of a
 * file descriptor (a low `ulimit -n`) is said as that (requireNative).
 */
let Sqlite: typeof Database | undefined;
const loadSqlite = (): typeof Database => (Sqlite ??= requireNative<typeof Database>(createRequire(import.meta.url), 'better-sqlite3', 'the SQLite driver, to open the ledger'));

/**
 * `new Database` with SQLite URI filenames enabled, so a read-only open can fall back to
 * `file:...?immutable=1` (see read-only.ts). better-sqlite3 reads SQLITE_USE_URI once, when
 * its addon loads on the first `new Database` of the process, so every open goes through
 * here; the variable is removed again at once, so handler children never inherit it. A
 * plain path (cronsafe's are absolute) means the same with URIs enabled or not.
 */
export function newDatabase(file: string, opts: Database.Options): Database.Database {
  const had = process.env.SQLITE_USE_URI;
  if (had === undefined) process.env.SQLITE_USE_URI = '1';
  try {
    return new (loadSqlite())(file, opts);
  } finally {
    if (had === undefined) delete process.env.SQLITE_USE_URI;
  }
}

/** Another connection holds the lock this statement needs (SQLITE_BUSY and its extended codes). */
export const isBusy = (err: unknown): boolean => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
};

/** SQLite could not grow a file (SQLITE_FULL: its file system full). */
export const isFull = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === 'SQLITE_FULL';
