import type { AttemptTotals, LedgerTotals } from './types.js';

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
  | 'items_requeued'
  /** The handler-time histogram (addHandlerTimes), one row per result and bucket, count and sum. */
  | `${typeof HANDLER_TIMES}${string}`;

/**
 * Prefix of the handler-time histogram's rows: `handler_seconds.<result>.<bucket index>`
 * (attempts in that bucket alone, not cumulative), `.count`, and `.us` (the sum, in
 * microseconds: counters are integers). No `:` in them: PostgreSQL shards a counter as `name:shard`.
 */
export const HANDLER_TIMES = 'handler_seconds.';

/** The handler-time rows among a ledger's counters, without the prefix (Ledger.handlerTimes). */
export function handlerTimesOf(rows: Iterable<readonly [string, number]>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, value] of rows) if (name.startsWith(HANDLER_TIMES)) out[name.slice(HANDLER_TIMES.length)] = Number(value);
  return out;
}

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
