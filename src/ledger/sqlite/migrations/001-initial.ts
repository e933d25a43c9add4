/**
 * Migration 001: the item ledger, runs, events and monotonic counters.
 *
 * Append-only: never edit a migration that has shipped; add `002-...` instead.
 * Times are epoch milliseconds (the callers' injected clock), never SQLite's clock.
 */
export const name = 'initial';

export const sql = `
CREATE TABLE items (
  id            TEXT PRIMARY KEY NOT NULL,
  state         TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'claimed', 'done', 'dead')),
  -- Counted on every claim; 'released' are the attempts drain handed back, so
  -- charged = attempts - released is what dead-lettering looks at.
  attempts      INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  released      INTEGER NOT NULL DEFAULT 0 CHECK (released >= 0 AND released <= attempts),
  -- The fencing token is (owner, attempts); an owner without a claim would be a lie.
  owner         TEXT CHECK ((state = 'claimed') = (owner IS NOT NULL)),
  lease_until   INTEGER,
  available_at  INTEGER NOT NULL,
  last_error    TEXT,
  seen_run      TEXT,
  size          INTEGER,
  mtime_ms      REAL,
  first_seen_at INTEGER NOT NULL,
  done_at       INTEGER,
  dead_at       INTEGER,
  -- Last state transition (discovery alone does not bump it).
  updated_at    INTEGER NOT NULL
);

-- Partial indexes: an index on plain 'state' is rewritten by every claim and
-- completion and cost ~25% of throughput; these are touched only while a row is
-- in the (usually small) state they cover.
-- claimDue / nextDueAt: this run's pending items by due time.
CREATE INDEX items_pending_due ON items (seen_run, available_at) WHERE state = 'pending';
-- reclaimOrphans / renew / counts.
CREATE INDEX items_claimed_owner ON items (owner) WHERE state = 'claimed';
-- listDead order, the dead-letter gauge.
CREATE INDEX items_dead ON items (dead_at) WHERE state = 'dead';

CREATE TABLE runs (
  seq           INTEGER PRIMARY KEY,
  run_id        TEXT NOT NULL UNIQUE,
  owner         TEXT NOT NULL,
  started_at    INTEGER NOT NULL,
  finished_at   INTEGER,
  -- No CHECK on outcome/kind: SQLite cannot alter a CHECK without rebuilding the
  -- table, and new outcomes/kinds are expected; the TypeScript types guard them.
  outcome       TEXT,
  scheduled_for INTEGER,
  counts        TEXT
);
CREATE INDEX runs_started ON runs (started_at);

CREATE TABLE events (
  seq    INTEGER PRIMARY KEY,
  kind   TEXT NOT NULL,
  at     INTEGER NOT NULL,
  detail TEXT
);
CREATE INDEX events_kind_at ON events (kind, at);

-- Monotonic totals for metrics that must outlive short-lived pods; bumped in the
-- same transaction as the transition they count.
CREATE TABLE counters (
  name  TEXT PRIMARY KEY NOT NULL,
  value INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES
  ('dead_lettered', 0), ('overruns', 0), ('lock_skips', 0), ('items_done', 0), ('items_failed', 0);
`;
