/**
 * Migration 002 (PostgreSQL): the job a ledger belongs to, and live runs' heartbeats
 * (issue 10), as SQLite's 003.
 *
 * - `meta`: key/value facts about the ledger; `job` is the config `name` of the owning
 *   job, recorded by the first open that passes one (src/ledger/identity.ts). A schema
 *   from before has none and is adopted by the first job to open it.
 * - `runs.heartbeat_at`: written by a live run every lease.renewSeconds (see SQLite's 003).
 *
 * Append-only: never edit once shipped; add `003-...` instead. `s` is the quoted schema name.
 */
export const name = 'job-identity-and-heartbeat';

export const sql = (s: string): string => `
CREATE TABLE ${s}.meta (
  key   text PRIMARY KEY,
  value text NOT NULL
);

ALTER TABLE ${s}.runs ADD COLUMN heartbeat_at bigint;
CREATE INDEX runs_unfinished ON ${s}.runs (started_at) WHERE finished_at IS NULL;
`;
