/** `dead-letter list` option parsers: commander turns their InvalidArgumentError into exit 2. */
import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { parseLimit, parseSince } from '../../src/commands/list-options.js';

describe('parseSince', () => {
  it.each([
    ['2026-11-30', Date.UTC(2026, 10, 30)],
    ['2024-02-29', Date.UTC(2024, 1, 29)],
    ['2026-11-30T08:00:00Z', Date.UTC(2026, 10, 30, 8)],
    ['2026-11-30T08:00Z', Date.UTC(2026, 10, 30, 8)],
    ['2026-11-30T08:00:00.250+01:00', Date.UTC(2026, 10, 30, 7, 0, 0, 250)],
    ['2026-11-30t23:59:59z', Date.UTC(2026, 10, 30, 23, 59, 59)],
  ])('accepts %s', (value, ms) => {
    expect(parseSince(value).getTime()).toBe(ms);
  });

  it.each([
    '2025-02-30', // rolled over to 2025-03-02 by new Date()
    '2025-02-29', // not a leap year
    '2026-04-31',
    '2026-13-01',
    '2026-00-10',
    '2026-11-00',
    '2026-11-30T24:00:00Z',
    '2026-11-30T23:60:00Z',
    '2026-11-30T23:59:60Z',
    '2026-11-30T08:00:00+24:00',
    '2026-11-30T08:00:00', // no zone
    'yesterday',
    '1764489600000',
  ])('refuses %s', (value) => {
    expect(() => parseSince(value)).toThrow(InvalidArgumentError);
  });
});

describe('parseLimit', () => {
  it('takes positive integers only', () => {
    expect(parseLimit('100')).toBe(100);
    for (const bad of ['0', '-1', '1.5', '1e3', 'abc', '99999999999999999999']) expect(() => parseLimit(bad), bad).toThrow(InvalidArgumentError);
  });
});
