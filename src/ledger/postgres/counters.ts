import type { AttemptTotals, LedgerTotals } from '../types.js';
import { ident, q, type Query } from './query.js';

/** Rows of the `counters` table; a missing row reads as 0 and is created by its first bump. */
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

export const countersQuery = (schema: string): Query => q(`SELECT name, value FROM ${ident(schema)}.counters`);

type Get = (n: CounterName) => number;

export function readCounters(rows: { name: string; value: number }[]): Get {
  const v = new Map(rows.map((r) => [r.name, r.value]));
  return (n) => v.get(n) ?? 0;
}

export function toTotals(get: Get): LedgerTotals {
  return {
    deadLettered: get('dead_lettered'),
    overruns: get('overruns'),
    lockSkips: get('lock_skips'),
    missed: get('missed'),
    stale: get('stale'),
    itemsDone: get('items_done'),
    itemsFailed: get('items_failed'),
  };
}

export function toAttemptTotals(get: Get): AttemptTotals {
  // items_failed counts every charged failure; those that dead-lettered are their own result.
  const dead = get('dead_lettered');
  return {
    succeeded: get('items_done'),
    failed: get('items_failed') - dead,
    dead,
    released: get('items_released'),
    fenced: get('items_fenced'),
  };
}
