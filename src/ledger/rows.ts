import type { AttemptTotals, Claim, ItemRecord, ItemState, LedgerEventKind, LedgerTotals, RunOutcome, RunRecord, RunStats } from './types.js';

/**
 * Row shapes and mappers shared by the ledger adapters (same column names in SQLite and
 * PostgreSQL; pg's int8 parser already gives numbers).
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
export function batchJson(rows: unknown[]): string {
  const json = JSON.stringify(rows);
  if (!json.includes('\\ud')) return json;
  return JSON.stringify(rows, (_key, v: unknown) => (typeof v === 'string' ? wellFormed(v) : v));
}

/**
 * Rows of the `counters` table (both adapters). A row missing from an older database is
 * created by its first bump and reads as 0 until then, so adding a name needs no migration.
 */
export type CounterName =
  | 'dead_lettered'
  | 'overruns'
  | 'lock_skips'
  | 'missed'
  | 'stale'
  | 'items_done'
  | 'items_failed'
  | 'items_released'
  | 'items_fenced'
  | 'items_gone'
  /** Items put back to pending by `cronsafe requeue` or `dead-letter retry`. */
  | 'items_requeued';

/**
 * Totals each event kind feeds. A start that finds the lock held is an overrun too
 * (DESIGN.md: cronsafe_overruns_total counts both).
 */
export const EVENT_COUNTERS: Record<LedgerEventKind, CounterName[]> = {
  overrun: ['overruns'],
  'lock-skip': ['overruns', 'lock_skips'],
  missed: ['missed'],
  stale: ['stale'],
};

/** Reads one counter (0 when its row does not exist yet). */
export type CounterGet = (n: CounterName) => number;

export function toTotals(get: CounterGet): LedgerTotals {
  return {
    deadLettered: get('dead_lettered'),
    overruns: get('overruns'),
    lockSkips: get('lock_skips'),
    missed: get('missed'),
    stale: get('stale'),
    itemsDone: get('items_done'),
    itemsFailed: get('items_failed'),
    requeued: get('items_requeued'),
  };
}

export function toAttemptTotals(get: CounterGet): AttemptTotals {
  // items_failed counts every charged failure; those that dead-lettered are their own result.
  const dead = get('dead_lettered');
  return {
    succeeded: get('items_done'),
    failed: get('items_failed') - dead,
    dead,
    released: get('items_released'),
    fenced: get('items_fenced'),
    gone: get('items_gone'),
  };
}

/** A `runs` row; `counts` as the driver returns it (pg: parsed JSONB; SQLite: parse it first). */
export interface RunRow {
  run_id: string;
  owner: string;
  started_at: number;
  finished_at: number | null;
  outcome: RunOutcome | null;
  scheduled_for: number | null;
  counts: Record<string, number> | null;
}

export const toRunRecord = (r: RunRow): RunRecord => ({
  runId: r.run_id,
  owner: r.owner,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  outcome: r.outcome,
  scheduledFor: r.scheduled_for,
  counts: r.counts,
});

/** One row per outcome of the run-stats query, folded into RunStats. */
export interface RunStatsRow {
  outcome: RunOutcome | null;
  runs: number;
  first_started: number;
  last_started: number;
  last_finished: number | null;
}

export function toRunStats(rows: RunStatsRow[]): RunStats {
  const out: RunStats = {
    byOutcome: { completed: 0, drained: 0, failed: 0, 'skipped-locked': 0, stale: 0, died: 0 },
    firstStartedAt: null,
    lastStartedAt: null,
    lastSuccessAt: null,
  };
  for (const r of rows) {
    if (r.outcome !== null) out.byOutcome[r.outcome] = (out.byOutcome[r.outcome] ?? 0) + r.runs;
    if (r.outcome === 'completed') out.lastSuccessAt = r.last_finished;
    out.firstStartedAt = Math.min(out.firstStartedAt ?? Infinity, r.first_started);
    out.lastStartedAt = Math.max(out.lastStartedAt ?? -Infinity, r.last_started);
  }
  return out;
}
