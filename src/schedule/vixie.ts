/**
 * Occurrences under Vixie cron's DST rules (as cronsim implements them), for `cronsafe daemon`.
 *
 * The schedule is a fixed set of instants, built date by date from the local wall times the
 * expression names:
 * - wall time exists once: that instant;
 * - wall time exists twice (fall-back): a wildcard schedule fires at both, a fixed-time one
 *   at the first only;
 * - wall time does not exist (spring-forward gap): a wildcard schedule skips it, a fixed-time
 *   one fires at the instant of the jump.
 * Because next and latest both search that one set, they always agree, and an instant that two
 * wall times map to (two skipped times, or a skipped time and the jump's own minute) is one
 * occurrence.
 */
import { dayMatches, type CronSpec } from './cron.js';
import { DAY, HOUR, MINUTE, gapEnd, instantsForWall, offsetsNear } from './zone.js';

// No zone is more than 14 h from UTC; with a margin, the instants of local date D lie in
// [D*DAY - MARGIN, (D+1)*DAY + MARGIN].
const MARGIN = 16 * HOUR;

function instantsFor(spec: CronSpec, zone: string, local: number): number[] {
  const found = instantsForWall(zone, local);
  if (spec.kind === 'wildcard') return found;
  if (found.length > 0) return [found[0]!];
  return [gapEnd(zone, local)];
}

/** Whether local date number `date` (days since 1970-01-01) matches the day fields. */
function dateMatches(spec: CronSpec, date: number): boolean {
  const d = new Date(date * DAY);
  return dayMatches(spec, 'vixie', d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCDay());
}

/** Bounds on `local - instant` for wall times on local date `date`. */
function offsetRange(zone: string, date: number): { min: number; max: number } {
  const offs = [...offsetsNear(zone, date * DAY), ...offsetsNear(zone, (date + 1) * DAY)];
  return { min: Math.min(...offs), max: Math.max(...offs) };
}

/** The first occurrence strictly after `after`, searching `horizon` ms ahead; else null. */
export function vixieNext(spec: CronSpec, zone: string, after: number, horizon: number): number | null {
  let best: number | null = null;
  const last = Math.floor((after + horizon) / DAY);
  for (let date = Math.floor((after - MARGIN) / DAY); date <= last; date++) {
    if (best !== null && date * DAY - MARGIN > best) break;
    if (!dateMatches(spec, date)) continue;
    const off = offsetRange(zone, date);
    // Hours whose wall times all map to instants at or before `after`, skipped without a look.
    const firstHour = Math.floor((after + off.min - date * DAY) / HOUR);
    hours: for (const h of spec.hours) {
      if (h < firstHour) continue;
      for (const m of spec.minutes) {
        const local = date * DAY + h * HOUR + m * MINUTE;
        // Every instant for this wall time lies in [local - off.max, local - off.min].
        if (local - off.min <= after) continue;
        if (best !== null && local - off.max > best) break hours;
        for (const c of instantsFor(spec, zone, local)) {
          if (c > after && (best === null || c < best)) best = c;
        }
      }
    }
  }
  return best;
}

/** The last occurrence at or before `now`, searching `horizon` ms back; else null. */
export function vixieLatest(spec: CronSpec, zone: string, now: number, horizon: number): number | null {
  let best: number | null = null;
  const first = Math.floor((now - horizon) / DAY);
  for (let date = Math.floor((now + MARGIN) / DAY); date >= first; date--) {
    if (best !== null && (date + 1) * DAY + MARGIN < best) break;
    if (!dateMatches(spec, date)) continue;
    const off = offsetRange(zone, date);
    const lastHour = Math.floor((now + off.max - date * DAY) / HOUR);
    hours: for (let hi = spec.hours.length - 1; hi >= 0; hi--) {
      if (spec.hours[hi]! > lastHour) continue;
      for (let mi = spec.minutes.length - 1; mi >= 0; mi--) {
        const local = date * DAY + spec.hours[hi]! * HOUR + spec.minutes[mi]! * MINUTE;
        if (local - off.max > now) continue;
        if (best !== null && local - off.min < best) break hours;
        for (const c of instantsFor(spec, zone, local)) {
          if (c <= now && (best === null || c > best)) best = c;
        }
      }
    }
  }
  return best;
}
