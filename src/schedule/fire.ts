/**
 * Which occurrence a run belongs to, and whether it should run at all. Pure: the clock and
 * the scheduled time (from the Job's annotation, `--scheduled-time` or
 * CRONSAFE_SCHEDULED_TIME) are parameters.
 */
import type { ScheduleConfig } from '../config/types.js';
import { ScheduledTimeError } from '../errors.js';
import { parseCron } from './cron.js';
import { firstPassOf, latestOccurrence, occurrencesBetween, wallTime, type SchedulePolicy } from './occurrences.js';
import { defaultTimeZone } from './zone.js';

export type FireSource = 'scheduled-time' | 'latest-occurrence';

export interface Fire {
  /** The occurrence this run belongs to. */
  occurrence: Date;
  /** The same, as the zone's wall clock shows it (RFC 3339 with offset). */
  local: string;
  timeZone: string;
  source: FireSource;
  /** now - occurrence, in ms. */
  ageMs: number;
  /** graceSeconds is set and the fire is older than that. */
  stale: boolean;
  /** The second fire of a fixed-time schedule in a repeated fall-back hour. */
  repeatedWallTime: boolean;
  /** When repeatedWallTime: the first pass's instant with the same wall time (its fire, if Kubernetes made one). */
  firstPass: Date | null;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2}))$/i;

/**
 * The fields are in range: Date.parse rolls 2026-02-30 over to March 2 and reads 24:00 as
 * the next day, where RFC 3339 (and Go's time.Parse, which Kubernetes uses) has no such date.
 */
function inRange(m: RegExpExecArray): boolean {
  const [year, month, day, hour, minute, second, offH, offM] = m.slice(1, 9).map((f) => Number(f ?? 0));
  if (month === undefined || month < 1 || month > 12 || day === undefined || day < 1) return false;
  const days = new Date(Date.UTC(year ?? 0, month, 0)).getUTCDate();
  return day <= days && (hour ?? 0) <= 23 && (minute ?? 0) <= 59 && (second ?? 0) <= 59 && (offH ?? 0) <= 23 && (offM ?? 0) <= 59;
}

/** Parse the Job's `batch.kubernetes.io/cronjob-scheduled-timestamp` (RFC 3339, with offset). */
export function parseScheduledTime(value: string, from: string): Date {
  const m = RFC3339.exec(value.trim());
  const ms = m && inRange(m) ? Date.parse(value.trim()) : NaN;
  if (Number.isNaN(ms)) {
    const why = m ? ': no such date or time' : '';
    throw new ScheduledTimeError(`${from}: expected an RFC 3339 time with offset such as 2026-11-01T01:30:00-04:00, got ${JSON.stringify(value)}${why}`);
  }
  return new Date(ms);
}

/**
 * How far a scheduled time may lead this machine's clock: the skew between the clock of
 * the CronJob controller, which stamps the Job, and a node's. More is a mistake (a wrong
 * year), and recording that fire would stop the overrun and missed counts until it came.
 */
export const MAX_SCHEDULED_AHEAD_MS = 5 * 60_000;

/** `at`, unless it is more than MAX_SCHEDULED_AHEAD_MS after `now`: then a ScheduledTimeError naming `from`. */
export function refuseAhead(at: Date, from: string, now: Date): Date {
  if (at.getTime() - now.getTime() > MAX_SCHEDULED_AHEAD_MS) {
    throw new ScheduledTimeError(
      `${from}: ${at.toISOString()} is in the future (now ${now.toISOString()}); a run's scheduled time is the occurrence it was started for, at most ${MAX_SCHEDULED_AHEAD_MS / 60_000} minutes ahead of this clock`,
    );
  }
  return at;
}

/**
 * The fire this run belongs to: the scheduled time when one is given, else the latest
 * occurrence at `now` under Kubernetes' (robfig) semantics. Null when the expression has
 * no occurrence at or before now.
 */
export function identifyFire(
  schedule: ScheduleConfig,
  now: Date,
  scheduledTime: Date | undefined,
  policy: SchedulePolicy = 'kubernetes',
): Fire | null {
  const timeZone = schedule.timeZone ?? defaultTimeZone();
  const occurrence = scheduledTime ?? latestOccurrence(schedule.cron, timeZone, now, policy);
  if (!occurrence) return null;
  const ageMs = now.getTime() - occurrence.getTime();
  const firstPass = parseCron(schedule.cron).kind === 'fixed-time' ? firstPassOf(occurrence, timeZone) : null;
  return {
    occurrence,
    local: wallTime(occurrence, timeZone).iso,
    timeZone,
    source: scheduledTime ? 'scheduled-time' : 'latest-occurrence',
    ageMs,
    stale: schedule.graceSeconds != null && ageMs > schedule.graceSeconds * 1000,
    repeatedWallTime: firstPass !== null,
    firstPass,
  };
}

/** How many missed occurrences are counted one by one at most (a minute's schedule off for ~70 days). */
export const MISSED_COUNT_LIMIT = 100_000;

/**
 * Occurrences strictly between the last one recorded in the ledger and this fire: fires
 * that never produced a run (the pod never started, the CronJob was suspended, Forbid
 * skipped them). At most `limit`, the earliest; `total` counts them all up to
 * MISSED_COUNT_LIMIT, and `atLeast` says there were more than that (not counted: the
 * log line must not give a cap for the number). `alsoOf`: only those that this other
 * expression (in its zone) has too: the schedule before a change of schedule.cron or
 * schedule.timeZone, whose fires the ledger's last occurrence was counted by. One that
 * cannot be read now (a zone this machine does not know) has none in common.
 */
export function missedOccurrences(
  schedule: ScheduleConfig,
  lastRecorded: Date | null,
  fire: Date,
  limit = 100,
  policy: SchedulePolicy = 'kubernetes',
  alsoOf?: { cron: string; timeZone: string },
): { missed: Date[]; total: number; atLeast: boolean } {
  if (!lastRecorded || lastRecorded.getTime() >= fire.getTime()) return { missed: [], total: 0, atLeast: false };
  const zone = schedule.timeZone ?? defaultTimeZone();
  const between = (cron: string, timeZone: string) => occurrencesBetween(cron, timeZone, lastRecorded, new Date(fire.getTime() - 1), policy, MISSED_COUNT_LIMIT + 1);
  let all = between(schedule.cron, zone);
  if (alsoOf) {
    let before: Set<number>;
    try {
      before = new Set(between(alsoOf.cron, alsoOf.timeZone).map((d) => d.getTime()));
    } catch {
      before = new Set();
    }
    all = all.filter((d) => before.has(d.getTime()));
  }
  const atLeast = all.length > MISSED_COUNT_LIMIT;
  return { missed: all.slice(0, limit), total: Math.min(all.length, MISSED_COUNT_LIMIT), atLeast };
}
