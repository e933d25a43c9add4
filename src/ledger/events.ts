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

/**
 * Counters an event feeds, given the occurrence's earlier overrun and lock-skip events: an
 * overrun and a lock-skip that name one occurrence are one overrun. Under plain cron (no
 * Forbid) the fire that comes due during a run is both: the running pass's watch counts it,
 * and the process cron starts for it finds the lock held. Each occurrence counts as
 * max(overrun events, lock-skip events), so `cronsafe_overruns_total` counts occurrences,
 * not mechanisms; a second start for one occurrence (by hand) still counts.
 */
export function pairedEventCounters(kind: LedgerEventKind, occurrence: number | null | undefined, earlier: { overruns: number; lockSkips: number }): CounterName[] {
  const feeds = eventCounters(kind, occurrence);
  if (occurrence == null) return feeds;
  const paired = kind === 'overrun' ? earlier.lockSkips > earlier.overruns : kind === 'lock-skip' ? earlier.overruns > earlier.lockSkips : false;
  return paired ? feeds.filter((n) => n !== 'overruns') : feeds;
}

/** Whether an event of this kind can pair with another (pairedEventCounters). */
export const pairs = (kind: LedgerEventKind, occurrence: number | null | undefined): occurrence is number =>
  occurrence != null && (kind === 'overrun' || kind === 'lock-skip');
