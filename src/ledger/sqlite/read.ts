import type { Database } from 'better-sqlite3';
import type { DeadCursor } from '../dead-pages.js';
import type { DeadItem, ItemCounts, ItemRecord } from '../types.js';
import { toItemRecord, type ItemRow } from '../item-rows.js';
import { wellFormed } from '../well-formed.js';

/**
 * Each per-state count walks only its partial index; `done` (usually the bulk) is
 * the remainder of a count over the whole table, so no index on plain `state` is
 * needed (it would be rewritten by every transition).
 */
export const COUNTS_SQL = `SELECT
  (SELECT count(*) FROM items WHERE state = 'pending') AS pending,
  (SELECT count(*) FROM items WHERE state = 'claimed') AS claimed,
  (SELECT count(*) FROM items WHERE state = 'dead') AS dead,
  (SELECT count(*) FROM items) AS total`;

export const GET_SQL = `SELECT id, state, attempts, released, owner, lease_until, available_at, last_error,
  size, mtime_ms, done_at FROM items WHERE id = ?`;

/** Oldest dead first; LIMIT -1 means no limit in SQLite. */
export const LIST_DEAD_SQL = `SELECT id, attempts, last_error AS lastError, dead_at AS deadAt
  FROM items WHERE state = 'dead' ORDER BY dead_at, id LIMIT ?`;

/**
 * One page of deadPages: dead items strictly after (@at, @id). The range on items_dead
 * (dead_at) is the index; ties on dead_at (one result batch, <= 128 rows) are sorted by id.
 */
export const DEAD_PAGE_SQL = `SELECT id, attempts, last_error AS lastError, dead_at AS deadAt
  FROM items WHERE state = 'dead' AND dead_at >= @at AND (dead_at > @at OR id > @id)
  ORDER BY dead_at, id LIMIT @n`;

/** Read-only item queries (synchronous; the Ledger wraps them). */
export interface ReadOps {
  counts(): ItemCounts;
  get(id: string): ItemRecord | null;
  listDead(limit?: number): DeadItem[];
  deadPage(after: DeadCursor, n: number): DeadItem[];
}

export function makeReadOps(db: Database): ReadOps {
  const counts = db.prepare(COUNTS_SQL);
  const get = db.prepare(GET_SQL);
  const listDead = db.prepare(LIST_DEAD_SQL);
  const deadPage = db.prepare(DEAD_PAGE_SQL);
  return {
    counts() {
      const c = counts.get() as { pending: number; claimed: number; dead: number; total: number };
      return { pending: c.pending, claimed: c.claimed, done: c.total - c.pending - c.claimed - c.dead, dead: c.dead };
    },
    get(id) {
      const row = get.get(wellFormed(id)) as ItemRow | undefined;
      return row === undefined ? null : toItemRecord(row);
    },
    listDead: (limit) => listDead.all(limit ?? -1) as DeadItem[],
    deadPage: (after, n) => deadPage.all({ at: after.at, id: after.id, n }) as DeadItem[],
  };
}
