import type { Database } from 'better-sqlite3';
import type { AttemptTotals, LedgerTotals } from '../types.js';

/**
 * Names of rows in the `counters` table. Rows missing from an older database (the
 * released/fenced ones came after migration 001) are created by the first BUMP_SQL and
 * read as 0 until then, so adding a name needs no migration.
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
  | 'items_fenced';

export const BUMP_SQL = `INSERT INTO counters (name, value) VALUES (?, ?)
  ON CONFLICT (name) DO UPDATE SET value = value + excluded.value`;

/** Monotonic totals. `bump` must be called inside the transaction of the change it counts. */
export interface Counters {
  bump(name: CounterName, by: number): void;
  totals(): LedgerTotals;
  attemptTotals(): AttemptTotals;
}

export function makeCounters(db: Database): Counters {
  const bump = db.prepare(BUMP_SQL);
  const all = db.prepare('SELECT name, value FROM counters');
  const read = (): ((n: CounterName) => number) => {
    const v = new Map((all.all() as { name: string; value: number }[]).map((r) => [r.name, r.value]));
    return (n) => v.get(n) ?? 0;
  };
  return {
    bump(name, by) {
      if (by > 0) bump.run(name, by);
    },
    totals() {
      const get = read();
      return {
        deadLettered: get('dead_lettered'),
        overruns: get('overruns'),
        lockSkips: get('lock_skips'),
        missed: get('missed'),
        stale: get('stale'),
        itemsDone: get('items_done'),
        itemsFailed: get('items_failed'),
      };
    },
    attemptTotals() {
      const get = read();
      // items_failed counts every charged failure; those that dead-lettered are their own result.
      const dead = get('dead_lettered');
      return {
        succeeded: get('items_done'),
        failed: get('items_failed') - dead,
        dead,
        released: get('items_released'),
        fenced: get('items_fenced'),
      };
    },
  };
}
