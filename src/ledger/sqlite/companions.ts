import { lstatSync, readlinkSync } from 'node:fs';
import { whereItIs } from '../../real-path.js';
import { ConfigError } from '../../errors.js';
import { COMPANION_SUFFIXES, isSqliteDatabase } from '../store-files.js';

// What stands where SQLite keeps its files beside the ledger, checked before SQLite sees it:
// by the opens (index.ts), and by `validate` before the ledger exists (open.ts assertOwnFiles),
// with no database driver loaded.

/**
 * Another SQLite database where SQLite keeps a file beside this ledger (a ledger named
 * `<file>-wal`, made while this one's log was not there): opening this ledger deleted it
 * (its write-ahead log is removed at close) or would overwrite it. Refused before SQLite
 * sees it (exit 78).
 */
export function refuseDatabaseCompanions(file: string): void {
  refuseNonFileCompanions(file);
  for (const suffix of COMPANION_SUFFIXES) {
    if (!isSqliteDatabase(`${file}${suffix}`)) continue;
    throw new ConfigError(
      `state.sqlite: ${file}${suffix} is an SQLite database (another ledger, named after this one?), not the ${suffix.slice(1)} file SQLite keeps beside ${file}: opening this ledger would delete or overwrite it, so nothing was opened. Give that database another name`,
      undefined,
      'state.sqlite',
    );
  }
}

const COMPANION_ROLE: Record<(typeof COMPANION_SUFFIXES)[number], string> = {
  '-wal': 'write-ahead log',
  '-shm': 'write-ahead log index',
  '-journal': 'rollback journal',
};

/**
 * Something other than a regular file where SQLite keeps one beside the ledger (a symbolic
 * link, a directory, a FIFO). SQLite said only "unable to open database file", "disk I/O
 * error" or "attempt to write a readonly database", which read as a failing or read-only
 * disk, and removed a FIFO named `-wal` at close. Refused before SQLite sees it (exit 78),
 * as the start journal refuses one (start-journal.ts). SQLite keeps these files beside the
 * ledger's real path (it follows a link to the ledger), so that is where they are looked for.
 */
function refuseNonFileCompanions(file: string): void {
  const real = whereItIs(file);
  for (const suffix of COMPANION_SUFFIXES) {
    const companion = `${real}${suffix}`;
    let st;
    try {
      st = lstatSync(companion, { throwIfNoEntry: false });
    } catch {
      continue; // a directory this user may not search: SQLite's own error says so
    }
    if (st === undefined || st.isFile()) continue;
    let what = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : 'a device';
    if (st.isSymbolicLink()) {
      let target = '?';
      try {
        target = readlinkSync(companion);
      } catch {
        // vanished meanwhile: still named as a link
      }
      what = `a symbolic link (to ${target})`;
    }
    throw new ConfigError(
      `state.sqlite: ${companion} is ${what}, where SQLite keeps the ${COMPANION_ROLE[suffix]} of ${real} as a regular file of its own, so the ledger was not opened. Remove it (SQLite makes the file itself)`,
      undefined,
      'state.sqlite',
    );
  }
}
