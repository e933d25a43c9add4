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
