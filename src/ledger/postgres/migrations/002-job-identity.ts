/**
 * Migration 002 (PostgreSQL): the job a ledger belongs to (issue 10), as SQLite's 003.
 *
 * - `meta`: key/value facts about the ledger; `job` is the config `name` of the owning
 *   job, recorded by the first open that passes one (src/ledger/identity.ts). A schema
 *   from before has none and is adopted by the first job to open it.
 *
 * Append-only: never edit once shipped; add `003-...` instead. `s` is the quoted schema name.
 */
export const name = 'job-identity';

export const sql = (s: string): string => `
CREATE TABLE ${s}.meta (
  key   text PRIMARY KEY,
  value text NOT NULL
);
`;
