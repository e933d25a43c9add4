/**
 * When a schedule fires: pure functions of (cron expression, IANA zone, instant, policy).
 * No clock is read here; callers pass `now`.
 *
 * Two DST policies (docs/schedule.md has the tables):
 * - `kubernetes`: what the CronJob controller does with `spec.timeZone`, i.e. robfig/cron v3's
 *   `Next` stepped from one fire to the next. Fixed-time fires in a spring-forward gap are
 *   skipped; in a fall-back overlap they happen twice (kubernetes/kubernetes#121594).
 * - `vixie`: Vixie cron / cronsim, for our own daemon. Fixed-time fires in a gap happen at the
 *   jump; in an overlap only on the first pass. Wildcard schedules follow real time.
 */
import { parseCron, type CronSpec } from './cron.js';
import { robfigStep } from './robfig.js';
import { vixieLatest, vixieNext } from './vixie.js';
import { DAY, HOUR, MINUTE, assertTimeZone, instantsForWall, lastTransitionIn, offsetAt, wallOf, type Wall } from './zone.js';

export { defaultTimeZone } from './zone.js';

/** Whose DST behaviour to reproduce: the CronJob controller's, or Vixie cron's (our daemon). */
export type SchedulePolicy = 'kubernetes' | 'vixie';

/** A cron expression, as text or already parsed with parseCron. */
export type CronInput = string | CronSpec;

/**
 * How far searches look: robfig gives up after five calendar years; we look back a little
 * further so that `0 0 29 2 *` is found across a century year (2096 -> 2104 is eight years),
 * and so that an impossible date such as `0 0 30 2 *` ends in null instead of a loop.
 */
export const SEARCH_HORIZON_MS = (8 * 366 + 7) * DAY;

/** Upper bound on occurrencesBetween's answer unless the caller passes its own. */
export const DEFAULT_OCCURRENCE_LIMIT = 10_000;

const parsed = new Map<string, CronSpec>();

function spec(cron: CronInput): CronSpec {
  if (typeof cron !== 'string') return cron;
  let hit = parsed.get(cron);
  if (!hit) {
    hit = parseCron(cron);
    if (parsed.size > 1000) parsed.clear();
    parsed.set(cron, hit);
  }
  return hit;
}

function instant(value: Date, what: string): number {
  const ms = value.getTime();
  if (!Number.isFinite(ms)) throw new Error(`${what} is not a valid date`);
  return ms;
}

function policyOf(policy: SchedulePolicy): SchedulePolicy {
  if (policy !== 'kubernetes' && policy !== 'vixie') {
    throw new Error(`unknown schedule policy "${String(policy)}": expected kubernetes or vixie`);
  }
  return policy;
}

export type Around = { latest: number | null; next: number | null };

// The chain just before each transition, per (expression, zone, transition instant).
const beforeTransition = new Map<string, Around>();

/**
 * `kubernetes`: the fires are the chain the CronJob controller walks, each `Next()` taken from
 * the previous fire, not "the first matching instant after t". The two differ where a
 * `Next()` walk crosses a transition in a zone whose shift is not a whole number of hours:
 * robfig's whole-hour steps then land on :30 and skip matches, for as long as that walk lasts.
 * In Australia/Lord_Howe `0 0 31 * *` goes from 31 Oct 1999 straight to 31 Jan 2000, although
 * `Next(30 Dec 1999)` is 31 Dec. Between transitions the chain takes every match (a walk that
 * crosses no transition is exact), so it is fixed by its first fire after the last transition,
 * which is Next of its last fire before it: found the same way, transition by transition,
 * back to the search horizon.
 */
function robfigAround(s: CronSpec, zone: string, t: number, floor = t - SEARCH_HORIZON_MS, whole = false): Around {
  const transition = lastTransitionIn(zone, floor, t);
  if (transition === null || (!whole && everyDay(s) && exactSince(s, zone, t, transition))) return walk(s, zone, t, null);
  const key = `${s.source}\n${zone}\n${transition}`;
  let before = whole ? undefined : beforeTransition.get(key);
  if (!before) {
    before = robfigAround(s, zone, transition - 1, floor, whole);
    if (!whole) {
      if (beforeTransition.size > 10_000) beforeTransition.clear();
      beforeTransition.set(key, before);
    }
  }
  return fromBefore(s, zone, t, before, transition);
}

/**
 * The whole chain back to the search horizon, without the shortcut or the cache: what the
 * shortcut must agree with (test/unit/schedule-chain-shortcut.test.ts).
 */
export function wholeChainAround(cron: CronInput, zone: string, t: number): Around {
  return robfigAround(spec(cron), zone, t, t - SEARCH_HORIZON_MS, true);
}

/**
 * The fires around t, from the chain's state just before the last transition. robfig's hour
 * step truncates to the hour in absolute time, so a `Next()` from less than an hour after the
 * transition can still step back across it and skip matches: in Australia/Lord_Howe
 * `0-30 1 * * *` fires at the change (02:00 -> 02:30) and then 01:30 the next night, not
 * 01:00. So the chain's steps from there are taken one by one, until one lands an hour past
 * the transition; from that fire on, a walk crosses no transition and is exact.
 */
function fromBefore(s: CronSpec, zone: string, t: number, before: Around, transition: number): Around {
  let latest = before.latest;
  let cur = before.next;
  while (cur !== null && cur <= t && cur < transition + HOUR) {
    latest = cur;
    cur = robfigStep(s, zone, cur);
  }
  if (cur === null || cur > t) return { latest, next: cur };
  return walk(s, zone, t, cur);
}

/**
 * Every day matches: robfig's month and day loops never run, so no Next in the chain can
 * stall (Pacific/Apia's skipped day) or give up (five years without a match), and the
 * chain never ends. A chain that ended (`0 0 29 2 *` in America/Asuncion) stays ended for
 * the rest of the horizon, which only the whole chain shows.
 */
function everyDay(s: CronSpec): boolean {
  return s.months.size === 12 && s.daysOfMonth.size === 31 && s.robfigDaysOfWeek.size === 7;
}

/**
 * For a chain that never ends (everyDay): true when it needs no history before
 * `transition`, the last one before `t`. That is when the walk crossing it was exact (whole-
 * hour offsets on both sides and a change on the hour, so robfig's hour steps stay on the hour and the chain after it
 * takes every match) and a match lies between it and `t`, so that walk(t, null) starts
 * after it and finds what the chain would. The whole chain walks every day of the eight-year
 * horizon through Intl (~3,000 calls, ~20 ms of each `cronsafe schedule` or lock-skipped
 * run; docs/benchmarks.md); this looks back to the last transition only.
 */
function exactSince(s: CronSpec, zone: string, t: number, transition: number): boolean {
  if (offsetAt(zone, transition - 1) % HOUR !== 0 || offsetAt(zone, transition) % HOUR !== 0) return false;
  // A change off the hour (Asia/Gaza 2010, America/Goose_Bay until 2010: at 00:01) lies inside
  // a minute walk: a Next() from the fire before it can cross it and miss a match (Gaza's 28
  // March 2010, 00:00) that a walk starting after it finds.
  if (transition % HOUR !== 0) return false;
  // walk's first loop, stopped at the transition.
  for (let back = MINUTE; back < SEARCH_HORIZON_MS && t - back > transition; back *= 2) {
    const c = robfigStep(s, zone, t - back);
    if (c !== null && c <= t) return true;
  }
  return false;
}

/**
 * The fires around `t`, given that no transition lies between `anchor` (a fire, or null if
 * there is none to start from) and `t`.
 */
function walk(s: CronSpec, zone: string, t: number, anchor: number | null): Around {
  // Step back (1 min, 2 min, 4 min, ...) until Next lands at or before t, so that a minutely
  // schedule does not walk every fire since the anchor.
  let back = MINUTE;
  while (back < SEARCH_HORIZON_MS && (anchor === null || t - back > anchor)) {
    const c = robfigStep(s, zone, t - back);
    if (c !== null && c <= t) break;
    back *= 2;
  }
  const start = t - Math.min(back, SEARCH_HORIZON_MS);
  let latest: number | null = null;
  let cur: number | null;
  if (anchor !== null && anchor >= start) {
    latest = anchor;
    cur = robfigStep(s, zone, anchor);
  } else {
    cur = robfigStep(s, zone, start);
  }
  while (cur !== null && cur <= t) {
    latest = cur;
    cur = robfigStep(s, zone, cur);
  }
  return { latest, next: cur };
}

function next(s: CronSpec, zone: string, after: number, policy: SchedulePolicy): number | null {
  return policy === 'kubernetes' ? robfigAround(s, zone, after).next : vixieNext(s, zone, after, SEARCH_HORIZON_MS);
}

/**
 * The first occurrence strictly after `after`, or null if there is none within the search
 * horizon (for `kubernetes`, robfig's five years from the previous fire). Throws on an invalid
 * expression or zone.
 */
export function nextOccurrence(cron: CronInput, zone: string, after: Date, policy: SchedulePolicy): Date | null {
  const s = spec(cron);
  assertTimeZone(zone);
  const found = next(s, zone, instant(after, 'after'), policyOf(policy));
  return found === null ? null : new Date(found);
}

/**
 * The most recent occurrence at or before `now` (a fire exactly at `now` counts), looking back
 * at most SEARCH_HORIZON_MS; null if none. `nextOccurrence(latest - 1 ms)` is always `latest`.
 */
export function latestOccurrence(cron: CronInput, zone: string, now: Date, policy: SchedulePolicy): Date | null {
  const s = spec(cron);
  assertTimeZone(zone);
  const at = instant(now, 'now');
  const found =
    policyOf(policy) === 'kubernetes' ? robfigAround(s, zone, at).latest : vixieLatest(s, zone, at, SEARCH_HORIZON_MS);
  return found === null ? null : new Date(found);
}

/**
 * Occurrences in (from, to], ascending, each instant once, at most `limit` of them (the
 * earliest). Use it to count what came due while a run was active or a machine was off.
 */
export function occurrencesBetween(
  cron: CronInput,
  zone: string,
  from: Date,
  to: Date,
  policy: SchedulePolicy,
  limit = DEFAULT_OCCURRENCE_LIMIT,
): Date[] {
  const s = spec(cron);
  assertTimeZone(zone);
  policyOf(policy);
  const end = instant(to, 'to');
  const out: Date[] = [];
  // After the first, each Kubernetes fire is robfig's Next of the one before, as in the controller.
  let n = next(s, zone, instant(from, 'from'), policy);
  while (n !== null && n <= end && out.length < limit) {
    out.push(new Date(n));
    n = policy === 'kubernetes' ? robfigStep(s, zone, n) : next(s, zone, n, policy);
  }
  return out;
}

/** An instant as a zone's wall clock shows it (the Wall fields: month 1-12, weekday 0 = Sunday). */
export interface WallTime extends Wall {
  /**
   * RFC 3339 with the zone's offset, as Go formats `time.RFC3339` and so as Kubernetes writes
   * `batch.kubernetes.io/cronjob-scheduled-timestamp`: `2026-11-01T01:30:00-04:00`; a zero
   * offset is written `Z`. The offset tells the two passes of a fall-back hour apart.
   */
  iso: string;
  zone: string;
  /** Local time minus UTC, in minutes (-240 for New York in summer). */
  offsetMinutes: number;
}

/** The wall-clock reading of `instant` in `zone`. */
export function wallTime(at: Date, zone: string): WallTime {
  assertTimeZone(zone);
  const ms = instant(at, 'instant');
  const w = wallOf(zone, ms);
  const offsetMinutes = Math.trunc(offsetAt(zone, ms) / MINUTE);
  const pad = (n: number, width = 2): string => String(n).padStart(width, '0');
  const abs = Math.abs(offsetMinutes);
  const offset = offsetMinutes === 0 ? 'Z' : `${offsetMinutes < 0 ? '-' : '+'}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
  // Years outside 0000-9999 (an --at near year 0) as toISOString writes them: -000001, +010000.
  const year = w.year >= 0 && w.year <= 9999 ? pad(w.year, 4) : `${w.year < 0 ? '-' : '+'}${pad(Math.abs(w.year), 6)}`;
  const iso = `${year}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}${offset}`;
  return { iso, zone, ...w, offsetMinutes };
}

/**
 * True when the wall time of `instant` already happened earlier in `zone`: the second pass of
 * a fall-back hour. Under Kubernetes a fixed-time CronJob fires again then; a run can use this
 * to recognise the duplicate and skip it.
 */
export function isRepeatedWallTime(at: Date, zone: string): boolean {
  return firstPassOf(at, zone) !== null;
}

/**
 * For the second pass of a fall-back hour: the first instant that showed the same wall time
 * (01:30 EDT for 01:30 EST); null when `instant`'s wall time did not occur earlier.
 */
export function firstPassOf(at: Date, zone: string): Date | null {
  assertTimeZone(zone);
  const ms = instant(at, 'instant');
  const first = instantsForWall(zone, ms + offsetAt(zone, ms))[0];
  return first !== undefined && first < ms ? new Date(first) : null;
}
