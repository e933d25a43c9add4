import { describe, expect, it } from 'vitest';
import type { ScheduleConfig } from '../../src/config/types.js';
import { ScheduledTimeError } from '../../src/errors.js';
import { identifyFire, missedOccurrences, parseScheduledTime } from '../../src/schedule/fire.js';
import { watchOverruns, type Clock } from '../../src/schedule/overrun-watch.js';

const sched = (cron: string, extra: Partial<ScheduleConfig> = {}): ScheduleConfig => ({
  cron,
  timeZone: 'America/New_York',
  refresh: 'never',
  repeatedFire: 'run',
  ...extra,
});
const at = (iso: string) => new Date(iso);

describe('parseScheduledTime', () => {
  it('reads the Kubernetes annotation format, offset included', () => {
    expect(parseScheduledTime('2026-11-01T01:30:00-04:00', '--scheduled-time').toISOString()).toBe('2026-11-01T05:30:00.000Z');
    expect(parseScheduledTime('2026-11-01T01:30:00-05:00', 'x').toISOString()).toBe('2026-11-01T06:30:00.000Z');
    expect(parseScheduledTime('2026-11-01T06:30:00Z', 'x').toISOString()).toBe('2026-11-01T06:30:00.000Z');
  });
  it('rejects a time without offset or garbage, naming where it came from', () => {
    expect(() => parseScheduledTime('2026-11-01T01:30:00', 'CRONSAFE_SCHEDULED_TIME')).toThrow(ScheduledTimeError);
    expect(() => parseScheduledTime('yesterday', '--scheduled-time')).toThrow(/--scheduled-time: expected an RFC 3339 time/);
  });
  it('rejects dates and times that do not exist, which Date.parse would roll over', () => {
    for (const v of ['2026-02-30T01:30:00Z', '2026-11-31T01:30:00+00:00', '2026-03-29T24:00:00Z', '2026-02-29T00:00:00Z', '2026-13-01T00:00:00Z', '2026-01-01T10:60:00Z', '2026-01-01T10:00:60Z', '2026-01-01T10:00:00+24:00']) {
      expect(() => parseScheduledTime(v, '--at'), v).toThrow(/--at: .*no such date or time/);
    }
    expect(parseScheduledTime('2028-02-29T01:00:00Z', 'x').toISOString()).toBe('2028-02-29T01:00:00.000Z');
    expect(parseScheduledTime('2026-12-31T23:59:59.5-05:00', 'x').toISOString()).toBe('2027-01-01T04:59:59.500Z');
  });
});

describe('identifyFire', () => {
  it('is the latest occurrence at start when no scheduled time is given', () => {
    const f = identifyFire(sched('*/5 * * * *'), at('2026-06-01T12:07:30Z'), undefined)!;
    expect(f.occurrence.toISOString()).toBe('2026-06-01T12:05:00.000Z');
    expect(f).toMatchObject({ source: 'latest-occurrence', ageMs: 150_000, stale: false, local: '2026-06-01T08:05:00-04:00' });
  });

  it('is stale only when graceSeconds is set and exceeded', () => {
    const fire = at('2026-06-01T12:00:00Z');
    const now = at('2026-06-01T12:10:00Z');
    expect(identifyFire(sched('0 * * * *'), now, fire)!.stale).toBe(false);
    expect(identifyFire(sched('0 * * * *', { graceSeconds: 600 }), now, fire)!.stale).toBe(false);
    expect(identifyFire(sched('0 * * * *', { graceSeconds: 599 }), now, fire)!.stale).toBe(true);
  });

  it('recognises the second fall-back fire of a fixed-time schedule (Kubernetes fires 01:30 twice)', () => {
    const first = identifyFire(sched('30 1 * * *'), at('2026-11-01T05:31:00Z'), parseScheduledTime('2026-11-01T01:30:00-04:00', 'x'))!;
    const second = identifyFire(sched('30 1 * * *'), at('2026-11-01T06:31:00Z'), parseScheduledTime('2026-11-01T01:30:00-05:00', 'x'))!;
    expect(first.repeatedWallTime).toBe(false);
    expect(second.repeatedWallTime).toBe(true);
    // A wildcard schedule's second pass is real time, not a duplicate.
    expect(identifyFire(sched('*/15 * * * *'), at('2026-11-01T06:31:00Z'), undefined)!.repeatedWallTime).toBe(false);
  });

  it('is null for an expression with no past occurrence', () => {
    expect(identifyFire(sched('0 0 30 2 *'), at('2026-06-01T00:00:00Z'), undefined)).toBeNull();
  });
});

describe('missedOccurrences', () => {
  it('lists the fires strictly between the last recorded one and this one', () => {
    const r = missedOccurrences(sched('0 * * * *'), at('2026-06-01T10:00:00Z'), at('2026-06-01T14:00:00Z'));
    expect(r.missed.map((d) => d.toISOString())).toEqual(['2026-06-01T11:00:00.000Z', '2026-06-01T12:00:00.000Z', '2026-06-01T13:00:00.000Z']);
    expect(r.total).toBe(3);
  });
  it('caps the list for a week off but counts them all', () => {
    const r = missedOccurrences(sched('*/5 * * * *'), at('2026-06-01T00:00:00Z'), at('2026-06-08T00:00:00Z'), 10);
    expect(r.missed).toHaveLength(10);
    expect(r.total).toBe(7 * 24 * 12 - 1);
  });
  it('counts up to 100,000 and says when there were more', () => {
    const exact = missedOccurrences(sched('* * * * *'), at('2026-06-01T00:00:00Z'), new Date(Date.parse('2026-06-01T00:00:00Z') + 100_001 * 60_000));
    expect(exact).toMatchObject({ total: 100_000, atLeast: false });
    const more = missedOccurrences(sched('* * * * *'), at('2026-06-01T00:00:00Z'), new Date(Date.parse('2026-06-01T00:00:00Z') + 100_002 * 60_000));
    expect(more).toMatchObject({ total: 100_000, atLeast: true });
  });
  it('is empty without a previous record or when nothing lies between', () => {
    expect(missedOccurrences(sched('0 * * * *'), null, at('2026-06-01T14:00:00Z')).total).toBe(0);
    expect(missedOccurrences(sched('0 * * * *'), at('2026-06-01T13:00:00Z'), at('2026-06-01T14:00:00Z')).total).toBe(0);
  });
});

/** A manual clock: timers fire only when the test advances time. */
function manualClock(start: number): Clock & { advance(ms: number): void } {
  let t = start;
  let timers: Array<{ at: number; fn: () => void; id: number }> = [];
  let ids = 0;
  return {
    now: () => t,
    setTimeout(fn, ms) {
      const id = ++ids;
      timers.push({ at: t + ms, fn, id });
      return id;
    },
    clearTimeout(h) {
      timers = timers.filter((x) => x.id !== h);
    },
    advance(ms) {
      const end = t + ms;
      for (;;) {
        timers.sort((a, b) => a.at - b.at);
        const due = timers[0];
        if (!due || due.at > end) break;
        timers.shift();
        t = due.at;
        due.fn();
      }
      t = end;
    },
  };
}

describe('watchOverruns', () => {
  it('a run longer than two occurrences records exactly two overruns, once each', () => {
    const clock = manualClock(Date.parse('2026-06-01T12:00:10Z'));
    const seen: string[] = [];
    const w = watchOverruns(sched('*/5 * * * *'), at('2026-06-01T12:00:00Z'), (d) => seen.push(d.toISOString()), clock);
    clock.advance(4 * 60_000);
    expect(seen).toEqual([]);
    clock.advance(7 * 60_000); // now 12:11:10
    expect(seen).toEqual(['2026-06-01T12:05:00.000Z', '2026-06-01T12:10:00.000Z']);
    w.stop();
    clock.advance(60 * 60_000);
    expect(seen).toHaveLength(2);
  });

  it('counts occurrences already past at start once, and waits across a long gap in steps', () => {
    const clock = manualClock(Date.parse('2026-06-01T12:16:00Z'));
    const seen: string[] = [];
    const w = watchOverruns(sched('*/5 * * * *'), at('2026-06-01T12:00:00Z'), (d) => seen.push(d.toISOString()), clock);
    expect(seen).toEqual(['2026-06-01T12:05:00.000Z', '2026-06-01T12:10:00.000Z', '2026-06-01T12:15:00.000Z']);
    w.stop();
    const yearly: string[] = [];
    const clock2 = manualClock(Date.parse('2026-06-01T00:00:00Z'));
    watchOverruns(sched('0 0 1 1 *', { timeZone: 'UTC' }), at('2026-01-01T00:00:00Z'), (d) => yearly.push(d.toISOString()), clock2);
    clock2.advance(215 * 24 * 3600_000);
    expect(yearly).toEqual(['2027-01-01T00:00:00.000Z']);
  });

  it('a wall clock stepped forward a year counts 100 overruns at once, tells the rest in one call, and watches on from the new now', () => {
    // NTP steps the wall clock; the watch's timer still fires when it was due (monotonic).
    let wall = Date.parse('2026-06-01T12:00:30Z');
    let pending: (() => void) | undefined;
    const clock: Clock = {
      now: () => wall,
      setTimeout: (fn) => ((pending = fn), 1),
      clearTimeout: () => (pending = undefined),
    };
    const seen: string[] = [];
    const skipped: string[][] = [];
    watchOverruns(sched('*/5 * * * *', { timeZone: 'UTC' }), at('2026-06-01T12:00:00Z'), (d) => seen.push(d.toISOString()), clock, 'kubernetes', (from, now) =>
      skipped.push([from.toISOString(), now.toISOString()]),
    );
    wall += 365 * 24 * 3600_000;
    pending!();
    expect(seen).toHaveLength(100);
    expect(seen[0]).toBe('2026-06-01T12:05:00.000Z');
    expect(seen[99]).toBe('2026-06-01T20:20:00.000Z');
    expect(skipped).toEqual([['2026-06-01T20:25:00.000Z', '2027-06-01T12:00:30.000Z']]);
    wall += 5 * 60_000;
    pending!();
    expect(seen.slice(100)).toEqual(['2027-06-01T12:05:00.000Z']);
    expect(skipped).toHaveLength(1);
  });

  it('follows Kubernetes at fall-back: 30 1 * * * comes due twice that night', () => {
    const clock = manualClock(Date.parse('2026-10-31T06:00:00Z'));
    const seen: string[] = [];
    watchOverruns(sched('30 1 * * *'), at('2026-10-31T05:30:00Z'), (d) => seen.push(d.toISOString()), clock);
    clock.advance(26 * 3600_000);
    expect(seen).toEqual(['2026-11-01T05:30:00.000Z', '2026-11-01T06:30:00.000Z']);
  });
});
