import type { CounterName } from './counters.js';
import type { LedgerEventKind } from './types.js';

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

/**
 * The checks both adapters make before recording an event: `kind` and `occurrence` come
 * from callers outside TypeScript too (a module handler, a test). Returns the counters the
 * event feeds, so the adapter bumps them in the event's transaction.
 */
export function eventCounters(kind: LedgerEventKind, occurrence: number | null | undefined): CounterName[] {
  const feeds = EVENT_COUNTERS[kind] as CounterName[] | undefined;
  if (feeds === undefined) throw new Error(`recordEvent: unknown event kind ${JSON.stringify(kind)}`);
  // null means "no occurrence", like undefined.
  if (occurrence != null && !Number.isSafeInteger(occurrence)) {
    throw new TypeError(`recordEvent: occurrence must be integer epoch milliseconds, got ${String(occurrence)}`);
  }
  return feeds;
}
