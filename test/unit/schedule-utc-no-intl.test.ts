/**
 * A schedule in UTC needs no Intl: the process's first formatter costs 12-14 ms of CPU (ICU's
 * start) in every `validate`, `schedule` and run start (docs/benchmarks.md, 2026-12-06). The
 * answers stay Intl's: offset 0 at every instant, no transition.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { assertTimeZone, instantsForWall, lastTransitionIn, offsetAt, wallOf } from '../../src/schedule/zone.js';

const YEAR = 365 * 24 * 3600 * 1000;

describe('a schedule in UTC', () => {
  afterEach(() => vi.restoreAllMocks());

  it.each(['UTC', 'Etc/UTC'])('%s: validated and reckoned without an Intl formatter, with the offsets Intl gives', (zone) => {
    const made = vi.spyOn(Intl, 'DateTimeFormat');
    const instants = [-62135596800000 - YEAR, 0, Date.UTC(2026, 2, 29, 1, 0, 0), Date.UTC(2026, 9, 25, 1, 0, 0), Date.UTC(2400, 0, 1)];
    expect(assertTimeZone(zone)).toBe(zone);
    const offsets = instants.map((ms) => offsetAt(zone, ms));
    const walls = instants.map((ms) => wallOf(zone, ms));
    const transition = lastTransitionIn(zone, instants[0]!, instants.at(-1)!);
    const wall = instantsForWall(zone, Date.UTC(2026, 2, 29, 1, 30));
    expect(made).not.toHaveBeenCalled();
    vi.restoreAllMocks();
    // What Intl itself says of the same instants.
    const intl = new Intl.DateTimeFormat('en-US', { timeZone: zone, timeZoneName: 'longOffset' });
    for (const ms of instants) expect(intl.formatToParts(ms).find((p) => p.type === 'timeZoneName')?.value).toBe('GMT+00:00');
    expect(offsets).toEqual(instants.map(() => 0));
    // The wall time in UTC is the instant itself (from year 100 on, where Date.UTC reads years as given).
    expect(walls.slice(1).map((w) => Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second))).toEqual(instants.slice(1));
    expect(walls[0]).toMatchObject({ year: 0, month: 1, day: 2, hour: 0 });
    expect(transition).toBeNull();
    expect(wall).toEqual([Date.UTC(2026, 2, 29, 1, 30)]);
  });
});
