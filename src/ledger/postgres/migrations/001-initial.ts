/**
 * Migration 001 (PostgreSQL): the item ledger, runs, events, monotonic counters and the
 * run-lock record. The same model as the SQLite ledger's 001 + 002 (PostgreSQL started
 * there), plus `done_by` and `run_lock`, which only matter with many pods.
 *
 * Append-only: never edit once shipped; add `002-...` instead. Times are epoch
 * milliseconds (bigint) from the callers' injected clock, never the server's clock.
 * `s` is the quoted schema name.
 */
export const name = 'initial';

export const sql = (s: string): string => `
CREATE TABLE ${s}.items (
  -- COLLATE "C": byte order, as SQLite sorts, and cheaper than a locale's collation.
  id               text COLLATE "C" PRIMARY KEY,
  state            text NOT NULL DEFAULT 'pending'
                   CHECK (state IN ('pending', 'claimed', 'done', 'dead')),
  -- charged = attempts - released is what dead-lettering looks at.
  attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  released         integer NOT NULL DEFAULT 0 CHECK (released >= 0 AND released <= attempts),
  -- The fencing token is (owner, attempts); an owner without a claim would be a lie.
  owner            text CHECK ((state = 'claimed') = (owner IS NOT NULL)),
  lease_until      bigint,
  available_at     bigint NOT NULL,
  last_error       text,
  seen_run         text,
  size             bigint,
  mtime_ms         double precision,
  -- The stat of the version last claimed (refresh: on-change compares with it).
  claimed_size     bigint,
  claimed_mtime_ms double precision,
  first_seen_at    bigint NOT NULL,
  done_at          bigint,
  -- The owner whose completion was applied (audit: which pod did it).
  done_by          text,
  dead_at          bigint,
  updated_at       bigint NOT NULL
);
-- Partial indexes, touched only while a row is in the (usually small) state they cover.
CREATE INDEX items_pending_due ON ${s}.items (seen_run, available_at) WHERE state = 'pending';
CREATE INDEX items_claimed_owner ON ${s}.items (owner) WHERE state = 'claimed';
CREATE INDEX items_claimed_lease ON ${s}.items (lease_until) WHERE state = 'claimed';
CREATE INDEX items_dead ON ${s}.items (dead_at) WHERE state = 'dead';

CREATE TABLE ${s}.runs (
  seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id        text NOT NULL UNIQUE,
  owner         text NOT NULL,
  started_at    bigint NOT NULL,
  finished_at   bigint,
  outcome       text,
  scheduled_for bigint,
  counts        jsonb
);
CREATE INDEX runs_started ON ${s}.runs (started_at);
CREATE INDEX runs_scheduled_for ON ${s}.runs (scheduled_for);

CREATE TABLE ${s}.events (
  seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind       text NOT NULL,
  at         bigint NOT NULL,
  detail     jsonb,
  occurrence bigint
);
CREATE INDEX events_kind_at ON ${s}.events (kind, at);
CREATE INDEX events_occurrence ON ${s}.events (occurrence);

-- Monotonic totals, bumped in the transaction of the change they count.
CREATE TABLE ${s}.counters (
  name  text PRIMARY KEY,
  value bigint NOT NULL DEFAULT 0
);

-- Which run group owns the pass now (see lock.ts). Written only by the session that holds
-- the pass lock exclusively, so while anyone holds it shared the row names their group.
CREATE TABLE ${s}.run_lock (
  name        text PRIMARY KEY,
  run_group   text NOT NULL,
  owner       text NOT NULL,
  acquired_at bigint NOT NULL
);
`;
