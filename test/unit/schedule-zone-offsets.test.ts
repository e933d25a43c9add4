/**
 * zone.ts reads offsets from Intl's `format()` string (cheaper than `formatToParts`) with a
 * formatter that has no era, and switches to one with the era before year 2. Both must give
 * what the fields of `formatToParts` with the era say, in every zone ICU knows, around the
 * start of the era, far back and far ahead, and at the 2026 transitions.
 */
import { describe, expect, it } from 'vitest';
import { offsetAt, wallOf } from '../../src/schedule/zone.js';

/** The offset as the fields of formatToParts (with the era) give it: the reference. */
function referenceOffset(zone: string, ms: number): number {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    era: 'short',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  const whole = Math.floor(ms / 1000) * 1000;
  const f: Record<string, string> = {};
  for (const part of format.formatToParts(whole)) f[part.type] = part.value;
  const year = f.era === 'BC' || f.era === 'B' ? 1 - Number(f.year) : Number(f.year);
  const local = new Date(0);
  local.setUTCFullYear(year, Number(f.month) - 1, Number(f.day));
  local.setUTCHours(Number(f.hour), Number(f.minute), Number(f.second), 0);
  return local.getTime() - whole;
}

const DAY = 86_400_000;
/** 0001-01-01T00:00:00Z. */
const YEAR_ONE = -62_135_596_800_000;

const INSTANTS = [
  YEAR_ONE - 400 * DAY, // 2 BC: printed as year 2 without the era
  YEAR_ONE - DAY + 3_600_000, // 1 BC (year 0), the day before the era starts
  YEAR_ONE + 1_000, // the era's first second: a zone west of Greenwich is still in 1 BC
  YEAR_ONE + DAY + 7_200_000, // year 1 everywhere
  Date.UTC(50, 5, 1) - 1900 * 365.2425 * DAY, // years 0-99 are not Date.UTC's 1900-1999
  Date.UTC(1800, 0, 1), // local mean time, offsets in seconds
  Date.UTC(1969, 11, 31, 23, 59, 59),
  Date.UTC(2026, 2, 29, 0, 59, 59), // London's spring forward, either side
  Date.UTC(2026, 2, 29, 1, 0, 0),
  Date.UTC(2026, 10, 1, 5, 59, 59), // New York's fall back, either side
  Date.UTC(2026, 10, 1, 6, 0, 0),
  Date.UTC(2300, 6, 1), // rules extrapolated
  8_000_000_000_000_000, // year 255,479
];

describe('zone offsets from format()', () => {
  it('agree with formatToParts in every zone, across the era boundary and far ahead', () => {
    const wrong: string[] = [];
    for (const zone of Intl.supportedValuesOf('timeZone')) {
      for (const ms of INSTANTS) {
        const got = offsetAt(zone, ms);
        const want = referenceOffset(zone, ms);
        if (got !== want) wrong.push(`${zone} at ${new Date(ms).toISOString()}: ${got} != ${want}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('gives the wall clock of 1 BC as year 0, not year 1', () => {
    expect(wallOf('UTC', YEAR_ONE - DAY).year).toBe(0);
    expect(wallOf('America/New_York', YEAR_ONE + 1_000).year).toBe(0);
    expect(wallOf('Asia/Tokyo', YEAR_ONE - 1_000).year).toBe(1);
  });
});
