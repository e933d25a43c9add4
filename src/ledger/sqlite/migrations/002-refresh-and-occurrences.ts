/**
 * Migration 002: what the schedule needs (issue 3).
 *
 * - `claimed_size` / `claimed_mtime_ms`: the stat of the version an item was last
 *   claimed at, so `refresh: on-change` can tell a changed file from the one processed.
 *   Backfilled for finished rows that have a stat (only possible when an older cronsafe
 *   ran with on-change's stat scan): their last-seen stat is the best guess at the version
 *   processed. Rows without one (the default `never` scan records no stat) are left
 *   alone, so upgrading a large ledger that never stat'ed touches no item page.
 * - `events.occurrence`: the schedule occurrence (epoch ms) an event is about, so the
 *   runner can find the last occurrence accounted for and record the missed ones once.
 * - `missed` / `stale` totals, seeded from events already recorded.
 *
 * Append-only: never edit once shipped; add `003-...` instead.
 */
export const name = 'refresh-and-occurrences';

export const sql = `
ALTER TABLE items ADD COLUMN claimed_size INTEGER;
ALTER TABLE items ADD COLUMN claimed_mtime_ms REAL;
UPDATE items SET claimed_size = size, claimed_mtime_ms = mtime_ms
  WHERE state IN ('done', 'dead') AND (size IS NOT NULL OR mtime_ms IS NOT NULL);

ALTER TABLE events ADD COLUMN occurrence INTEGER;
-- lastOccurrenceRecorded: max() over each index is one seek.
CREATE INDEX events_occurrence ON events (occurrence);
CREATE INDEX runs_scheduled_for ON runs (scheduled_for);

INSERT INTO counters (name, value)
  SELECT 'missed', count(*) FROM events WHERE kind = 'missed'
  UNION ALL SELECT 'stale', count(*) FROM events WHERE kind = 'stale';
`;
