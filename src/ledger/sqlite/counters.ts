import type { Database } from 'better-sqlite3';
import type { LedgerTotals } from '../types.js';

/** Names of rows in the `counters` table. */
export type CounterName = 'dead_lettered' | 'overruns' | 'lock_skips' | 'items_done' | 'items_failed';

export const BUMP_SQL = `INSERT INTO counters (name, value) VALUES (?, ?)
  ON CONFLICT (name) DO UPDATE SET value = value + excluded.value`;

/** Monotonic totals. `bump` must be called inside the transaction of the change it counts. */
export interface Counters {
  bump(name: CounterName, by: number): void;
  totals(): LedgerTotals;
}

export function makeCounters(db: Database): Counters {
  const bump = db.prepare(BUMP_SQL);
  const all = db.prepare('SELECT name, value FROM counters');
  return {
    bump(name, by) {
      if (by > 0) bump.run(name, by);
    },
    totals() {
      const v = new Map((all.all() as { name: string; value: number }[]).map((r) => [r.name, r.value]));
      const get = (n: CounterName): number => v.get(n) ?? 0;
      return {
        deadLettered: get('dead_lettered'),
        overruns: get('overruns'),
        lockSkips: get('lock_skips'),
        itemsDone: get('items_done'),
        itemsFailed: get('items_failed'),
      };
    },
  };
}
