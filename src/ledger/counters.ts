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
  | 'items_requeued';

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
