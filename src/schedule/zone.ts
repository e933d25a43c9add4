/**
 * IANA time-zone arithmetic on epoch milliseconds, built on Intl (full ICU ships with Node).
 *
 * Everything here is a pure function of (zone, instant). The only expensive calls are Intl's
 * (a formatter costs ~15 ms to build, the first one loading ICU's data; a format ~2 us), so
 * offsets are cached per zone and UTC day: a day holds at most one transition in every real
 * zone, found once by bisection and then reused. The occurrence searches step through
 * thousands of days (robfig's chain goes back over every transition of the search horizon),
 * so each `cronsafe schedule` or run start makes ~3,000 of these calls: they read
 * `format()`'s string, ~3x cheaper than `formatToParts()` (docs/benchmarks.md, start-up).
 */
import { realpathSync } from 'node:fs';

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** Local wall-clock fields of an instant in a zone (month 1-12, weekday 0 = Sunday). */
export interface Wall {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  weekday: number;
}

/** Offset on one UTC day: `before` until `at` (if the day holds a transition), `after` from it. */
interface DayOffsets {
  before: number;
  after: number;
  at: number | null;
}

interface ZoneCache {
  zone: string;
  /** Without the era: half the cost to build, and right for every year from 1 on. */
  format?: Intl.DateTimeFormat;
  /** The offset at every instant, for UTC: no formatter then. */
  fixed?: number;
  /** With the era, for instants before year 2 (built only then). */
  eraFormat?: Intl.DateTimeFormat;
  days: Map<number, DayOffsets>;
  /** Offset at 00:00:00 UTC of a day, by day number. */
  starts: Map<number, number>;
}

const zones = new Map<string, ZoneCache>();
// Bound memory for long-lived daemons and property tests that roam over centuries.
const MAX_CACHED_DAYS = 200_000;

/**
 * `TZ` as cronsafe started. Module handler code runs in this process: one that set
 * `process.env.TZ` (for its own dates) moved every later schedule evaluation of a daemon with
 * no schedule.timeZone to that zone, silently (`daemon started` had said the other one), and
 * Node makes ICU's default zone follow such an assignment too.
 */
const TZ_AT_START = process.env.TZ;
const TZDIR_AT_START = process.env.TZDIR;
/** ICU's default zone when first asked (before any handler code ran), for the same reason. */
let icuZoneAtStart: string | undefined;

/**
 * The machine's own IANA zone name (what `TZ` or /etc/localtime says as cronsafe starts), for
 * a schedule with no `timeZone`: a name, never a fixed offset sampled at start-up (an offset
 * would be wrong for half of the year).
 */
export function defaultTimeZone(): string {
  // ICU reads no path, where the C library (and so cron on this machine) reads the file:
  // `TZ=:/etc/localtime`, `TZ=/usr/share/zoneinfo/X`, `TZ=:X`. For most ICU says nothing or
  // Etc/Unknown, but for some (EST5EDT, CST6CDT, ...) UTC: so the file is asked first.
  const fromFile = zoneOfFile(TZ_AT_START);
  if (fromFile !== undefined) return fromFile;
  // `TZ=BST`: a zone to ICU (Asia/Dhaka), none to the C library, which reckons it as UTC.
  // So is `TZ=:BST` (no such zone file, above), which ICU reads past its colon.
  if (isIcuOnly((TZ_AT_START ?? '').replace(/^:/, ''))) return 'UTC';
  icuZoneAtStart ??= Intl.DateTimeFormat().resolvedOptions().timeZone as string | undefined;
  const zone = icuZoneAtStart;
  if (zone !== undefined && zone !== 'Etc/Unknown' && usable(zone)) return zone;
  // A POSIX zone of a fixed offset (`TZ=CET-1`, `TZ=EST5`, `TZ=GMT+5`): the C library, cron
  // and Node's own Date reckon it (5 hours west for GMT+5), where ICU names nothing (so it was
  // UTC, an hour or more off cron on the machine) or, for GMT+5, a custom "GMT+05:00" no IANA
  // zone has (every run, daemon and schedule then ended with a fatal error, exit 1).
  // `TZ=` (empty), a name no zone database has, or any other POSIX rule: ICU says Etc/Unknown
  // (or nothing) and reckons in UTC, as the C library does.
  return posixFixedZone(TZ_AT_START) ?? 'UTC';
}

function usable(zone: string): boolean {
  try {
    assertTimeZone(zone);
    return true;
  } catch {
    return false;
  }
}

/**
 * The Etc zone of a POSIX TZ that is a name and a whole-hour offset with no DST rule
 * (`CET-1`, `EST5`, `GMT+5`): Etc/GMT-1, Etc/GMT+5 and so on, whose names use the same sign
 * as POSIX (hours west of Greenwich). Undefined for anything else, and for an offset no Etc
 * zone has (GMT+13).
 */
function posixFixedZone(tz: string | undefined): string | undefined {
  const m = /^(?:[A-Za-z]{3,}|<[A-Za-z0-9+-]{3,}>)([+-]?)(\d{1,2})(?::00(?::00)?)?$/.exec(tz ?? '');
  if (!m) return undefined;
  const hours = Number(m[2]);
  if (hours === 0) return 'UTC';
  const zone = `Etc/GMT${m[1] === '-' ? '-' : '+'}${hours}`;
  return usable(zone) ? zone : undefined;
}

/**
 * The zone a TZ path names (`:/etc/localtime`, `/usr/share/zoneinfo/Europe/Berlin`, `:EST5EDT`
 * under TZDIR, as the C library reads it), by where its file lies; else undefined.
 */
function zoneOfFile(tz: string | undefined): string | undefined {
  if (!tz?.startsWith(':') && !tz?.startsWith('/')) return undefined;
  const file = tz.startsWith(':') ? tz.slice(1) : tz;
  if (file === '') return undefined;
  let real: string;
  try {
    real = realpathSync(file.startsWith('/') ? file : `${TZDIR_AT_START || '/usr/share/zoneinfo'}/${file}`);
  } catch {
    return undefined;
  }
  // posix/ and right/ (the same rules, counting leap seconds: within a minute of it) name the zone after them.
  const name = /\/zoneinfo\/(?:posix\/|right\/)?([A-Za-z][^/]*(?:\/[^/]+)*)$/.exec(real)?.[1];
  if (name === undefined) return undefined;
  try {
    assertTimeZone(name);
    return name;
  } catch {
    return undefined;
  }
}

/**
 * Check that `zone` is an IANA zone name Kubernetes would also accept, or throw an Error that
 * names it. Returns the name unchanged.
 */
export function assertTimeZone(zone: string): string {
  if (zones.has(zone) || UTC_ZONES.has(zone)) return zone;
  // `validate` needs the name only: ICU's list of canonical names costs ~2 ms, a formatter
  // (what the schedule maths need) ~15 ms of a ~200 ms start-up. Aliases (US/Eastern) and
  // every refusal still go through the formatter and its checks.
  canonicalZones ??= new Set(Intl.supportedValuesOf('timeZone'));
  if (canonicalZones.has(zone)) return zone;
  zoneCache(zone);
  return zone;
}

let canonicalZones: Set<string> | undefined;

/**
 * UTC by its two IANA names (ICU's list of canonical names has neither: each went to the
 * formatter): offset 0 at every instant, so no formatter and no ICU. The first formatter of
 * a process costs 12-14 ms of CPU, ICU's start (docs/benchmarks.md, 2026-12-06 07:05), in
 * every `validate`, `schedule` and run start of a schedule in UTC.
 */
const UTC_ZONES = new Set(['UTC', 'Etc/UTC']);

function zoneCache(zone: string): ZoneCache {
  const hit = zones.get(zone);
  if (hit) return hit;
  if (UTC_ZONES.has(zone)) {
    const utc: ZoneCache = { zone, fixed: 0, days: new Map(), starts: new Map() };
    zones.set(zone, utc);
    return utc;
  }
  // Fixed offsets parse in newer V8 but are not zone names: Go's time.LoadLocation (and so
  // the CronJob's spec.timeZone) rejects them, and they cannot follow DST.
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(zone)) {
    throw new Error(`unknown time zone "${zone}": expected an IANA name such as Europe/London`);
  }
  let format: Intl.DateTimeFormat;
  try {
    format = formatter(zone, false);
  } catch {
    throw new Error(`unknown time zone "${zone}": not in the IANA time zone database`);
  }
  const canonical = format.resolvedOptions().timeZone;
  // ICU matches names case-insensitively; the Linux zoneinfo files Kubernetes reads do not.
  if (canonical !== zone && canonical.toLowerCase() === zone.toLowerCase()) {
    throw new Error(`unknown time zone "${zone}": zone names are case-sensitive (did you mean ${canonical}?)`);
  }
  if (isIcuOnly(zone)) {
    throw new Error(
      `unknown time zone "${zone}": not an IANA zone name (Kubernetes refuses it; Node's ICU reads it as ${canonical}, and an abbreviation names several zones): write the zone's full name, such as Europe/London or ${canonical}`,
    );
  }
  const cache: ZoneCache = { zone, format, days: new Map(), starts: new Map() };
  zones.set(zone, cache);
  return cache;
}

/**
 * IDs ICU takes that no IANA zone has (Java's old three-letter ones; and SystemV/*): Go's
 * time.LoadLocation, and so a CronJob's spec.timeZone, refuses them, and ICU's reading is not
 * a reader's: BST is Asia/Dhaka to it, not London; IST Asia/Kolkata, not Dublin or Jerusalem;
 * CST America/Chicago, not Shanghai; NST Pacific/Auckland, not St John's. Accepted, a daemon
 * fired hours off. The three-letter names that are IANA (EST, MST, HST, UTC, CET, ...) stay.
 * Also two links the IANA database has dropped (2017, 2020) and ICU still takes.
 */
const ICU_ONLY = new Set(['ACT', 'AET', 'AGT', 'ART', 'AST', 'BET', 'BST', 'CAT', 'CNT', 'CST', 'CTT', 'EAT', 'ECT', 'IET', 'IST', 'JST', 'MIT', 'NET', 'NST', 'PLT', 'PNT', 'PRT', 'PST', 'SST', 'VST', 'US/Pacific-New', 'Canada/East-Saskatchewan']);

function isIcuOnly(zone: string): boolean {
  return ICU_ONLY.has(zone) || zone.startsWith('SystemV/');
}

function formatter(zone: string, era: boolean): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    ...(era ? { era: 'short' } : {}),
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
}

/**
 * From 0001-01-02T00:00Z on, every zone's local year is at least 1 (offsets are less than a
 * day), so the formatter without an era cannot be ambiguous; before it, 1 BC would print as 1.
 */
const NO_ERA_FROM = -62135596800000 + DAY;

/** What en-US `format()` prints with the fields of `formatter`: `1/30/2032, 22:13:20`. */
const WALL_RE = /^(\d{1,2})\/(\d{1,2})\/(\d+), (\d{1,2}):(\d{2}):(\d{2})$/;

/** Offset from Intl, uncached: local wall time (as if UTC) minus the instant, whole seconds. */
function intlOffset(cache: ZoneCache, ms: number): number {
  if (cache.fixed !== undefined) return cache.fixed;
  const whole = Math.floor(ms / SECOND) * SECOND;
  if (whole >= NO_ERA_FROM) {
    const m = WALL_RE.exec((cache.format ??= formatter(cache.zone, false)).format(whole));
    // Another ICU may print it differently: then the parts, which name each field.
    if (m) return utcOf(Number(m[3]), Number(m[1]), Number(m[2]), Number(m[4]), Number(m[5]), Number(m[6])) - whole;
  }
  cache.eraFormat ??= formatter(cache.zone, true);
  const f: Record<string, string> = {};
  for (const part of cache.eraFormat.formatToParts(whole)) f[part.type] = part.value;
  let year = Number(f.year);
  if (f.era === 'BC' || f.era === 'B') year = 1 - year;
  return utcOf(year, Number(f.month), Number(f.day), Number(f.hour), Number(f.minute), Number(f.second)) - whole;
}

/** Date.UTC for any year (Date.UTC reads years 0-99 as 1900-1999); month 1-12. */
function utcOf(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  if (year >= 100) return Date.UTC(year, month - 1, day, hour, minute, second);
  const local = new Date(0);
  local.setUTCFullYear(year, month - 1, day);
  local.setUTCHours(hour, minute, second, 0);
  return local.getTime();
}

function startOffset(cache: ZoneCache, day: number): number {
  let off = cache.starts.get(day);
  if (off === undefined) {
    off = intlOffset(cache, day * DAY);
    if (cache.starts.size >= MAX_CACHED_DAYS) cache.starts.clear();
    cache.starts.set(day, off);
  }
  return off;
}

function dayOffsets(cache: ZoneCache, day: number): DayOffsets {
  const hit = cache.days.get(day);
  if (hit) return hit;
  const start = day * DAY;
  const end = start + DAY - SECOND;
  const before = startOffset(cache, day);
  // The same offset at this midnight and the next: no transition in between (a UTC day
  // holds at most one in every real zone, the premise of this cache), so the end of the
  // day needs no call of its own. Walking many days, that halves the Intl calls (~8 us each).
  const after = startOffset(cache, day + 1) === before ? before : intlOffset(cache, end);
  let at: number | null = null;
  if (before !== after) {
    // Bisect to the first second showing the new offset.
    let lo = start; // has `before`
    let hi = end; // has `after`
    while (hi - lo > SECOND) {
      const mid = lo + Math.floor((hi - lo) / 2 / SECOND) * SECOND;
      if (intlOffset(cache, mid) === before) lo = mid;
      else hi = mid;
    }
    at = hi;
  }
  if (cache.days.size >= MAX_CACHED_DAYS) cache.days.clear();
  const entry = { before, after, at };
  cache.days.set(day, entry);
  return entry;
}

/** Milliseconds to add to an instant to get its local wall time in `zone`. */
export function offsetAt(zone: string, ms: number): number {
  const d = dayOffsets(zoneCache(zone), Math.floor(ms / DAY));
  return d.at === null || ms < d.at ? d.before : d.after;
}

/** The last instant in [from, to] at which `zone` changes offset, or null if it does not. */
export function lastTransitionIn(zone: string, from: number, to: number): number | null {
  const cache = zoneCache(zone);
  for (let day = Math.floor(to / DAY); (day + 1) * DAY > from; day--) {
    const d = dayOffsets(cache, day);
    if (d.at !== null && d.at >= from && d.at <= to) return d.at;
    // A change exactly at midnight UTC shows as a different offset from the day before.
    if (day * DAY >= from && day * DAY <= to && dayOffsets(cache, day - 1).after !== d.before) return day * DAY;
  }
  return null;
}

/** Wall-clock fields of `ms` in `zone`. */
export function wallOf(zone: string, ms: number): Wall {
  const local = new Date(ms + offsetAt(zone, ms));
  return {
    year: local.getUTCFullYear(),
    month: local.getUTCMonth() + 1,
    day: local.getUTCDate(),
    hour: local.getUTCHours(),
    minute: local.getUTCMinutes(),
    second: local.getUTCSeconds(),
    weekday: local.getUTCDay(),
  };
}

/** The offsets in force within a day either side of `ms` (one, or two around a transition). */
export function offsetsNear(zone: string, ms: number): number[] {
  const found = new Set([offsetAt(zone, ms - DAY), offsetAt(zone, ms), offsetAt(zone, ms + DAY)]);
  return [...found];
}

/**
 * Every instant whose wall time in `zone` is `local` (a wall time written as if it were UTC
 * milliseconds), ascending: none in a spring-forward gap, two in a fall-back overlap.
 */
export function instantsForWall(zone: string, local: number): number[] {
  const out: number[] = [];
  for (const off of offsetsNear(zone, local)) {
    const instant = local - off;
    if (offsetAt(zone, instant) === off && !out.includes(instant)) out.push(instant);
  }
  return out.sort((a, b) => a - b);
}

/**
 * For a wall time `local` that falls in a spring-forward gap: the instant the clocks jumped,
 * i.e. the first instant after the gap. Vixie cron runs skipped fixed-time jobs then.
 */
export function gapEnd(zone: string, local: number): number {
  const offs = offsetsNear(zone, local);
  // The jump lies between the instant `local` would be under the later (larger) offset, which
  // is still before the jump, and the instant it would be under the earlier one, which is after.
  let lo = local - Math.max(...offs);
  let hi = local - Math.min(...offs);
  const before = offsetAt(zone, lo);
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (offsetAt(zone, mid) === before) lo = mid;
    else hi = mid;
  }
  return hi;
}
