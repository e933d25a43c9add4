/**
 * Migration 003: the job a ledger belongs to (issue 10).
 *
 * - `meta`: small key/value facts about the ledger itself. `job` holds the config `name`
 *   of the job that owns it, written by the first open that passes one (src/ledger/identity.ts);
 *   a ledger from before this migration has none and is adopted by the first job to open it.
 *
 * Append-only: never edit once shipped; add `004-...` instead.
 */
export const name = 'job-identity';

export const sql = `
CREATE TABLE meta (
  key   TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
) WITHOUT ROWID;
`;
