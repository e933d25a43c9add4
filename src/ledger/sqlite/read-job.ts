import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import { JOB_KEY } from '../identity.js';
import { GET_META_SQL } from './meta.js';

/**
 * The job recorded in the ledger file, or null when there is none (a ledger from before
 * job identities, or one never opened by a job). Read-only: config loading uses it to
 * decide whether an old default ledger may be adopted, without changing it. The SQLite
 * addon is loaded on this call, not on import, so config loading does not pay for it.
 * Throws when the file cannot be read.
 */
export function readJob(file: string): string | null {
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").get();
    if (table === undefined) return null;
    return (db.prepare(GET_META_SQL).pluck().get(JOB_KEY) as string | undefined) ?? null;
  } finally {
    db.close();
  }
}
