import type { Database } from 'better-sqlite3';
import type { ClaimedRow } from '../item-rows.js';
import { refreshParams } from '../refresh-params.js';
import type { DiscoveredItem, DiscoverOptions } from '../types.js';
import { batchJson, wellFormed } from '../well-formed.js';
import { SEEN_GRANULARITY_MS } from '../retention.js';
import { PASS_KEY } from './meta.js';
import { makeApplyRefresh } from './refresh.js';

// A batch travels as ONE JSON parameter ([[id, size, mtimeMs], ...]) expanded by
// json_each: one statement per batch instead of one per item took discover + claim +
// complete from ~57k to ~90k items/s (sequential ids, measured on one core).

/**
 * Upsert a batch: new ids become pending. A known row is rewritten (its stat, the pass in
 * seen_run, seen_at, its missing mark cleared) only when a reader needs it:
 * - pending or claimed: always, as before. A pending row must carry the pass (the sweep
 *   claims, and the end of scan spares, only the pass's: claim.ts, finish.ts); the claimed
 *   ones are few, and one handed back is pending again.
 * - done or dead: when its stat changed, it is marked missing (the mark must go), or its
 *   seen_at is NULL (a row from before migration 006), older than SEEN_GRANULARITY_MS (a
 *   day), or later than now (written while the clock was ahead: kept, it would hold the
 *   row's missing mark back until the clock got there). Dead letters are not few (every
 *   pass rewrote each one, as done rows before); nothing reads a dead row's seen mark, and
 *   what makes one pending again gives it the pass (refresh.ts, recover.ts, requeue.ts), as
 *   PostgreSQL leaves its dead rows alone.
 * A pending row never charged (attempts = released: new, handed back, requeued) has no backoff
 * to wait for: its available_at is the time of the write that made it pending, by the
 * writer's clock. Written by a clock ahead (a node's skewed clock, a clock stepped back
 * since), it held the item back from every later run until that time; each discovery brings
 * it down to the discoverer's now (never later: a backoff is only ever a charged failure's).
 * Otherwise nothing is written (SQLite skips the update of a row whose DO UPDATE WHERE is
 * false; RETURNING leaves it out, and a done row is not claimable anyway). Rewriting every
 * done row on every pass cost ~166 MiB of WAL per pass at 1,000,000 done files
 * (docs/benchmarks.md), only to move a mark nothing reads while the row stays done. An
 * unchanged done row keeps an older seen_run: the missing-file walk counts it as found by a
 * seen_at less than a day older than the scan's start (prune.ts), so a file is marked
 * missing up to a day late, never sooner; and what makes a done row pending again gives it
 * the pass (refresh.ts, requeue.ts). `WHERE true` is required by SQLite's grammar to tell
 * an upsert's ON CONFLICT from a join constraint after SELECT.
 */
const upsert = (values: string): string => `
INSERT INTO items (id, size, mtime_ms, seen_run, seen_at, available_at, first_seen_at, updated_at)
SELECT ${values}, @runId, @now, @now, @now, @now
FROM json_each(@batch) AS j WHERE true
ON CONFLICT (id) DO UPDATE SET
  available_at = CASE WHEN items.state = 'pending' AND items.attempts = items.released THEN min(items.available_at, excluded.available_at) ELSE items.available_at END,
  size = coalesce(excluded.size, size),
  mtime_ms = coalesce(excluded.mtime_ms, mtime_ms),
  seen_run = excluded.seen_run,
  seen_at = excluded.seen_at,
  missing_since = NULL
WHERE items.state IN ('pending', 'claimed')
  OR items.seen_at IS NULL OR items.seen_at < @now - ${SEEN_GRANULARITY_MS} OR items.seen_at > @now
  OR items.missing_since IS NOT NULL
  OR (excluded.size IS NOT NULL AND excluded.size IS NOT items.size)
  OR (excluded.mtime_ms IS NOT NULL AND excluded.mtime_ms IS NOT items.mtime_ms)`;

/** Discovery of a batch of `[id, size, mtimeMs]` (size and mtimeMs may be null). */
export const DISCOVER_SQL = upsert('j.value ->> 0, j.value ->> 1, j.value ->> 2');

/**
 * DISCOVER_SQL for a batch of bare ids (`["a", "b"]`), none with a stat: what a scan gives
 * unless `refresh: on-change` asks for stats (or an item is a link). A JSON a third as
 * long, and no id parsed out of an array of its own (100,000 items: ~75 ms less CPU).
 */
export const DISCOVER_IDS_SQL = upsert('j.value, NULL, NULL');

/** Record the pass as the one discovering (PASS_KEY), written once per pass. */
export const RECORD_PASS_SQL = `INSERT INTO meta (key, value) VALUES ('${PASS_KEY}', @runId)
  ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE value IS NOT excluded.value`;

/**
 * What discovery reads back of every row it wrote (inserted or rewritten: the done and dead
 * rows it leaves alone are not claimable), for batches with no refresh policy: the rows come
 * back from the write itself, instead of a second walk of the batch (CLAIMABLE_SQL) that
 * parses the JSON and looks every id up again. RETURNING order is unspecified, so the caller
 * puts them in batch order. Read as arrays (`raw`, ReturnedRow): better-sqlite3 built an
 * object of 7 named columns per row far more slowly, and the row's state and available_at
 * were read only to tell whether it is claimable now, which the statement says itself
 * (100,000 items: ~115 ms less CPU).
 */
const RETURNING = `
RETURNING rowid, id, attempts, released, updated_at, state = 'pending' AND available_at <= @now`;

/** A row as RETURNING gives it (raw): claimable is 1 when the row is pending and past its backoff. */
type ReturnedRow = [rowid: number, id: string, attempts: number, released: number, updated_at: number, claimable: 0 | 1];

/** Discovery with the claimable facts of every row it wrote (RETURNING). */
export const DISCOVER_RETURNING_SQL = DISCOVER_SQL + RETURNING;

/** DISCOVER_RETURNING_SQL for a batch of bare ids (DISCOVER_IDS_SQL). */
export const DISCOVER_IDS_RETURNING_SQL = DISCOVER_IDS_SQL + RETURNING;

/**
 * Rows of a batch that can be claimed now: pending and past their backoff. CROSS JOIN
 * and the unary `+` pin the plan to "walk the batch, look each id up by primary key";
 * otherwise the planner may scan a state index over the whole table.
 */
const CLAIMABLE = `
  SELECT i.rowid, i.id, i.attempts, i.released, i.updated_at FROM json_each(@batch) AS j CROSS JOIN items AS i ON i.id = j.value ->> 0
  WHERE +i.state = 'pending' AND +i.available_at <= @now`;

/** Which rows of a discovered batch are claimable now, in batch order (with what a claim needs). */
export const CLAIMABLE_SQL = `${CLAIMABLE} ORDER BY j.key`;

/** CLAIMABLE_SQL for a batch of bare ids (DISCOVER_IDS_SQL's). */
export const CLAIMABLE_IDS_SQL = `${CLAIMABLE.replace('j.value ->> 0', 'j.value')} ORDER BY j.key`;

/** The largest rowid (0: no row), before a batch that may be all new (see makeDiscover). */
const LAST_ROWID_SQL = `SELECT coalesce(max(rowid), 0) FROM items`;
/** The id stored at a rowid, to check a new batch's first and last rows landed where expected. */
const ID_AT_SQL = `SELECT id FROM items WHERE rowid = ?`;

/** Discovery (synchronous; the Ledger wraps it): the batch's claimable rows, in batch order. Claims nothing. */
export type Discover = (items: DiscoveredItem[], opts: DiscoverOptions) => ClaimedRow[];

export function makeDiscover(db: Database): Discover {
  const discover = db.prepare(DISCOVER_SQL);
  const discoverReturning = db.prepare(DISCOVER_RETURNING_SQL).raw(true);
  const discoverIdsReturning = db.prepare(DISCOVER_IDS_RETURNING_SQL).raw(true);
  const claimable = db.prepare(CLAIMABLE_SQL);
  const discoverIds = db.prepare(DISCOVER_IDS_SQL);
  const claimableIds = db.prepare(CLAIMABLE_IDS_SQL);
  const lastRowid = db.prepare(LAST_ROWID_SQL).pluck();
  const idAt = db.prepare(ID_AT_SQL).pluck();
  const recordPass = db.prepare(RECORD_PASS_SQL);
  const applyRefresh = makeApplyRefresh(db);
  // Whether the last batch of bare ids was all new: the next is tried as such (allNew).
  let lastAllNew = true;

  /**
   * A batch of bare, well-formed, distinct ids whose rows are all new, written without
   * RETURNING: each row is then known without reading it back (100,000 new ids: ~37% less
   * CPU in discovery, docs/benchmarks.md; RETURNING's temporary rows and an array per row
   * were most of it). A new row gets max(rowid) + 1 (items has no AUTOINCREMENT), so when
   * the upsert inserted every id (changes and the last rowid say so: an id that found its
   * row inserted nothing, and a rewritten row counts in changes but takes no rowid), the
   * batch holds rowids last+1..last+n in its order, each pending, never charged, due at
   * `now`: what RETURNING would have said. The first and last rows are read back by rowid
   * to check it; that check is what decides (the last insert's rowid may be another table's,
   * meta's, when this upsert inserted nothing).
   * Null when the batch was not all new (the rows are written all the same: the caller reads
   * the claimable ones with CLAIMABLE_IDS_SQL). A pass over files seen before finds known ids
   * in its first batch and goes back to RETURNING, which returns only the rows it rewrote.
   */
  const allNew = (ids: string[], order: number[] | null, batch: string, runId: string, now: number): ClaimedRow[] | null => {
    const before = lastRowid.get() as number;
    const info = discoverIds.run({ batch, runId, now });
    const n = ids.length;
    // The k-th id written (in `batch`) is ids[order[k]]: it got rowid before + 1 + k.
    const at = (k: number): number => (order === null ? k : order[k]!);
    lastAllNew =
      info.changes === n &&
      Number(info.lastInsertRowid) === before + n &&
      idAt.get(before + 1) === ids[at(0)] &&
      idAt.get(before + n) === ids[at(n - 1)];
    if (!lastAllNew) return null;
    const rows: ClaimedRow[] = new Array<ClaimedRow>(n);
    for (let k = 0; k < n; k++) {
      const i = at(k);
      rows[i] = { id: ids[i]!, attempts: 0, released: 0, rowid: before + 1 + k, updated_at: now };
    }
    return rows;
  };

  // IMMEDIATE: take the write lock up front, so a concurrent writer makes us wait
  // (busy_timeout) instead of failing with SQLITE_BUSY at the first write.
  const discoverTx = db.transaction((items: DiscoveredItem[], opts: DiscoverOptions): ClaimedRow[] => {
    const seen = new Set<string>();
    const ids: string[] = [];
    let stats = false;
    for (const it of items) {
      if (seen.has(it.id)) continue;
      seen.add(it.id);
      ids.push(it.id);
      stats ||= it.size !== undefined || it.mtimeMs !== undefined;
    }
    const refresh = refreshParams(opts.refresh);
    recordPass.run({ runId: opts.runId });
    // Bare ids are written in id order, not the scan's: a directory lists in its own order
    // (hash order on ext4), which put each new id at a random place in the id index; sorted,
    // a batch's ids go into each index page together, and its commit writes fewer pages
    // (100,000 files: ~17% fewer WAL writes, docs/benchmarks.md). The rows still come back
    // in the batch's order (the Ledger's contract).
    const order = refresh === null && !stats ? idOrder(ids) : null;
    const written = order === null ? ids : order.map((i) => ids[i]!);
    if (refresh === null && !stats && lastAllNew) {
      // An ill-formed id is stored well-formed (batchJson escapes it: `\ud`): RETURNING says how.
      const batch = JSON.stringify(written);
      if (!batch.includes('\\ud')) {
        const rows = allNew(ids, order, batch, opts.runId, opts.now);
        if (rows !== null) return rows;
        return claimableIds.all({ batch: order === null ? batch : JSON.stringify(ids), now: opts.now }) as ClaimedRow[];
      }
    }
    if (refresh === null) {
      const params = { batch: stats ? batchJson(withStats(items, seen)) : batchJson(written), runId: opts.runId, now: opts.now };
      return inBatchOrder(ids, (stats ? discoverReturning : discoverIdsReturning).all(params) as ReturnedRow[]);
    }
    const batch = batchJson(withStats(items, seen));
    discover.run({ batch, runId: opts.runId, now: opts.now });
    applyRefresh(batch, refresh, opts.now, opts.runId);
    return claimable.all({ batch, now: opts.now }) as ClaimedRow[];
  });

  return (items, opts) => (items.length === 0 ? [] : discoverTx.immediate(items, opts));
}

/**
 * The positions of `ids` in id order (JavaScript's string order: the index's for ASCII ids;
 * any other order only costs locality), or null when they are in that order already.
 */
function idOrder(ids: string[]): number[] | null {
  let sorted = true;
  for (let i = 1; i < ids.length && sorted; i++) sorted = ids[i - 1]! < ids[i]!;
  if (sorted) return null;
  const order = Array.from(ids, (_id, i) => i);
  return order.sort((a, b) => (ids[a]! < ids[b]! ? -1 : 1));
}

/** The `[id, size, mtimeMs]` of each item whose id is in `ids`, the first of each id only, in order. */
function withStats(items: DiscoveredItem[], ids: Set<string>): [string, number | null, number | null][] {
  const rows: [string, number | null, number | null][] = [];
  const left = new Set(ids);
  for (const it of items) if (left.delete(it.id)) rows.push([it.id, it.size ?? null, it.mtimeMs ?? null]);
  return rows;
}

/** A returned row's claimable facts. */
const claimed = (r: ReturnedRow): ClaimedRow => ({ id: r[1], attempts: r[2], released: r[3], rowid: r[0], updated_at: r[4] });

/**
 * The claimable rows of an upsert's RETURNING, in the order of the batch (what CLAIMABLE_SQL
 * gives). RETURNING comes in the batch's order in practice: then its rows are walked beside
 * the batch (no map); any other order, or an id stored other than as given, is put in order
 * through a map.
 */
function inBatchOrder(batch: string[], returned: ReturnedRow[]): ClaimedRow[] {
  const inOrder = inReturnedOrder(batch, returned);
  if (inOrder !== null) return inOrder;
  const byId = new Map<string, ReturnedRow>();
  for (const r of returned) if (r[5]) byId.set(r[1], r);
  const out: ClaimedRow[] = [];
  if (byId.size === 0) return out;
  for (const id of batch) {
    // RETURNING gives stored ids: an ill-formed one is stored well-formed (well-formed.ts).
    const key = byId.has(id) ? id : wellFormed(id);
    const r = byId.get(key);
    if (r === undefined) continue;
    byId.delete(key); // two ids stored as one row: one candidate
    out.push(claimed(r));
  }
  return out;
}

/**
 * inBatchOrder when every returned row's id is, in order, one of the batch's (the batch's ids
 * are distinct: makeDiscover drops repeats): the claimable ones, else null.
 */
function inReturnedOrder(batch: string[], returned: ReturnedRow[]): ClaimedRow[] | null {
  const out: ClaimedRow[] = [];
  let j = 0;
  for (const r of returned) {
    while (j < batch.length && batch[j] !== r[1]) j++;
    if (j === batch.length) return null;
    j++;
    if (r[5]) out.push(claimed(r));
  }
  return out;
}
