import { existsSync, readdirSync, statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  defaultTimeZone,
  latestOccurrence,
  nextOccurrence,
  occurrencesBetween,
  type SchedulePolicy,
} from '../../src/schedule/occurrences.js';
import { scheduleStatus } from '../../src/schedule/status.js';
import { assertTimeZone } from '../../src/schedule/zone.js';

const POLICIES: SchedulePolicy[] = ['kubernetes', 'vixie'];
const at = (iso: string): Date => new Date(iso);
const utc = (d: Date | null): string | null => d && d.toISOString().replace(':00.000Z', 'Z');

describe.each(POLICIES)('latest / next (%s)', (policy) => {
  it('a tick exactly on an occurrence: latest is now (inclusive), next is the one after', () => {
    const now = at('2026-06-10T09:15:00Z');
    expect(latestOccurrence('*/15 * * * *', 'UTC', now, policy)).toEqual(now);
    expect(utc(nextOccurrence('*/15 * * * *', 'UTC', now, policy))).toBe('2026-06-10T09:30Z');
    // One millisecond earlier it is still the previous one.
    expect(utc(latestOccurrence('*/15 * * * *', 'UTC', new Date(now.getTime() - 1), policy))).toBe('2026-06-10T09:00Z');
    expect(nextOccurrence('*/15 * * * *', 'UTC', new Date(now.getTime() - 1), policy)).toEqual(now);
  });

  it('a laptop off for a week: latest is the most recent occurrence, not the first missed one', () => {
    // Daily at 09:00 London; asleep from Mon 1 June 2026 until Mon 8 June 15:12 BST.
    const now = at('2026-06-08T14:12:30Z');
    expect(utc(latestOccurrence('0 9 * * *', 'Europe/London', now, policy))).toBe('2026-06-08T08:00Z');
    expect(utc(nextOccurrence('0 9 * * *', 'Europe/London', now, policy))).toBe('2026-06-09T08:00Z');
    const missed = occurrencesBetween('0 9 * * *', 'Europe/London', at('2026-06-01T08:00Z'), now, policy);
    expect(missed.map(utc)).toEqual([2, 3, 4, 5, 6, 7, 8].map((d) => `2026-06-0${d}T08:00Z`));
  });

  it('0 0 29 2 *: next from 2026 is 2028-02-29, latest is 2024-02-29', () => {
    expect(utc(nextOccurrence('0 0 29 2 *', 'UTC', at('2026-01-01T00:00Z'), policy))).toBe('2028-02-29T00:00Z');
    expect(utc(latestOccurrence('0 0 29 2 *', 'UTC', at('2026-01-01T00:00Z'), policy))).toBe('2024-02-29T00:00Z');
    expect(utc(latestOccurrence('0 0 29 2 *', 'UTC', at('2028-02-29T00:00Z'), policy))).toBe('2028-02-29T00:00Z');
  });

  it('an expression that never matches gives null, not a hang', () => {
    const now = at('2026-06-01T00:00Z');
    expect(latestOccurrence('0 0 30 2 *', 'UTC', now, policy)).toBeNull();
    expect(nextOccurrence('0 0 30 2 *', 'UTC', now, policy)).toBeNull();
    expect(occurrencesBetween('0 0 31 4,6,9,11 *', 'UTC', now, at('2030-01-01T00:00Z'), policy)).toEqual([]);
  });

  it('evaluates in the zone, not in UTC', () => {
    const now = at('2026-01-15T12:00Z');
    expect(utc(nextOccurrence('0 9 * * *', 'Asia/Kolkata', now, policy))).toBe('2026-01-16T03:30Z');
    expect(utc(nextOccurrence('0 9 * * *', 'America/New_York', now, policy))).toBe('2026-01-15T14:00Z');
  });

  it('occurrencesBetween is (from, to] and bounded', () => {
    const from = at('2026-06-10T09:00Z');
    const got = occurrencesBetween('*/15 * * * *', 'UTC', from, at('2026-06-10T10:00Z'), policy);
    expect(got.map(utc)).toEqual(['2026-06-10T09:15Z', '2026-06-10T09:30Z', '2026-06-10T09:45Z', '2026-06-10T10:00Z']);
    expect(occurrencesBetween('* * * * *', 'UTC', from, at('2026-07-10T00:00Z'), policy, 5)).toHaveLength(5);
    expect(occurrencesBetween('* * * * *', 'UTC', from, from, policy)).toEqual([]);
  });
});

describe('invalid input', () => {
  it.each([
    ['Mars/Olympus_Mons', 'unknown time zone "Mars/Olympus_Mons": not in the IANA time zone database'],
    ['+05:00', 'unknown time zone "+05:00": expected an IANA name'],
    ['europe/london', 'zone names are case-sensitive (did you mean Europe/London?)'],
    ['', 'unknown time zone ""'],
    // ICU's own legacy IDs, no IANA name: Kubernetes refuses them, and BST is Asia/Dhaka to ICU.
    ['BST', 'unknown time zone "BST": not an IANA zone name'],
    ['IST', 'unknown time zone "IST": not an IANA zone name'],
    ['SystemV/EST5EDT', 'unknown time zone "SystemV/EST5EDT": not an IANA zone name'],
    ['US/Pacific-New', 'unknown time zone "US/Pacific-New": not an IANA zone name'],
  ])('zone %j', (zone, message) => {
    expect(() => nextOccurrence('0 * * * *', zone, at('2026-01-01T00:00Z'), 'vixie')).toThrow(message);
    expect(() => latestOccurrence('0 * * * *', zone, at('2026-01-01T00:00Z'), 'kubernetes')).toThrow(message);
  });

  // The refusal of ICU-only IDs must not catch a real one: every zone file the machine has
  // (what Go's time.LoadLocation, and so Kubernetes, reads) is taken, but the placeholder Factory.
  const ZONEINFO = '/usr/share/zoneinfo';
  it.skipIf(!existsSync(ZONEINFO))('every name in the zoneinfo database is accepted', () => {
    const names: string[] = [];
    const walk = (dir: string, prefix: string): void => {
      for (const entry of readdirSync(dir)) {
        const name = prefix ? `${prefix}/${entry}` : entry;
        if (name === 'posix' || name === 'right') continue;
        if (statSync(`${dir}/${entry}`).isDirectory()) walk(`${dir}/${entry}`, name);
        else if (/^[A-Z][^.]*$/.test(entry) && name !== 'Factory') names.push(name);
      }
    };
    walk(ZONEINFO, '');
    expect(names.length).toBeGreaterThan(300);
    expect(names.filter((n) => { try { assertTimeZone(n); return false; } catch { return true; } })).toEqual([]);
  });

  it('an invalid expression throws before any search', () => {
    expect(() => latestOccurrence('61 * * * *', 'UTC', at('2026-01-01T00:00Z'), 'vixie')).toThrow(
      'minute field "61": value out of range 0-59',
    );
  });

  it('an unknown policy or an invalid date throws', () => {
    expect(() => nextOccurrence('0 * * * *', 'UTC', at('2026-01-01T00:00Z'), 'cronie' as SchedulePolicy)).toThrow(
      'unknown schedule policy "cronie"',
    );
    expect(() => nextOccurrence('0 * * * *', 'UTC', new Date(Number.NaN), 'vixie')).toThrow('after is not a valid date');
  });
});

describe('defaultTimeZone', () => {
  it('is the runtime zone name, which the maths accepts', () => {
    const zone = defaultTimeZone();
    expect(zone).toBe(Intl.DateTimeFormat().resolvedOptions().timeZone);
    expect(zone).not.toMatch(/^[+-]\d/);
    expect(nextOccurrence('0 * * * *', zone, at('2026-01-01T00:30Z'), 'vixie')).not.toBeNull();
  });
});

describe('scheduleStatus', () => {
  const daily = { cron: '0 9 * * *', timeZone: 'Europe/London', refresh: 'never' as const };

  it('due when an occurrence has passed and no run started since; not stale without grace', () => {
    const s = scheduleStatus(daily, at('2026-06-08T14:12:30Z'), at('2026-06-01T08:00:05Z'), 'vixie');
    expect(s).toMatchObject({
      timeZone: 'Europe/London',
      policy: 'vixie',
      latest: at('2026-06-08T08:00:00Z'),
      next: at('2026-06-09T08:00:00Z'),
      latestLocal: '2026-06-08T09:00:00+01:00',
      nextLocal: '2026-06-09T09:00:00+01:00',
      due: true,
      stale: false,
      refreshHorizon: null,
    });
  });

  it('stale when graceSeconds is set and the occurrence is older than that', () => {
    const woke = at('2026-06-08T14:12:30Z');
    expect(scheduleStatus({ ...daily, graceSeconds: 300 }, woke, null, 'vixie').stale).toBe(true);
    // Within grace: 08:04:59 is 299 s after 08:00; 08:05:00 is exactly 300 s (not stale); 08:05:01 is.
    expect(scheduleStatus({ ...daily, graceSeconds: 300 }, at('2026-06-08T08:04:59Z'), null, 'vixie').stale).toBe(false);
    expect(scheduleStatus({ ...daily, graceSeconds: 300 }, at('2026-06-08T08:05:00Z'), null, 'vixie').stale).toBe(false);
    expect(scheduleStatus({ ...daily, graceSeconds: 300 }, at('2026-06-08T08:05:01Z'), null, 'vixie').stale).toBe(true);
  });

  it('not due once a run started at or after the latest occurrence', () => {
    const now = at('2026-06-08T08:03:00Z');
    expect(scheduleStatus(daily, now, at('2026-06-08T08:00:00Z'), 'kubernetes').due).toBe(false);
    expect(scheduleStatus(daily, now, at('2026-06-08T08:00:01Z'), 'kubernetes').due).toBe(false);
    expect(scheduleStatus(daily, now, at('2026-06-08T07:59:59Z'), 'kubernetes').due).toBe(true);
    expect(scheduleStatus(daily, now, undefined, 'kubernetes').due).toBe(true);
  });

  it('refresh every-occurrence: the horizon is the latest occurrence', () => {
    const s = scheduleStatus({ ...daily, refresh: 'every-occurrence' }, at('2026-06-08T10:00Z'), null, 'vixie');
    expect(s.refreshHorizon).toEqual(at('2026-06-08T08:00Z'));
    expect(scheduleStatus({ ...daily, refresh: 'on-change' }, at('2026-06-08T10:00Z'), null, 'vixie').refreshHorizon).toBeNull();
  });

  it('never due nor stale when there is no past occurrence', () => {
    const s = scheduleStatus({ cron: '0 0 30 2 *', timeZone: 'UTC', graceSeconds: 1, refresh: 'every-occurrence' }, at('2026-06-08T10:00Z'), null, 'vixie');
    expect(s).toMatchObject({ latest: null, next: null, latestLocal: null, due: false, stale: false, refreshHorizon: null });
  });

  it('fall-back under Kubernetes: the second 01:30 is a new, due occurrence', () => {
    const ny = { cron: '30 1 * * *', timeZone: 'America/New_York', refresh: 'never' as const };
    const s = scheduleStatus(ny, at('2026-11-01T06:31Z'), at('2026-11-01T05:30:02Z'), 'kubernetes');
    expect(s.latestLocal).toBe('2026-11-01T01:30:00-05:00');
    expect(s.due).toBe(true);
    // The daemon (Vixie) does not fire again.
    expect(scheduleStatus(ny, at('2026-11-01T06:31Z'), at('2026-11-01T05:30:02Z'), 'vixie').due).toBe(false);
  });

  it('uses the machine zone when timeZone is absent', () => {
    const s = scheduleStatus({ cron: '0 * * * *', refresh: 'never' }, at('2026-06-08T10:30Z'), null, 'vixie');
    expect(s.timeZone).toBe(defaultTimeZone());
  });
});
