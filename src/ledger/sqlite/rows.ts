import type { Claim, ItemRecord, ItemState } from '../types.js';

/** An `items` row as better-sqlite3 returns it. */
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

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * An id as the ledger stores it. A string with a lone surrogate (never produced by
 * node:fs, possible from other sources) would be stored as bytes that read back as
 * a different string, so its claim could never match again; the ledger stores and
 * looks it up with U+FFFD instead, on every path.
 */
export function wellFormed(id: string): string {
  return id.replace(LONE_SURROGATE, '\ufffd');
}

/**
 * A batch as one JSON parameter, ids made well-formed (see wellFormed). JSON.stringify
 * escapes a lone surrogate as `\udXXX`, so the common case costs one `includes`.
 */
export function batchJson(rows: unknown[][]): string {
  const json = JSON.stringify(rows);
  if (!json.includes('\\ud')) return json;
  return JSON.stringify(rows, (_key, v: unknown) => (typeof v === 'string' ? wellFormed(v) : v));
}
