/**
 * A line-for-line port of robfig/cron v3.0.1 `SpecSchedule.Next` (spec.go), the function the
 * Kubernetes CronJob controller steps for `spec.timeZone` schedules.
 *
 * Its DST behaviour is not a policy anyone chose; it falls out of walking wall-clock fields
 * with Go's time package, so we reproduce that walk, including Go's resolution of
 * `time.Date` for wall times that do not exist or exist twice. Checked against the Go library
 * itself: the DST tables in test/unit/schedule-dst.test.ts and the Go time.Date cases in
 * test/unit/schedule-robfig.test.ts came from Go, and so did ~14,000 random (zone, expression,
 * instant) triples near transitions in 16 zones, checked once outside the suite.
 */
import { dayMatches, type CronSpec } from './cron.js';
import { DAY, HOUR, MINUTE, SECOND, offsetAt, wallOf, type Wall } from './zone.js';

/**
 * Go's `time.Date(y, mo, d, h, mi, s, 0, loc)`: out-of-range fields are normalised, then the
 * zone offset is guessed from the wall time read as UTC and corrected once. The result for a
 * wall time in a gap or overlap depends on the sign of the offset, as in Go.
 */
export function goDate(zone: string, y: number, mo: number, d: number, h: number, mi: number, s: number): number {
  const local = new Date(0);
  local.setUTCFullYear(y, mo - 1, d);
  local.setUTCHours(h, mi, s, 0);
  const unix = local.getTime();
  let off = offsetAt(zone, unix);
  if (off !== 0) {
    // Go checks whether unix-off lies in the zone period it looked up; the offset in force
    // there differs exactly when it does not.
    const there = offsetAt(zone, unix - off);
    if (there !== off) off = there;
  }
  return unix - off;
}

/** Go's `t.AddDate(0, months, days)`: add to the wall-clock date, then `time.Date`. */
function addDate(zone: string, t: number, months: number, days: number): number {
  const w = wallOf(zone, t);
  return goDate(zone, w.year, w.month + months, w.day + days, w.hour, w.minute, w.second);
}

// robfig's walk needs at most a few thousand steps for any expression within its five years.
// It can loop forever where a zone skipped a whole day (Pacific/Apia on 2011-12-30: Go's
// time.Date maps the missing midnight back onto the day before, so AddDate(0, 0, 1) never
// advances); the Go library hangs there, we give up instead.
const MAX_STEPS = 100_000;

/**
 * robfig v3 `Next`: the first activation strictly after `after` (at second granularity), or
 * null when there is none within five calendar years (robfig returns the zero time then) or
 * robfig would never return.
 */
export function robfigNext(spec: CronSpec, zone: string, after: number): number | null {
  try {
    return walk(spec, zone, after);
  } catch (err) {
    if (err instanceof LoopGuard) return null;
    throw err;
  }
}

class LoopGuard extends Error {}

function walk(spec: CronSpec, zone: string, after: number): number | null {
  // "Start at the earliest possible time (the upcoming second)."
  let t = Math.floor(after / SECOND) * SECOND + SECOND;
  let w: Wall = wallOf(zone, t);
  let added = false;
  const yearLimit = w.year + 5;
  let steps = 0;
  const at = (next: number): void => {
    if (++steps > MAX_STEPS) throw new LoopGuard();
    t = next;
    w = wallOf(zone, t);
  };

  wrap: for (;;) {
    if (w.year > yearLimit) return null;

    while (!spec.months.has(w.month)) {
      if (!added) {
        added = true;
        at(goDate(zone, w.year, w.month, 1, 0, 0, 0));
      }
      at(addDate(zone, t, 1, 0));
      if (w.month === 1) continue wrap;
    }

    while (!dayMatches(spec, 'robfig', w.month, w.day, w.weekday)) {
      if (!added) {
        added = true;
        at(goDate(zone, w.year, w.month, w.day, 0, 0, 0));
      }
      at(addDate(zone, t, 0, 1));
      // robfig's own patch for zones whose midnight can be skipped (e.g. old Sao Paulo rules).
      if (w.hour !== 0) at(w.hour > 12 ? t + (24 - w.hour) * HOUR : t - w.hour * HOUR);
      if (w.day === 1) continue wrap;
    }

    while (!spec.hourSet.has(w.hour)) {
      if (!added) {
        added = true;
        at(goDate(zone, w.year, w.month, w.day, w.hour, 0, 0));
      }
      // Absolute hours: at fall-back the repeated hour is visited twice, in a gap never.
      at(t + HOUR);
      if (w.hour === 0) continue wrap;
    }

    while (!spec.minuteSet.has(w.minute)) {
      if (!added) {
        added = true;
        at(Math.floor(t / MINUTE) * MINUTE);
      }
      at(t + MINUTE);
      if (w.minute === 0) continue wrap;
    }

    // Standard five-field specs have second = 0 only.
    while (w.second !== 0) {
      if (!added) {
        added = true;
        at(Math.floor(t / SECOND) * SECOND);
      }
      const minute = Math.floor(t / MINUTE) * MINUTE + MINUTE;
      if (offsetAt(zone, t) % MINUTE === 0 && offsetAt(zone, minute) % MINUTE === 0) {
        // Whole-minute offsets (every zone since local mean time went): the first wall second
        // 0 is the next UTC minute. Same result as robfig's 59 one-second steps, far cheaper.
        at(minute);
        continue wrap;
      }
      at(t + SECOND);
      if (w.second === 0) continue wrap;
    }

    return t;
  }
}

/**
 * robfigNext, made to move forward. At some fall-backs robfig returns the instant it was given
 * or an earlier one (Pacific/Chatham, 2026-04-05: `*\/7 3 * * *` goes 03:42 +13:45 -> 02:49
 * +12:45 -> 03:00 +13:45, 49 minutes back; America/St_Johns before 2011, whose clocks went back
 * at 00:01, gets stuck on one instant), and a controller stepping it repeats fires for ever.
 * We retry from ever later instants instead, so fires strictly increase and every search ends.
 */
export function robfigStep(spec: CronSpec, zone: string, after: number): number | null {
  for (let skip = 0; skip <= 8 * DAY; skip = skip === 0 ? MINUTE : skip * 2) {
    const next = robfigNext(spec, zone, after + skip);
    if (next === null || next > after) return next;
  }
  return null;
}
