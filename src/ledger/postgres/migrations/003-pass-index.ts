/**
 * Migration 003 (PostgreSQL): indexes for a pass shared by many pods (issue 11).
 *
 * - `items_pending_pass (seen_run, available_at, id) WHERE state = 'pending'` matches the
 *   sweep's `WHERE seen_run = $pass ... ORDER BY available_at, id LIMIT k` exactly: a range
 *   scan that stops after k rows, with no sort, whatever the statistics say. A first pass
 *   plans against a table that was empty a moment ago; with the old (seen_run, available_at)
 *   index the planner sorted every pending row of the pass for each claim of 8.
 *   It covers everything `items_pending_due` did, which goes.
 * - `items_claimed_lease` goes: claimed rows are few (at most `concurrency` per pod), and
 *   the lease queries find them through `items_claimed_owner`, whose predicate they share.
 *   One index entry less for every claim.
 *
 * Append-only: never edit once shipped; add `004-...` instead. `s` is the quoted schema name.
 */
export const name = 'pass-index';

export const sql = (s: string): string => `
CREATE INDEX items_pending_pass ON ${s}.items (seen_run, available_at, id) WHERE state = 'pending';
DROP INDEX ${s}.items_pending_due;
DROP INDEX ${s}.items_claimed_lease;
`;
