import type { Database } from 'better-sqlite3';
import { batchJson, wellFormed } from '../well-formed.js';
import { filterParams, type FinishedFilter, type FinishedItem, type ItemPeek } from '../requeue-types.js';
import type { Counters } from './counters.js';
import { PASS_KEY } from './meta.js';

// `cronsafe requeue` and `cronsafe plan` (issue 17). The filter travels as parameters
// (@states a JSON array, @after/@before NULL when unbounded), so each statement is
// prepared once.

const FINISHED_AT = `CASE state WHEN 'done' THEN done_at ELSE dead_at END`;
const MATCHES = `state IN (SELECT value FROM json_each(@states))
  AND (@after IS NULL OR ${FINISHED_AT} >= @after) AND (@before IS NULL OR ${FINISHED_AT} < @before)`;

/** One page of finishedPages: a range of the primary key after @id, the filter on each row. */
export const FINISHED_PAGE_SQL = `SELECT id, state, ${FINISHED_AT} AS finishedAt FROM items
WHERE id > @id AND ${MATCHES} ORDER BY id LIMIT @n`;

/**
 * The guard is the whole filter, re-checked on each row inside the write transaction: an
 * item claimed (or finished again at another time) since it was listed is left alone.
 * A new cycle, as REFRESH_SQL and dead-letter retry make one; last_error is kept.
 */
/**
 * updated_at moves past the row's last transition even when the caller's clock is older
 * (it was read before a catch-up wrote a live run's journal: commands/requeue.ts): a
 * journal record of the run's is history only if the row changed after it, so a replay of
 * it must never find this row unchanged since (write-behind.ts, APPLY_STARTS_SQL).
 * seen_run becomes the pass that discovered last (PASS_KEY, meta.ts): discovery does not
 * rewrite an unchanged done row, so one a running pass has scanned already carries an older
 * pass, and pending again, that pass's end-of-scan forgetUnseen would take it for a deleted
 * file (a wrong "forgot pending items whose files are gone", cronsafe_items_gone_total).
 * As the pass's own, it is swept by that pass, or found by the next scan.
 */
export const REQUEUE_SQL = `UPDATE items SET state = 'pending', attempts = 0, released = 0, available_at = @now,
  done_at = NULL, dead_at = NULL, updated_at = max(@now, updated_at + 1),
  seen_run = coalesce((SELECT value FROM meta WHERE key = '${PASS_KEY}'), seen_run)
WHERE id IN (SELECT value FROM json_each(@ids)) AND ${MATCHES}
RETURNING id`;

/** Known rows among a batch of ids, each looked up by primary key (see CLAIMABLE in claim.ts). */
export const PEEK_SQL = `SELECT i.id, i.state, i.attempts, i.released, i.owner, i.available_at AS availableAt, i.done_at AS doneAt,
  i.claimed_size AS claimedSize, i.claimed_mtime_ms AS claimedMtimeMs
FROM json_each(@ids) AS j CROSS JOIN items AS i ON i.id = j.value`;

/** A peeked row with its claim's owner: the journal view applies a success to the claim it completes. */
export interface PeekRow extends ItemPeek {
  owner: string | null;
}

export interface RequeueOps {
  finishedPage(filter: FinishedFilter, afterId: string, n: number): FinishedItem[];
  requeue(ids: string[], filter: FinishedFilter, now: number): string[];
  peek(ids: string[]): PeekRow[];
}

export function makeRequeueOps(db: Database, counters: Counters): RequeueOps {
  const page = db.prepare(FINISHED_PAGE_SQL);
  const peek = db.prepare(PEEK_SQL);
  const requeue = db.prepare(REQUEUE_SQL).pluck();
  // IMMEDIATE: the write lock up front (a run's writes wait at most busy_timeout for it).
  const requeueTx = db.transaction((ids: string[], filter: FinishedFilter, now: number): string[] => {
    const moved = requeue.all({ ...params(filter), ids: batchJson([...new Set(ids.map(wellFormed))]), now }) as string[];
    counters.bump('items_requeued', moved.length);
    return moved;
  }).immediate;
  return {
    finishedPage: (filter, afterId, n) => page.all({ ...params(filter), id: afterId, n }) as FinishedItem[],
    requeue: (ids, filter, now) => (ids.length === 0 ? [] : requeueTx(ids, filter, now)),
    peek: (ids) => (ids.length === 0 ? [] : (peek.all({ ids: batchJson(ids) }) as PeekRow[])),
  };
}

function params(filter: FinishedFilter): { states: string; after: number | null; before: number | null } {
  const p = filterParams(filter);
  return { states: JSON.stringify(p.states), after: p.after, before: p.before };
}
