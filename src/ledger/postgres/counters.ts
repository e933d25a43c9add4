import { handlerTimesOf, toAttemptTotals, toTotals, type CounterGet, type CounterName } from '../counters.js';
import type { AttemptTotals, LedgerTotals } from '../types.js';
import type { PostgresExecutor } from './connection.js';
import { ident, q, type Query } from './query.js';

export type { CounterName };

export type Bumps = Partial<Record<CounterName, number>>;

/**
 * Add to several counters in one statement, in name order (every transaction locks
 * counter rows in the same order, so two pods' result writes cannot deadlock on them).
 * Null when there is nothing to add. Must run in the transaction of the change it counts.
 */
export function bumpQuery(schema: string, bumps: Bumps): Query | null {
  const entries = Object.entries(bumps)
    .filter(([, by]) => by !== undefined && by > 0)
    .sort(([a], [b]) => (a < b ? -1 : 1));
  if (entries.length === 0) return null;
  return q(
    `INSERT INTO ${ident(schema)}.counters AS c (name, value)
SELECT * FROM unnest($1::text[], $2::bigint[])
ON CONFLICT (name) DO UPDATE SET value = c.value + EXCLUDED.value`,
    entries.map(([name]) => name),
    entries.map(([, by]) => by),
  );
}

/** Every counter, its shards (`name:shard`, see finish.ts) summed. */
export const countersQuery = (schema: string): Query =>
  q(`SELECT split_part(name, ':', 1) AS name, sum(value)::bigint AS value FROM ${ident(schema)}.counters GROUP BY 1`);

export function readCounters(rows: { name: string; value: number }[]): CounterGet {
  const v = new Map(rows.map((r) => [r.name, r.value]));
  return (n) => v.get(n) ?? 0;
}

/** Monotonic totals (bumps are in the statements of the changes they count: bumpQuery). */
export interface Counters {
  totals(): Promise<LedgerTotals>;
  attemptTotals(): Promise<AttemptTotals>;
  handlerTimes(): Promise<Record<string, number>>;
}

export function makeCounters(ex: PostgresExecutor, schema: string): Counters {
  return {
    totals: async () => toTotals(readCounters(await ex.query('totals', countersQuery(schema)))),
    handlerTimes: async () => handlerTimesOf((await ex.query<{ name: string; value: number }>('handlerTimes', countersQuery(schema))).map((r) => [r.name, r.value] as const)),
    attemptTotals: async () => toAttemptTotals(readCounters(await ex.query('attemptTotals', countersQuery(schema)))),
  };
}
