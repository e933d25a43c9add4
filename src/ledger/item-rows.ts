import type { Claim, ItemRecord, ItemState } from './types.js';

/**
 * The `items` row as both adapters read it, and its mappers (same column names in SQLite
 * and PostgreSQL; pg's int8 parser already gives numbers).
 */

/** An `items` row as the adapters read it. */
export interface ItemRow {
  id: string;
  state: ItemState;
  attempts: number;
  released: number;
  owner: string | null;
  lease_until: number | null;
  available_at: number;
  last_error: string | null;
  size: number | null;
  mtime_ms: number | null;
  done_at: number | null;
}

/** What a claiming `UPDATE ... RETURNING` gives back. */
export interface ClaimedRow {
  id: string;
  attempts: number;
  released: number;
  /**
   * SQLite: the row's rowid as discovery read it, so the write-behind flush finds the row
   * without the id index (sqlite/finish.ts START_AND_COMPLETE_BY_ROWID_SQL). A hint only:
   * every write by it also matches the id.
   */
  rowid?: number;
  /**
   * SQLite: the row's updated_at as discovery read it. A row changed at a time later than
   * the run's clock (a requeue or retry whose clock, or whose row's last writer's, was ahead)
   * is not started from the journal: its journalled start would be dated before the change,
   * and the flush, which never applies a start older than the row's last change, would
   * leave it pending to be claimed again (write-behind.ts settle).
   */
  updated_at?: number;
}

export function toItemRecord(r: ItemRow): ItemRecord {
  return {
    id: r.id,
    state: r.state,
    attempts: r.attempts,
    released: r.released,
    owner: r.owner,
    lastError: r.last_error,
    availableAt: r.available_at,
    leaseUntil: r.lease_until,
    doneAt: r.done_at,
    size: r.size,
    mtimeMs: r.mtime_ms,
  };
}

export function toClaim(r: ClaimedRow, owner: string): Claim {
  return { id: r.id, owner, attempt: r.attempts, charged: r.attempts - r.released };
}
