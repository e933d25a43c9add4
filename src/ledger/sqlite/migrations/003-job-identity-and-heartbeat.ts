/**
 * Migration 003: the job a ledger belongs to, and live runs' heartbeats (issue 10).
 *
 * - `meta`: small key/value facts about the ledger itself. `job` holds the config `name`
 *   of the job that owns it, written by the first open that passes one (src/ledger/identity.ts);
 *   a ledger from before this migration has none and is adopted by the first job to open it.
 * - `runs.heartbeat_at`: written by a live run every lease.renewSeconds; a start that got
 *   the run lock while another run of the job still heartbeats (its lock file was deleted)
 *   skips instead of reclaiming that run's claims. NULL: no beat yet (started_at counts).
 *
 * Append-only: never edit once shipped; add `004-...` instead.
 */
export const name = 'job-identity-and-heartbeat';

export const sql = `
CREATE TABLE meta (
  key   TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
) WITHOUT ROWID;

ALTER TABLE runs ADD COLUMN heartbeat_at INTEGER;
-- liveRuns: the unfinished runs (a handful at most, usually none).
CREATE INDEX runs_unfinished ON runs (started_at) WHERE finished_at IS NULL;
`;
