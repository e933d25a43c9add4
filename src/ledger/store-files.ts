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

/** What a run writes into its lock file: `host:pid:runId` and a newline (sqlite/flock.ts). */
const HOLDER_LINE = /^[^\s:]+:\d+:\S+\n?$/;

/**
 * True when a lock file's text is one a run may write over: a run's holder line, or blanks
 * (`touch` and flock(1) leave it empty, `echo > file` a newline). Anything else is a file a
 * user named by mistake: start-up refuses it (config/check-paths.ts), and the run's recheck
 * of its lock file never writes into it (sqlite/flock.ts).
 */
export const isLockFileText = (text: string): boolean => text.trim() === '' || HOLDER_LINE.test(text);
