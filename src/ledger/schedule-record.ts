/**
 * The schedule a ledger's occurrences are counted under (Ledger.recordSchedule), kept in its
 * `meta` table (both adapters; no migration: that table holds key/value facts since SQLite's
 * 003 and PostgreSQL's 002, and a cronsafe from before this record reads past the row).
 *
 * Missed occurrences are those of schedule.cron between the last occurrence the ledger
 * accounts for and this fire. Once the expression (or its zone) changed, that last occurrence
 * was one of the old expression's, and every occurrence of the new one since was counted as
 * missed, though the old schedule had no fire there: a daily job made hourly reported 23
 * occurrences that "never ran". The record says which expression counted, and from which
 * occurrence: a fire under another expression counts none before it.
 */

/** The `meta` row that holds the record. */
export const SCHEDULE_KEY = 'schedule';

export interface ScheduleRecord {
  /** schedule.cron, its five fields as parsed (`@hourly` and `0 * * * *` are one schedule). */
  cron: string;
  /** The zone the expression was evaluated in (schedule.timeZone, or the process's). */
  timeZone: string;
  /** The first occurrence (epoch ms) planned under it: missed ones are counted from there. */
  since: number;
}

/** The row's value. */
export const scheduleValue = (r: ScheduleRecord): string => JSON.stringify({ cron: r.cron, timeZone: r.timeZone, since: r.since });

/** A row's value read back; null when there is none, or it is not one this cronsafe wrote. */
export function readSchedule(value: string | null | undefined): ScheduleRecord | null {
  if (value == null) return null;
  try {
    const r = JSON.parse(value) as Partial<ScheduleRecord> | null;
    if (typeof r?.cron !== 'string' || typeof r.timeZone !== 'string' || !Number.isSafeInteger(r.since)) return null;
    return { cron: r.cron, timeZone: r.timeZone, since: r.since! };
  } catch {
    return null;
  }
}

/** Whether `next` must replace `before` (none, or another expression or zone). */
export const replacesSchedule = (before: ScheduleRecord | null, next: ScheduleRecord): boolean =>
  before === null || before.cron !== next.cron || before.timeZone !== next.timeZone;
