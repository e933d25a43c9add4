import { describe, expect, it } from 'vitest';
import { assertFires, CronSyntaxError, parseCron } from '../../src/schedule/cron.js';
import { nextOccurrence, occurrencesBetween } from '../../src/schedule/occurrences.js';

const utc = (d: Date | null): string | null => d && d.toISOString().replace(':00.000Z', 'Z');

describe('parseCron: valid expressions', () => {
  it('expands ranges, lists, steps and names', () => {
    const s = parseCron('0-10/5,30 9-17/4 1,15 jan-MAR/2 Mon-fri');
    expect(s.minutes).toEqual([0, 5, 10, 30]);
    expect(s.hours).toEqual([9, 13, 17]);
    expect([...s.daysOfMonth].sort((a, b) => a - b)).toEqual([1, 15]);
    expect([...s.months].sort((a, b) => a - b)).toEqual([1, 3]);
    expect([...s.daysOfWeek].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5]);
  });

  it('reads N/step as N-max/step, as robfig and croner do', () => {
    expect(parseCron('5/20 * * * *').minutes).toEqual([5, 25, 45]);
  });

  it('reads day-of-week 7 as Sunday', () => {
    expect([...parseCron('0 0 * * 7').daysOfWeek]).toEqual([0]);
    expect([...parseCron('0 0 * * 5-7').daysOfWeek].sort()).toEqual([0, 5, 6]);
  });

  it.each([
    ['@yearly', '0 0 1 1 *'],
    ['@annually', '0 0 1 1 *'],
    ['@monthly', '0 0 1 * *'],
    ['@weekly', '0 0 * * 0'],
    ['@daily', '0 0 * * *'],
    ['@midnight', '0 0 * * *'],
    ['@hourly', '0 * * * *'],
  ])('expands %s to %s', (macro, fields) => {
    expect(parseCron(macro).fields.join(' ')).toBe(fields);
  });

  it.each([
    ['30 1 * * *', 'fixed-time'],
    ['0 2,3 * * *', 'fixed-time'],
    ['0 9-17 * * 1-5', 'fixed-time'],
    ['@daily', 'fixed-time'],
    ['0 * * * *', 'wildcard'],
    ['*/15 * * * *', 'wildcard'],
    ['0 */2 * * *', 'wildcard'],
    ['*/10 1 * * *', 'wildcard'],
    ['@hourly', 'wildcard'],
  ])('classifies %s as %s (DST.md: minute or hour starting with *)', (cron, kind) => {
    expect(parseCron(cron).kind).toBe(kind);
  });
});

describe('parseCron: errors name the field and the reason', () => {
  it.each([
    ['61 * * * *', 'minute field "61": value out of range 0-59'],
    ['* 24 * * *', 'hour field "24": value out of range 0-23'],
    ['* * 0 * *', 'day-of-month field "0": value out of range 1-31'],
    ['* * * 13 *', 'month field "13": value out of range 1-12'],
    ['* * * * 8', 'day-of-week field "8": value out of range 0-7'],
    ['* * * foo *', 'month field "foo": "foo" is not a number or name'],
    ['x * * * *', 'minute field "x": "x" is not a number'],
    ['*/0 * * * *', 'minute field "*/0": step "0" must be a whole number of 1 or more'],
    ['1/2/3 * * * *', 'minute field "1/2/3": "1/2/3" has more than one "/"'],
    ['10-5 * * * *', 'minute field "10-5": range start 10 is after range end 5'],
    ['1,,2 * * * *', 'minute field "1,,2": empty item in list'],
    ['5- * * * *', 'minute field "5-": missing value'],
    ['0 0 L * *', 'day-of-month field "L": "L": L, W and # are not supported'],
    ['0 0 * * 5#2', 'day-of-week field "5#2": "5#2": L, W and # are not supported'],
  ])('%s', (cron, message) => {
    expect(() => parseCron(cron)).toThrow(message);
  });

  // Parsed by every cron (Kubernetes takes them), fired by none: the config refuses them.
  it.each(['0 0 30 2 *', '0 0 31 4,6,9,11 *', '0 0 30,31 feb ?', '0 0 30 2 */1', '0 0 31 4 ?/1'])('assertFires refuses %j: it never fires', (cron) => {
    expect(() => assertFires(parseCron(cron))).toThrow(`cron expression "${cron}": never fires (no month it allows has a day of month it allows)`);
  });

  it('assertFires in the daemon\'s dialect (vixie) refuses "0 0 30 2 */2", which Kubernetes fires on Sundays, Tuesdays...', () => {
    expect(() => assertFires(parseCron('0 0 30 2 */2'))).not.toThrow();
    expect(() => assertFires(parseCron('0 0 30 2 */2'), 'vixie')).toThrow('never fires');
    expect(() => assertFires(parseCron('0 0 29 2 */2'), 'vixie')).not.toThrow();
  });

  it.each(['0 0 29 2 *', '0 0 31 2,3 *', '0 0 30 2 1', '0 0 31 4 */2', '0 0 1-31 2 *', '@yearly'])('assertFires takes %j (a leap day, another month, or a weekday OR-ed in)', (cron) => {
    expect(() => assertFires(parseCron(cron))).not.toThrow();
  });

  it('carries the field for the config layer', () => {
    try {
      parseCron('0 25 * * *');
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(CronSyntaxError);
      expect((err as CronSyntaxError).field).toBe('hour');
    }
  });

  it.each([
    ['', 'cron expression is empty'],
    ['* * * *', 'expected 5 fields (minute hour day-of-month month day-of-week), got 4'],
    ['0 * * * * *', 'expected 5 fields (minute hour day-of-month month day-of-week), got 6'],
    ['@reboot', 'unsupported macro'],
    ['@every 5m', 'unsupported macro'],
    // robfig/cron (the Kubernetes API server refuses the CronJob) and Vixie cron read
    // macros case-sensitively: one that only cronsafe took would never fire.
    ['@DAILY', 'macros are lower case (Kubernetes and cron refuse "@DAILY"): write @daily'],
    ['@Hourly', 'write @hourly'],
    ['TZ=Europe/London 0 1 * * *', 'put the zone in schedule.timeZone'],
    ['CRON_TZ=UTC 0 1 * * *', 'put the zone in schedule.timeZone'],
  ])('rejects %j', (cron, message) => {
    expect(() => parseCron(cron)).toThrow(message);
  });
});

describe('day-of-month / day-of-week', () => {
  it('ORs them when both are restricted (Vixie and robfig agree)', () => {
    // 13th of the month, or any Friday: from Wed 2026-02-11 -> Fri 13th, Fri 20th, ...
    const got = occurrencesBetween('0 0 13 * 5', 'UTC', new Date('2026-02-11T00:00Z'), new Date('2026-03-14T00:00Z'), 'vixie');
    expect(got.map(utc)).toEqual([
      '2026-02-13T00:00Z',
      '2026-02-20T00:00Z',
      '2026-02-27T00:00Z',
      '2026-03-06T00:00Z',
      '2026-03-13T00:00Z',
    ]);
    const k8s = occurrencesBetween('0 0 13 * 5', 'UTC', new Date('2026-02-11T00:00Z'), new Date('2026-03-14T00:00Z'), 'kubernetes');
    expect(k8s).toEqual(got);
  });

  it('ANDs them when one is *', () => {
    // Fridays that are the 13th: 2026-02-13, 2026-03-13, 2026-11-13.
    expect(utc(nextOccurrence('0 0 13 * *', 'UTC', new Date('2026-02-14T00:00Z'), 'vixie'))).toBe('2026-03-13T00:00Z');
    expect(utc(nextOccurrence('0 0 * * 5', 'UTC', new Date('2026-02-14T00:00Z'), 'vixie'))).toBe('2026-02-20T00:00Z');
  });

  it('keeps each flavour for */2: Vixie sees a star (AND), robfig a restriction (OR)', () => {
    // Odd days AND Mondays (Vixie) vs odd days OR Mondays (robfig). 2026-03-02 is a Monday.
    const after = new Date('2026-03-01T12:00Z');
    expect(utc(nextOccurrence('0 0 */2 * 1', 'UTC', after, 'vixie'))).toBe('2026-03-09T00:00Z');
    expect(utc(nextOccurrence('0 0 */2 * 1', 'UTC', after, 'kubernetes'))).toBe('2026-03-02T00:00Z');
  });
});
