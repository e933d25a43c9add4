/**
 * Migration 004 (PostgreSQL): retention (issue 17), as SQLite's 004, plus `seen_at`.
 *
 * - `items.seen_at`: when a discovery last wrote the row. A done row is rewritten by
 *   discovery only when its seen_at is a day old (SEEN_GRANULARITY_MS in
 *   src/ledger/retention.ts) or it is marked missing: rewriting every row every pass, as
 *   SQLite does, would churn a whole large table per pass here (MVCC). NULL on rows from
 *   before: their first discovery after the upgrade writes them once.
 * - `items.missing_since`, `run_totals`, `event_totals`: as SQLite's 004.
 *
 * Both columns are nullable without a default: adding them rewrites nothing.
 * Append-only: never edit once shipped; add `005-...` instead. `s` is the quoted schema name.
 */
export const name = 'retention';

export const sql = (s: string): string => `
ALTER TABLE ${s}.items ADD COLUMN seen_at bigint, ADD COLUMN missing_since bigint;
CREATE INDEX items_missing ON ${s}.items (missing_since) WHERE missing_since IS NOT NULL;

CREATE TABLE ${s}.run_totals (
  outcome            text PRIMARY KEY,
  runs               bigint NOT NULL,
  first_started      bigint,
  last_started       bigint,
  last_finished      bigint,
  last_scheduled_for bigint
);

CREATE TABLE ${s}.event_totals (
  kind            text PRIMARY KEY,
  events          bigint NOT NULL,
  last_occurrence bigint
);
`;
