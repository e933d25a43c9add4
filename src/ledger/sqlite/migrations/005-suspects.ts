/**
 * Migration 005: the suspects' index (issue 9: an item that kills the process must not take
 * the good items in flight beside it down with it).
 *
 * A suspect is a pending item charged twice or more, the last time by a run that died while
 * it ran (recover.ts writes that last error): the sweep takes them one at a time (claim.ts). The
 * partial index holds only them, a handful after a crash and none otherwise, so asking
 * for the next one costs a seek however large the pass. Its predicate is claim.ts's
 * SUSPECT, word for word: SQLite uses a partial index only for a query that repeats it.
 *
 * Append-only: never edit once shipped; add `006-...` instead.
 */
export const name = 'suspects';

export const sql = `
CREATE INDEX items_suspect ON items (seen_run, available_at)
  WHERE state = 'pending' AND attempts - released >= 2 AND last_error GLOB 'attempt * abandoned: the run that claimed it died';
`;
