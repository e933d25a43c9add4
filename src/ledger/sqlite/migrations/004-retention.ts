/**
 * Migration 004: retention (issue 17).
 *
 * - `items.missing_since`: set by a complete scan that did not find a done item's file,
 *   cleared by any discovery of it; such rows are forgotten after
 *   `retention.forgetMissingAfterDays`. The partial index holds only marked rows.
 * - `run_totals` / `event_totals`: what pruned runs and events leave behind, so runStats()
 *   and lastOccurrenceRecorded() never go back (event counts are in `counters` already).
 *
 * A file created before this migration keeps auto_vacuum=NONE (switching needs a VACUUM
 * of the whole file): see docs/operations.md. Append-only: add `005-...` instead.
 */
export const name = 'retention';

export const sql = `
ALTER TABLE items ADD COLUMN missing_since INTEGER;
CREATE INDEX items_missing ON items (missing_since) WHERE missing_since IS NOT NULL;

CREATE TABLE run_totals (
  outcome            TEXT PRIMARY KEY NOT NULL,
  runs               INTEGER NOT NULL,
  first_started      INTEGER,
  last_started       INTEGER,
  last_finished      INTEGER,
  last_scheduled_for INTEGER
) WITHOUT ROWID;

CREATE TABLE event_totals (
  kind            TEXT PRIMARY KEY NOT NULL,
  events          INTEGER NOT NULL,
  last_occurrence INTEGER
) WITHOUT ROWID;
`;
