/**
 * Migration 006: when discovery last wrote a row (`items.seen_at`), as PostgreSQL's 004 has.
 *
 * Discovery rewrote every row it found on every pass, done ones included, only to move
 * seen_run to the pass: 1,000,000 done files cost ~166 MiB of WAL per pass (every 5 minutes:
 * ~48 GB a day of SSD wear). A done row is now rewritten only when its stat changed, it is
 * marked missing, or its seen_at is a day old (SEEN_GRANULARITY_MS in
 * src/ledger/retention.ts); the missing-file walk counts a done row as found by a complete
 * scan when it carries the scan's pass, or a seen_at less than a day older than the scan's
 * start (prune.ts). NULL on every row from before: such a done row is written by its first
 * discovery after the upgrade (once, as before it was on every pass), and until then counts
 * as found only by the pass it carries, as before. Adding a nullable column without a
 * default rewrites nothing, so the upgrade touches no item page and redoes no item.
 *
 * Append-only: never edit once shipped; add `007-...` instead.
 */
export const name = 'seen-at';

export const sql = `
ALTER TABLE items ADD COLUMN seen_at INTEGER;
`;
