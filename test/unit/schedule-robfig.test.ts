/**
 * The Go behaviour the robfig port depends on, and the two places where we part from robfig
 * on purpose. Expected values come from Go 1.19 and robfig/cron v3.0.1.
 */
import { describe, expect, it } from 'vitest';
import { parseCron } from '../../src/schedule/cron.js';
import { latestOccurrence, nextOccurrence, occurrencesBetween, wallTime } from '../../src/schedule/occurrences.js';
import { goDate, robfigNext } from '../../src/schedule/robfig.js';

describe('goDate reproduces Go time.Date for wall times that do not exist or exist twice', () => {
  it.each([
    // zone, wall time, Go's answer
    ['America/New_York', [2026, 3, 8, 2, 30], '2026-03-08T06:30:00Z'], // gap: back to 01:30 EST
    ['America/New_York', [2026, 11, 1, 1, 30], '2026-11-01T05:30:00Z'], // overlap: first pass
    ['Europe/London', [2026, 3, 29, 1, 30], '2026-03-29T01:30:00Z'], // gap: on to 02:30 BST
    ['Europe/London', [2026, 10, 25, 1, 30], '2026-10-25T01:30:00Z'], // overlap: second pass
    ['Australia/Lord_Howe', [2026, 10, 4, 2, 0], '2026-10-03T15:30:00Z'], // gap: on to 02:30
    ['Australia/Lord_Howe', [2026, 4, 5, 1, 45], '2026-04-04T15:15:00Z'], // overlap: second pass
    ['UTC', [2026, 2, 31, 0, 0], '2026-03-03T00:00:00Z'], // overflow normalised
  ] as const)('%s %j -> %s', (zone, [y, mo, d, h, mi], expected) => {
    expect(new Date(goDate(zone, y, mo, d, h, mi, 0)).toISOString().replace('.000', '')).toBe(expected);
  });
});

describe('robfigNext matches robfig v3.0.1', () => {
  it.each([
    // zone, expression, after, robfig's Next
    ['America/New_York', '30 1 * * *', '2026-11-01T05:30:00Z', '2026-11-01T06:30:00Z'],
    ['America/New_York', '30 1 * * *', '2026-11-01T06:30:00Z', '2026-11-02T06:30:00Z'],
    ['Australia/Lord_Howe', '0 */4 * * *', '2026-10-03T16:43:59Z', '2026-10-03T17:00:00Z'], // 04:00 from 03:43
    ['Australia/Lord_Howe', '0 */4 * * *', '2026-10-03T13:30:00Z', '2026-10-03T21:00:00Z'], // 08:00 from 00:00
    ['UTC', '0 0 29 2 *', '2026-01-01T00:00:00Z', '2028-02-29T00:00:00Z'],
    ['UTC', '0 0 */2 * 1', '2026-03-01T12:00:00Z', '2026-03-02T00:00:00Z'],
  ])('%s %s after %s -> %s', (zone, cron, after, expected) => {
    expect(new Date(robfigNext(parseCron(cron), zone, Date.parse(after))!).toISOString().replace('.000', '')).toBe(expected);
  });

  it('gives up where robfig hangs (Pacific/Apia skipped 2011-12-30)', () => {
    expect(robfigNext(parseCron('0,30 1,2 1 * *'), 'Pacific/Apia', Date.parse('2011-12-01T12:30:00Z'))).toBeNull();
  });

  it('gives up after five calendar years, as robfig does (0 0 29 2 * from 2097)', () => {
    expect(robfigNext(parseCron('0 0 29 2 *'), 'UTC', Date.parse('2097-01-01T00:00:00Z'))).toBeNull();
  });
});

describe('kubernetes policy: the controller chain, fire to fire', () => {
  it('a skip carried across months (Lord Howe, 1999): follows the chain, not Next(now)', () => {
    const s = parseCron('0 0 31 * *');
    const zone = 'Australia/Lord_Howe';
    // robfig from the 31 Oct 1999 fire (00:00 +10:30) walks across the 02:00 change on :30 and
    // next matches 31 Jan 2000; a fresh Next(30 Dec) would say 31 Dec.
    expect(new Date(robfigNext(s, zone, Date.parse('1999-10-30T13:30:00Z'))!).toISOString()).toBe('2000-01-30T13:00:00.000Z');
    expect(new Date(robfigNext(s, zone, Date.parse('1999-12-30T12:00:00Z'))!).toISOString()).toBe('1999-12-30T13:00:00.000Z');
    expect(latestOccurrence(s, zone, new Date('2000-01-01T00:00Z'), 'kubernetes')?.toISOString()).toBe('1999-10-30T13:30:00.000Z');
    expect(nextOccurrence(s, zone, new Date('1999-12-30T12:00Z'), 'kubernetes')?.toISOString()).toBe('2000-01-30T13:00:00.000Z');
  });

  it('a fire at the change steps back across it (Lord Howe, 2026): the next night starts at 01:30, and latest agrees', () => {
    // robfig's chain for 0-30 1 * * * (Go 1.19, v3.0.1): ... 01:30 +10:30 (15:00Z), then 15:30Z
    // (the change, 02:00 -> 02:30 +11), then 01:30 +11 on 5 Oct (14:30Z): 01:00-01:29 are skipped,
    // because Next() from the change truncates back across it. The next night is whole again.
    const cron = '0-30 1 * * *';
    const zone = 'Australia/Lord_Howe';
    const fires = occurrencesBetween(cron, zone, new Date('2026-10-03T14:59:00Z'), new Date('2026-10-05T14:01:00Z'), 'kubernetes').map((d) => d.toISOString());
    expect(fires).toEqual(['2026-10-03T15:00:00.000Z', '2026-10-03T15:30:00.000Z', '2026-10-04T14:30:00.000Z', '2026-10-05T14:00:00.000Z', '2026-10-05T14:01:00.000Z']);
    for (const at of ['2026-10-04T14:00:00Z', '2026-10-04T14:15:30Z', '2026-10-04T14:29:59.999Z']) {
      expect(latestOccurrence(cron, zone, new Date(at), 'kubernetes')?.toISOString(), at).toBe('2026-10-03T15:30:00.000Z');
      expect(nextOccurrence(cron, zone, new Date(at), 'kubernetes')?.toISOString(), at).toBe('2026-10-04T14:30:00.000Z');
    }
    expect(latestOccurrence(cron, zone, new Date('2026-10-05T14:10:30Z'), 'kubernetes')?.toISOString()).toBe('2026-10-05T14:10:00.000Z');
  });
});

describe('kubernetes policy: a change off the hour between whole-hour offsets', () => {
  it('Asia/Gaza, 2010 (00:01 +02 -> 01:01 +03): the night the chain skips is not the latest, before or after it', () => {
    // robfig v3.0.1 (Go 1.19), stepped from fire to fire: 27 Mar 00:00 +02 (26 Mar 22:00Z), then
    // 29 Mar 00:00 +03 (28 Mar 21:00Z): the Next() from 27 Mar walks across the change at 00:01
    // and misses 28 Mar 00:00. A Next() taken after the change finds it, so the latest
    // occurrence must come from the chain, not from a walk that starts after the change.
    const zone = 'Asia/Gaza';
    expect(occurrencesBetween('0 0 * * *', zone, new Date('2010-03-26T21:59:00Z'), new Date('2010-03-28T21:00:00Z'), 'kubernetes').map((d) => d.toISOString()))
      .toEqual(['2010-03-26T22:00:00.000Z', '2010-03-28T21:00:00.000Z']);
    for (const at of ['2010-03-27T21:00:00Z', '2010-03-28T12:00:00Z', '2010-03-28T20:59:59Z']) {
      expect(latestOccurrence('0 0 * * *', zone, new Date(at), 'kubernetes')?.toISOString(), at).toBe('2010-03-26T22:00:00.000Z');
      expect(nextOccurrence('0 0 * * *', zone, new Date(at), 'kubernetes')?.toISOString(), at).toBe('2010-03-28T21:00:00.000Z');
    }
  });
});

describe('where cronsafe parts from robfig', () => {
  it('Pacific/Chatham: robfig steps backwards at fall-back; the kubernetes policy moves on', () => {
    const s = parseCron('*/7 3 * * *');
    // robfig: 03:42 +13:45 -> 02:49 +12:45 -> 03:00 +13:45 (earlier) -> ... for ever.
    const back = robfigNext(s, 'Pacific/Chatham', Date.parse('2026-04-04T14:04:00Z'))!;
    expect(wallTime(new Date(back), 'Pacific/Chatham').iso).toBe('2026-04-05T03:00:00+13:45');
    const fires = occurrencesBetween(s, 'Pacific/Chatham', new Date('2026-04-04T13:00Z'), new Date('2026-04-05T16:00Z'), 'kubernetes');
    const ms = fires.map((d) => d.getTime());
    expect(ms.every((t, i) => i === 0 || t > ms[i - 1]!)).toBe(true);
    expect(fires.length).toBeLessThan(30);
  });

  it('Pacific/Apia 2011: the search ends', () => {
    expect(nextOccurrence('0,30 1,2 1 * *', 'Pacific/Apia', new Date('2011-12-01T12:30:00Z'), 'kubernetes')).toBeNull();
  });
});

describe('day-of-week `a/n` ends at Saturday under robfig (Kubernetes), at 7 = Sunday in Vixie cron', () => {
  // robfig's day-of-week is 0-6, so `1/2` (1 through the end, every 2nd) is Mon, Wed, Fri: the
  // CronJob never fires on Sunday. Read with Vixie's end (7 = Sunday) it gained a Sunday,
  // which the kubernetes policy then predicted: a wrong latest occurrence on Sundays, a
  // Sunday occurrence recorded as missed every week. Expected values from robfig v3.0.1.
  it.each([
    ['UTC', '0 9 * * 1/2', '2026-12-05T12:00:00Z', '2026-12-07T09:00:00Z'], // Saturday -> Monday
    ['UTC', '0 9 * * 1/1', '2026-12-05T12:00:00Z', '2026-12-07T09:00:00Z'], // Mon-Sat only
    ['America/New_York', '30 1 * * 3/4', '2026-12-05T12:00:00Z', '2026-12-09T06:30:00Z'], // Wednesday only
  ])('%s %s after %s -> %s', (zone, cron, after, expected) => {
    expect(new Date(robfigNext(parseCron(cron), zone, Date.parse(after))!).toISOString().replace('.000', '')).toBe(expected);
    expect(nextOccurrence(cron, zone, new Date(after), 'kubernetes')?.toISOString().replace('.000', '')).toBe(expected);
  });

  it('the latest occurrence on a Sunday is Friday under kubernetes; the daemon (vixie) keeps its Sunday', () => {
    const sunday = new Date('2026-12-06T10:00:00Z');
    expect(latestOccurrence('0 9 * * 1/2', 'UTC', sunday, 'kubernetes')?.toISOString()).toBe('2026-12-04T09:00:00.000Z');
    expect(occurrencesBetween('0 9 * * 1/2', 'UTC', new Date('2026-11-30T00:00:00Z'), new Date('2026-12-06T23:00:00Z'), 'kubernetes').map((d) => d.getUTCDay())).toEqual([1, 3, 5]);
    expect(latestOccurrence('0 9 * * 1/2', 'UTC', sunday, 'vixie')?.toISOString()).toBe('2026-12-06T09:00:00.000Z');
  });
});
