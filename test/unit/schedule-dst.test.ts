/**
 * Fires across the 2026 DST transitions, under both policies, as exact UTC instants.
 *
 * The `kubernetes` columns were produced by robfig/cron v3.0.1 itself (the library the
 * CronJob controller uses: `cron.ParseStandard("TZ=<zone> <expr>")`, `Next()` stepped from
 * `from`, Go 1.19); the `vixie` columns follow Vixie cron / cronsim (docs/schedule.md).
 * docs/schedule.md shows the same tables with local times.
 */
import { describe, expect, it } from 'vitest';
import { parseCron } from '../../src/schedule/cron.js';
import { isRepeatedWallTime, occurrencesBetween, wallTime } from '../../src/schedule/occurrences.js';

interface Case {
  name: string;
  zone: string;
  cron: string;
  /** Window (from, to], UTC minutes. */
  from: string;
  to: string;
  kubernetes: string[];
  /** Omitted: same as kubernetes. */
  vixie?: string[];
}

const LON = 'Europe/London';
const NY = 'America/New_York';
const LHI = 'Australia/Lord_Howe';

const cases: Case[] = [
  // --- fixed time, 01:30 local ---
  {
    name: 'London spring forward: 01:30 does not exist on 29 March',
    zone: LON, cron: '30 1 * * *', from: '2026-03-28T00:00Z', to: '2026-03-31T00:00Z',
    kubernetes: ['2026-03-28T01:30Z', '2026-03-30T00:30Z'],
    vixie: ['2026-03-28T01:30Z', '2026-03-29T01:00Z', '2026-03-30T00:30Z'],
  },
  {
    name: 'London fall back: 01:30 happens twice on 25 October',
    zone: LON, cron: '30 1 * * *', from: '2026-10-24T00:00Z', to: '2026-10-27T00:00Z',
    kubernetes: ['2026-10-24T00:30Z', '2026-10-25T00:30Z', '2026-10-25T01:30Z', '2026-10-26T01:30Z'],
    vixie: ['2026-10-24T00:30Z', '2026-10-25T00:30Z', '2026-10-26T01:30Z'],
  },
  {
    name: 'New York spring forward: 01:30 is before the 02:00 gap',
    zone: NY, cron: '30 1 * * *', from: '2026-03-07T00:00Z', to: '2026-03-10T00:00Z',
    kubernetes: ['2026-03-07T06:30Z', '2026-03-08T06:30Z', '2026-03-09T05:30Z'],
  },
  {
    name: 'New York fall back: 01:30 happens twice on 1 November',
    zone: NY, cron: '30 1 * * *', from: '2026-10-31T00:00Z', to: '2026-11-03T00:00Z',
    kubernetes: ['2026-10-31T05:30Z', '2026-11-01T05:30Z', '2026-11-01T06:30Z', '2026-11-02T06:30Z'],
    vixie: ['2026-10-31T05:30Z', '2026-11-01T05:30Z', '2026-11-02T06:30Z'],
  },
  {
    name: 'New York spring forward: 02:30 does not exist on 8 March',
    zone: NY, cron: '30 2 * * *', from: '2026-03-07T00:00Z', to: '2026-03-10T00:00Z',
    kubernetes: ['2026-03-07T07:30Z', '2026-03-09T06:30Z'],
    vixie: ['2026-03-07T07:30Z', '2026-03-08T07:00Z', '2026-03-09T06:30Z'],
  },
  {
    name: 'New York fall back: 02:30 is after the repeated hour',
    zone: NY, cron: '30 2 * * *', from: '2026-10-31T00:00Z', to: '2026-11-03T00:00Z',
    kubernetes: ['2026-10-31T06:30Z', '2026-11-01T07:30Z', '2026-11-02T07:30Z'],
  },
  {
    name: 'New York spring forward: two skipped times make one fire at the jump',
    zone: NY, cron: '0,30 2 * * *', from: '2026-03-07T00:00Z', to: '2026-03-09T12:00Z',
    kubernetes: ['2026-03-07T07:00Z', '2026-03-07T07:30Z', '2026-03-09T06:00Z', '2026-03-09T06:30Z'],
    vixie: ['2026-03-07T07:00Z', '2026-03-07T07:30Z', '2026-03-08T07:00Z', '2026-03-09T06:00Z', '2026-03-09T06:30Z'],
  },
  // --- hourly (wildcard): real time under both policies ---
  {
    name: 'London spring forward, hourly',
    zone: LON, cron: '0 * * * *', from: '2026-03-28T23:30Z', to: '2026-03-29T03:30Z',
    kubernetes: ['2026-03-29T00:00Z', '2026-03-29T01:00Z', '2026-03-29T02:00Z', '2026-03-29T03:00Z'],
  },
  {
    name: 'London fall back, hourly',
    zone: LON, cron: '0 * * * *', from: '2026-10-24T22:30Z', to: '2026-10-25T03:30Z',
    kubernetes: ['2026-10-24T23:00Z', '2026-10-25T00:00Z', '2026-10-25T01:00Z', '2026-10-25T02:00Z', '2026-10-25T03:00Z'],
  },
  {
    name: 'New York spring forward, hourly',
    zone: NY, cron: '0 * * * *', from: '2026-03-08T05:30Z', to: '2026-03-08T09:30Z',
    kubernetes: ['2026-03-08T06:00Z', '2026-03-08T07:00Z', '2026-03-08T08:00Z', '2026-03-08T09:00Z'],
  },
  {
    name: 'New York fall back, hourly',
    zone: NY, cron: '0 * * * *', from: '2026-11-01T03:30Z', to: '2026-11-01T08:30Z',
    kubernetes: ['2026-11-01T04:00Z', '2026-11-01T05:00Z', '2026-11-01T06:00Z', '2026-11-01T07:00Z', '2026-11-01T08:00Z'],
  },
  // --- every 15 minutes (wildcard) ---
  {
    name: 'London spring forward, every 15 minutes',
    zone: LON, cron: '*/15 * * * *', from: '2026-03-29T00:20Z', to: '2026-03-29T01:50Z',
    kubernetes: ['2026-03-29T00:30Z', '2026-03-29T00:45Z', '2026-03-29T01:00Z', '2026-03-29T01:15Z', '2026-03-29T01:30Z', '2026-03-29T01:45Z'],
  },
  {
    name: 'London fall back, every 15 minutes',
    zone: LON, cron: '*/15 * * * *', from: '2026-10-24T23:50Z', to: '2026-10-25T02:20Z',
    kubernetes: [
      '2026-10-25T00:00Z', '2026-10-25T00:15Z', '2026-10-25T00:30Z', '2026-10-25T00:45Z', '2026-10-25T01:00Z',
      '2026-10-25T01:15Z', '2026-10-25T01:30Z', '2026-10-25T01:45Z', '2026-10-25T02:00Z', '2026-10-25T02:15Z',
    ],
  },
  {
    name: 'New York spring forward, every 15 minutes',
    zone: NY, cron: '*/15 * * * *', from: '2026-03-08T06:20Z', to: '2026-03-08T07:50Z',
    kubernetes: ['2026-03-08T06:30Z', '2026-03-08T06:45Z', '2026-03-08T07:00Z', '2026-03-08T07:15Z', '2026-03-08T07:30Z', '2026-03-08T07:45Z'],
  },
  {
    name: 'New York fall back, every 15 minutes',
    zone: NY, cron: '*/15 * * * *', from: '2026-11-01T04:50Z', to: '2026-11-01T07:20Z',
    kubernetes: [
      '2026-11-01T05:00Z', '2026-11-01T05:15Z', '2026-11-01T05:30Z', '2026-11-01T05:45Z', '2026-11-01T06:00Z',
      '2026-11-01T06:15Z', '2026-11-01T06:30Z', '2026-11-01T06:45Z', '2026-11-01T07:00Z', '2026-11-01T07:15Z',
    ],
  },
  // --- Lord Howe: a 30-minute shift (02:00 -> 02:30 in October, 02:00 -> 01:30 in April) ---
  {
    name: 'Lord Howe spring forward: 02:15 does not exist on 4 October',
    zone: LHI, cron: '15 2 * * *', from: '2026-10-02T00:00Z', to: '2026-10-05T00:00Z',
    kubernetes: ['2026-10-02T15:45Z', '2026-10-04T15:15Z'],
    vixie: ['2026-10-02T15:45Z', '2026-10-03T15:30Z', '2026-10-04T15:15Z'],
  },
  {
    name: 'Lord Howe fall back: 01:45 happens twice on 5 April',
    zone: LHI, cron: '45 1 * * *', from: '2026-04-03T00:00Z', to: '2026-04-06T00:00Z',
    kubernetes: ['2026-04-03T14:45Z', '2026-04-04T14:45Z', '2026-04-04T15:15Z', '2026-04-05T15:15Z'],
    vixie: ['2026-04-03T14:45Z', '2026-04-04T14:45Z', '2026-04-05T15:15Z'],
  },
  {
    name: 'Lord Howe spring forward, hourly: 02:00 is skipped',
    zone: LHI, cron: '0 * * * *', from: '2026-10-03T13:30Z', to: '2026-10-03T17:30Z',
    kubernetes: ['2026-10-03T14:30Z', '2026-10-03T16:00Z', '2026-10-03T17:00Z'],
  },
  // robfig steps whole hours from the previous fire; across a 30-minute shift that lands on :30
  // and drops fires a wildcard schedule would otherwise get (Vixie keeps them).
  {
    name: 'Lord Howe spring forward, every 4 hours: robfig skips 04:00',
    zone: LHI, cron: '0 */4 * * *', from: '2026-10-03T00:00Z', to: '2026-10-04T02:00Z',
    kubernetes: ['2026-10-03T01:30Z', '2026-10-03T05:30Z', '2026-10-03T09:30Z', '2026-10-03T13:30Z', '2026-10-03T21:00Z', '2026-10-04T01:00Z'],
    vixie: ['2026-10-03T01:30Z', '2026-10-03T05:30Z', '2026-10-03T09:30Z', '2026-10-03T13:30Z', '2026-10-03T17:00Z', '2026-10-03T21:00Z', '2026-10-04T01:00Z'],
  },
  {
    name: 'Lord Howe spring forward: robfig also skips 03:00, which exists',
    zone: LHI, cron: '0 3 * * *', from: '2026-10-02T00:00Z', to: '2026-10-05T00:00Z',
    kubernetes: ['2026-10-02T16:30Z', '2026-10-04T16:00Z'],
    vixie: ['2026-10-02T16:30Z', '2026-10-03T16:00Z', '2026-10-04T16:00Z'],
  },
  {
    name: 'Lord Howe fall back, every 2 minutes in hour 2: robfig skips 02:00-02:28',
    zone: LHI, cron: '*/2 2 * * *', from: '2026-04-04T15:20Z', to: '2026-04-04T16:05Z',
    kubernetes: ['2026-04-04T16:00Z', '2026-04-04T16:02Z', '2026-04-04T16:04Z'],
    vixie: [
      '2026-04-04T15:30Z', '2026-04-04T15:32Z', '2026-04-04T15:34Z', '2026-04-04T15:36Z', '2026-04-04T15:38Z',
      '2026-04-04T15:40Z', '2026-04-04T15:42Z', '2026-04-04T15:44Z', '2026-04-04T15:46Z', '2026-04-04T15:48Z',
      '2026-04-04T15:50Z', '2026-04-04T15:52Z', '2026-04-04T15:54Z', '2026-04-04T15:56Z', '2026-04-04T15:58Z',
      '2026-04-04T16:00Z', '2026-04-04T16:02Z', '2026-04-04T16:04Z',
    ],
  },
];

const utc = (d: Date): string => d.toISOString().replace(':00.000Z', 'Z');

describe('DST transitions, 2026', () => {
  it.each([
    // zone, last instant of the old offset, new offset (minutes)
    [LON, '2026-03-29T00:59:59Z', 0, 60],
    [LON, '2026-10-25T00:59:59Z', 60, 0],
    [NY, '2026-03-08T06:59:59Z', -300, -240],
    [NY, '2026-11-01T05:59:59Z', -240, -300],
  ])('%s changes offset at %s + 1 s', (zone, before, oldOffset, newOffset) => {
    const t = new Date(before);
    expect(wallTime(t, zone).offsetMinutes).toBe(oldOffset);
    expect(wallTime(new Date(t.getTime() + 1000), zone).offsetMinutes).toBe(newOffset);
  });

  describe.each(cases)('$name ($cron, $zone)', (c) => {
    it.each(['kubernetes', 'vixie'] as const)('%s', (policy) => {
      const expected = policy === 'vixie' ? (c.vixie ?? c.kubernetes) : c.kubernetes;
      const got = occurrencesBetween(c.cron, c.zone, new Date(c.from), new Date(c.to), policy).map(utc);
      expect(got).toEqual(expected);
    });
  });
});

describe('wallTime', () => {
  it('writes RFC 3339 with the offset, as the cronjob-scheduled-timestamp annotation does', () => {
    expect(wallTime(new Date('2026-11-01T05:30:00Z'), NY).iso).toBe('2026-11-01T01:30:00-04:00');
    expect(wallTime(new Date('2026-11-01T06:30:00Z'), NY).iso).toBe('2026-11-01T01:30:00-05:00');
    expect(wallTime(new Date('2026-06-01T12:00:00Z'), 'Asia/Kolkata').iso).toBe('2026-06-01T17:30:00+05:30');
    expect(wallTime(new Date('2026-10-03T15:30:00Z'), LHI).iso).toBe('2026-10-04T02:30:00+11:00');
  });

  it('writes a year outside 0000-9999 as toISOString does (cronsafe schedule --at 0000-01-01T00:00:00Z showed "00-1-12-31")', () => {
    expect(wallTime(new Date('-000001-12-31T01:30:00Z'), 'UTC').iso).toBe('-000001-12-31T01:30:00Z');
    expect(wallTime(new Date('+010000-01-01T06:30:00Z'), NY).iso).toBe('+010000-01-01T01:30:00-05:00');
    expect(wallTime(new Date('0000-01-01T01:30:00Z'), 'UTC').iso).toBe('0000-01-01T01:30:00Z');
  });

  it('writes a zero offset as Z, as Go does', () => {
    expect(wallTime(new Date('2026-01-15T09:00:00Z'), LON).iso).toBe('2026-01-15T09:00:00Z');
    expect(wallTime(new Date('2026-07-15T09:00:00Z'), LON).iso).toBe('2026-07-15T10:00:00+01:00');
  });

  it('gives the fields a caller needs to log a fire', () => {
    expect(wallTime(new Date('2026-11-01T06:30:00Z'), NY)).toEqual({
      iso: '2026-11-01T01:30:00-05:00', zone: NY,
      year: 2026, month: 11, day: 1, hour: 1, minute: 30, second: 0, weekday: 0, offsetMinutes: -300,
    });
  });
});

describe('isRepeatedWallTime: the duplicate fall-back fire', () => {
  it.each([
    [NY, '2026-11-01T05:30:00Z', false], // 01:30 EDT, first pass
    [NY, '2026-11-01T06:30:00Z', true], // 01:30 EST, second pass
    [NY, '2026-11-01T07:30:00Z', false], // 02:30 EST, once
    [LON, '2026-10-25T00:30:00Z', false],
    [LON, '2026-10-25T01:30:00Z', true],
    [LHI, '2026-04-04T14:45:00Z', false], // 01:45 +11:00
    [LHI, '2026-04-04T15:15:00Z', true], // 01:45 +10:30
    [LHI, '2026-04-04T14:15:00Z', false], // 01:15 +11:00: only 01:30-01:59 repeat
    ['UTC', '2026-11-01T06:30:00Z', false],
  ])('%s %s -> %s', (zone, at, repeated) => {
    expect(isRepeatedWallTime(new Date(at), zone)).toBe(repeated);
  });

  it('marks exactly the extra fixed-time fires Kubernetes makes compared with Vixie', () => {
    for (const c of cases.filter((x) => parseCron(x.cron).kind === 'fixed-time')) {
      const k8s = occurrencesBetween(c.cron, c.zone, new Date(c.from), new Date(c.to), 'kubernetes');
      const firstPasses = k8s.filter((d) => !isRepeatedWallTime(d, c.zone)).map(utc);
      const vixieReal = (c.vixie ?? c.kubernetes).filter((d) => c.kubernetes.includes(d));
      expect(firstPasses, c.name).toEqual(vixieReal);
    }
  });
});
