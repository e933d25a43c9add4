/**
 * Migration 005 (PostgreSQL): the suspects' index, as SQLite's 005 (issue 9: an item that
 * kills the process must not take the good items in flight beside it down with it).
 *
 * A suspect is a pending item charged twice or more, the last time by a run that died while
 * it ran (suspect.ts). Every claim asks for one (a pod runs one at a time): the partial index
 * holds only them, none unless pods died, so asking costs a seek however large the pass.
 * Its predicate is suspect.ts's SUSPECT, word for word, so that the planner can prove it.
 *
 * Append-only: never edit once shipped; add `006-...` instead. `s` is the quoted schema name.
 */
export const name = 'suspects';

export const sql = (s: string): string => `
CREATE INDEX items_suspect ON ${s}.items (seen_run, available_at, id)
  WHERE state = 'pending' AND attempts - released >= 2 AND last_error LIKE 'attempt % abandoned: %';
`;
