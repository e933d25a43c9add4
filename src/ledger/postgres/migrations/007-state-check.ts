/**
 * Migration 007 (PostgreSQL): the same check on `items.state`, in a form that costs less to
 * enforce (issue 11, item 2).
 *
 * PostgreSQL reads a table's CHECK constraints anew for every statement that writes it
 * (stringToNode of the stored expression, then the planner's constant folding), once per
 * table the statement writes: a claim that completes 8 items and inserts or claims 8 more
 * writes `items` twice. 001's `state IN ('pending', ...)` is stored as an ARRAY[...] of four
 * constants, which that folding builds into an array by running a small executor, at every
 * statement; an array literal is stored as the one constant. The values allowed are the same:
 * a writer that puts any other state is still refused (23514), as before. Measured on the
 * claim statement (docs/benchmarks.md, 2026-12-06 12:20-12:52): about 6 us of the server's ~60 us
 * per item, most of what dropping every check of `items` saved.
 *
 * The other checks (attempts and released not negative, released <= attempts, an owner
 * exactly while claimed) hold no array and stay as 001 made them.
 * Validated against the rows there (a scan, no rewrite); the table is locked meanwhile, as
 * for every migration. Append-only: never edit once shipped; add `008-...` instead. `s` is
 * the quoted schema name.
 */
export const name = 'state-check';

export const sql = (s: string): string => `
ALTER TABLE ${s}.items DROP CONSTRAINT IF EXISTS items_state_check,
  ADD CONSTRAINT items_state_check CHECK (state = ANY ('{pending,claimed,done,dead}'::text[]));
`;
