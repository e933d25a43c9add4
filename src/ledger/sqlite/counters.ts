import type { Database } from 'better-sqlite3';
import type { AttemptTotals, LedgerTotals } from '../types.js';
import { handlerTimesOf, toAttemptTotals, toTotals, type CounterName } from '../counters.js';

export type { CounterName };

export const BUMP_SQL = `INSERT INTO counters (name, value) VALUES (?, ?)
  ON CONFLICT (name) DO UPDATE SET value = value + excluded.value`;

/** Monotonic totals. `bump` must be called inside the transaction of the change it counts. */
export interface Counters {
  bump(name: CounterName, by: number): void;
  totals(): LedgerTotals;
  attemptTotals(): AttemptTotals;
  handlerTimes(): Record<string, number>;
}

export function makeCounters(db: Database): Counters {
  const bump = db.prepare(BUMP_SQL);
  const all = db.prepare('SELECT name, value FROM counters');
  const rows = () => new Map((all.all() as { name: string; value: number }[]).map((r) => [r.name, r.value]));
  const read = (v = rows()): ((n: CounterName) => number) => (n) => v.get(n) ?? 0;
  return {
    bump(name, by) {
      if (by > 0) bump.run(name, by);
    },
    totals: () => toTotals(read()),
    handlerTimes: () => handlerTimesOf(rows()),
    attemptTotals: () => toAttemptTotals(read()),
  };
}
