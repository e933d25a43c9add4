import { filterParams, type FinishedFilter, type FinishedItem, type ItemPeek } from '../requeue-types.js';
import type { PostgresExecutor } from './connection.js';
import { ident, lookupIds, q, type Query } from './query.js';

// `cronsafe requeue` and `cronsafe plan` (issue 17). The filter is bound as parameters:
// the states as text[], the bounds as bigint or NULL when unbounded.

const FINISHED_AT = `CASE state WHEN 'done' THEN done_at ELSE dead_at END`;
/** The filter over $1 (states), $2 (after, inclusive), $3 (before, exclusive). */
const MATCHES = `state = ANY($1::text[])
  AND ($2::bigint IS NULL OR ${FINISHED_AT} >= $2) AND ($3::bigint IS NULL OR ${FINISHED_AT} < $3)`;

/** One page of finishedPages: a range of the primary key after $4 (COLLATE "C": byte order). */
export const finishedPageQuery = (schema: string, filter: FinishedFilter, afterId: string, n: number): Query => {
  const p = filterParams(filter);
  return q(
    `SELECT id, state, ${FINISHED_AT} AS "finishedAt" FROM ${ident(schema)}.items
WHERE id > $4 AND ${MATCHES} ORDER BY id LIMIT $5`,
    p.states,
    p.after,
    p.before,
    afterId,
    n,
  );
};

/**
 * Rows locked in id order (the order discovery's upsert and renewals lock in, so no
 * deadlock with a run in progress); FOR UPDATE re-checks the filter on the row's newest
 * version, so an item claimed since it was listed is left alone. A new cycle, as refresh
 * and dead-letter retry make one; last_error is kept. The count goes to items_requeued in
 * the same statement.
 *
 * seen_run becomes the latest pass's group (run_lock): discovery marks only pending rows,
 * so a done item a running pass already scanned still carries an older pass, and once
 * pending again that pass's end-of-scan forgetUnseen would take it for a deleted file. As
 * the pass's own, it is swept by that pass (as on SQLite: requeue.ts, PASS_KEY)
 * or found by the next scan.
 */
export const requeueQuery = (schema: string, ids: string[], filter: FinishedFilter, now: number): Query => {
  const p = filterParams(filter);
  const s = ident(schema);
  return q(
    `WITH r AS (
  SELECT id FROM ${s}.items WHERE id = ANY($4::text[]) AND ${MATCHES} ORDER BY id FOR UPDATE),
w AS (
  UPDATE ${s}.items AS i SET state = 'pending', attempts = 0, released = 0, available_at = $5,
    done_at = NULL, dead_at = NULL, updated_at = $5, seen_run = coalesce(p.run_group, i.seen_run)
  FROM r LEFT JOIN (SELECT run_group FROM ${s}.run_lock ORDER BY acquired_at DESC LIMIT 1) AS p ON true
  WHERE i.id = r.id RETURNING i.id),
bump AS (
  INSERT INTO ${s}.counters AS t (name, value) SELECT 'items_requeued', count(*) FROM w HAVING count(*) > 0
  ON CONFLICT (name) DO UPDATE SET value = t.value + EXCLUDED.value)
SELECT id FROM w`,
    p.states,
    p.after,
    p.before,
    ids,
    now,
  );
};

/** Known rows among $1, each by primary key. */
export const peekQuery = (schema: string, ids: string[]): Query =>
  q(
    `SELECT id, state, attempts, released, available_at AS "availableAt", done_at AS "doneAt",
  claimed_size AS "claimedSize", claimed_mtime_ms AS "claimedMtimeMs"
FROM ${ident(schema)}.items WHERE id = ANY($1::text[])`,
    ids,
  );

export interface RequeueOps {
  finishedPage(filter: FinishedFilter, afterId: string, n: number): Promise<FinishedItem[]>;
  requeue(ids: string[], filter: FinishedFilter, now: number): Promise<string[]>;
  peek(ids: string[]): Promise<ItemPeek[]>;
}

export function makeRequeueOps(ex: PostgresExecutor, schema: string): RequeueOps {
  return {
    finishedPage: (filter, afterId, n) => ex.query<FinishedItem>('finishedPages', finishedPageQuery(schema, filter, afterId, n)),
    async requeue(ids, filter, now) {
      const unique = lookupIds(ids);
      if (unique.length === 0) return [];
      const rows = await ex.tx('requeue', (exec) => exec<{ id: string }>(requeueQuery(schema, unique, filter, now)));
      return rows.map((r) => r.id);
    },
    peek(ids) {
      const keys = lookupIds(ids);
      return keys.length === 0 ? Promise.resolve([]) : ex.query<ItemPeek>('peek', peekQuery(schema, keys));
    },
  };
}
