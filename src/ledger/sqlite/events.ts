import type { Database } from 'better-sqlite3';
import type { LedgerEventKind } from '../types.js';
import type { CounterName } from '../counters.js';
import { eventCounters, pairedEventCounters, pairs } from '../events.js';
import type { Counters } from './counters.js';

export const RECORD_EVENT_SQL = `INSERT INTO events (kind, at, detail, occurrence) VALUES (?, ?, ?, ?)`;

/** An occurrence's overrun and lock-skip events so far (pairedEventCounters); one seek on events_occurrence. */
export const OCCURRENCE_OVERRUNS_SQL = `SELECT
  count(CASE WHEN kind = 'overrun' THEN 1 END) AS overruns,
  count(CASE WHEN kind = 'lock-skip' THEN 1 END) AS lockSkips
  FROM events WHERE occurrence = ?`;

export const COUNT_EVENTS_SQL = `SELECT count(*) FROM events WHERE kind = ? AND at >= ?`;

/**
 * The latest occurrence accounted for: by a run that knew its occurrence, or by an
 * event about one, kept or pruned (retention keeps the greatest in run_totals and
 * event_totals). Each max() is one seek on its index (migration 002) or a tiny table.
 */
export const LAST_OCCURRENCE_SQL = `SELECT max(o) FROM (
  SELECT max(scheduled_for) AS o FROM runs
  UNION ALL SELECT max(occurrence) FROM events
  UNION ALL SELECT max(last_scheduled_for) FROM run_totals
  UNION ALL SELECT max(last_occurrence) FROM event_totals)`;


/** Operator events and the schedule's bookkeeping (synchronous; the Ledger wraps them). */
export interface EventOps {
  recordEvent(kind: LedgerEventKind, at: number, detail?: Record<string, unknown>, occurrence?: number): void;
  countEvents(kind: LedgerEventKind, since?: number): number;
  lastOccurrenceRecorded(): number | null;
}

export function makeEventOps(db: Database, counters: Counters): EventOps {
  const record = db.prepare(RECORD_EVENT_SQL);
  const count = db.prepare(COUNT_EVENTS_SQL).pluck();
  const lastOccurrence = db.prepare(LAST_OCCURRENCE_SQL).pluck();
  const occurrenceOverruns = db.prepare(OCCURRENCE_OVERRUNS_SQL);

  const recordTx = db.transaction(
    (kind: LedgerEventKind, at: number, detail: Record<string, unknown> | undefined, occurrence: number | null, feeds: readonly CounterName[]) => {
      // Read before the insert, in its (immediate) transaction: another process's event for
      // the occurrence is either counted here or waits for this one.
      if (pairs(kind, occurrence)) feeds = pairedEventCounters(kind, occurrence, occurrenceOverruns.get(occurrence) as { overruns: number; lockSkips: number });
      record.run(kind, at, detail === undefined ? null : JSON.stringify(detail), occurrence);
      for (const name of feeds) counters.bump(name, 1);
    },
  );

  return {
    recordEvent(kind, at, detail, occurrence) {
      recordTx.immediate(kind, at, detail, occurrence ?? null, eventCounters(kind, occurrence));
    },
    countEvents: (kind, since) => count.get(kind, since ?? Number.MIN_SAFE_INTEGER) as number,
    lastOccurrenceRecorded: () => (lastOccurrence.get() as number | null | undefined) ?? null,
  };
}
