import { describe, expect, it } from 'vitest';
import { T0, type UseLedger } from './ledger-fixtures.js';

/** What the schedule records: the last run started, occurrences accounted for, event counts. */
export function scheduleContract(use: UseLedger): void {
  describe('lastRunStart', () => {
    it('is the latest run started, finished or not, whatever its outcome', async () => {
      expect(await use().lastRunStart()).toBeNull();
      await use().startRun({ runId: 'r1', owner: 'o', startedAt: T0, scheduledFor: T0 - 60_000 });
      expect(await use().lastRunStart()).toEqual({ runId: 'r1', startedAt: T0, scheduledFor: T0 - 60_000 });
      await use().startRun({ runId: 'r2', owner: 'o', startedAt: T0 + 1000 });
      await use().finishRun('r2', T0 + 1500, 'stale', {});
      expect(await use().lastRunStart()).toEqual({ runId: 'r2', startedAt: T0 + 1000, scheduledFor: null });
      // An older start recorded late does not win; a tie goes to the one started last.
      await use().startRun({ runId: 'r0', owner: 'o', startedAt: T0 - 5000 });
      expect((await use().lastRunStart())?.runId).toBe('r2');
      await use().startRun({ runId: 'r3', owner: 'o', startedAt: T0 + 1000, scheduledFor: T0 });
      expect(await use().lastRunStart()).toEqual({ runId: 'r3', startedAt: T0 + 1000, scheduledFor: T0 });
    });

    it('with atOrBefore, is the latest run started by then (cronsafe schedule --at an earlier instant)', async () => {
      await use().startRun({ runId: 'r1', owner: 'o', startedAt: T0 });
      await use().startRun({ runId: 'r2', owner: 'o', startedAt: T0 + 1000 });
      expect((await use().lastRunStart(T0 + 999))?.runId).toBe('r1');
      expect((await use().lastRunStart(T0 + 1000))?.runId).toBe('r2');
      expect((await use().lastRunStart(T0 - 1))).toBeNull();
      expect((await use().lastRunStart())?.runId).toBe('r2');
    });
  });

  describe('occurrenceRan', () => {
    it('is whether any run was recorded for the occurrence, however many runs came after it', async () => {
      expect(await use().occurrenceRan(T0)).toBe(false);
      await use().startRun({ runId: 'r0', owner: 'o', startedAt: T0 + 500, scheduledFor: T0 });
      await use().finishRun('r0', T0 + 900, 'failed', {});
      for (let i = 1; i <= 120; i++) await use().startRun({ runId: `r${i}`, owner: 'o', startedAt: T0 + i * 60_000, scheduledFor: T0 + i * 60_000 });
      await use().startRun({ runId: 'growth', owner: 'o', startedAt: T0 + 200_000 }); // no occurrence
      expect(await use().occurrenceRan(T0)).toBe(true);
      expect(await use().occurrenceRan(T0 + 120 * 60_000)).toBe(true);
      expect(await use().occurrenceRan(T0 + 30_000)).toBe(false);
      expect(await use().occurrenceRan(T0 + 121 * 60_000)).toBe(false);
    });
  });

  describe('recordSource', () => {
    it('returns the source recorded before only when it changes', async () => {
      expect(await use().recordSource('/data/a')).toBeNull(); // the first record
      expect(await use().recordSource('/data/a')).toBeNull(); // the same again
      expect(await use().recordSource('/data/b')).toBe('/data/a');
      expect(await use().recordSource('/data/b')).toBeNull();
      expect(await use().recordSource('/data/a')).toBe('/data/b'); // two configs taking turns: every change
    });
  });

  describe('recordSchedule', () => {
    it('returns the record before, and replaces it only for another expression or zone (keeping its since)', async () => {
      const daily = { cron: '0 0 * * *', timeZone: 'UTC', since: T0 };
      expect(await use().recordSchedule(daily)).toBeNull(); // the first record
      expect(await use().recordSchedule({ ...daily, since: T0 + 1 })).toEqual(daily); // the same schedule: kept as it was
      const hourly = { cron: '0 * * * *', timeZone: 'UTC', since: T0 + 2 };
      expect(await use().recordSchedule(hourly)).toEqual(daily);
      const london = { ...hourly, timeZone: 'Europe/London', since: T0 + 3 };
      expect(await use().recordSchedule(london)).toEqual(hourly);
      expect(await use().recordSchedule({ ...london, since: T0 + 4 })).toEqual(london);
    });
  });

  describe('occurrences', () => {
    const MIN = 60_000;
    it('lastOccurrenceRecorded is the greatest run scheduledFor or event occurrence', async () => {
      expect(await use().lastOccurrenceRecorded()).toBeNull();
      await use().startRun({ runId: 'r1', owner: 'o', startedAt: T0 });
      await use().recordEvent('overrun', T0, { note: 'no occurrence' });
      expect(await use().lastOccurrenceRecorded()).toBeNull();
      await use().startRun({ runId: 'r2', owner: 'o', startedAt: T0 + MIN, scheduledFor: T0 + MIN });
      expect(await use().lastOccurrenceRecorded()).toBe(T0 + MIN);
      await use().recordEvent('missed', T0 + 10 * MIN, {}, T0 + 2 * MIN);
      await use().recordEvent('missed', T0 + 10 * MIN, undefined, T0 + 3 * MIN);
      expect(await use().lastOccurrenceRecorded()).toBe(T0 + 3 * MIN);
      await use().recordEvent('overrun', T0 + 10 * MIN, { activeRun: 'r2' }, T0 + 2 * MIN); // older: no change
      expect(await use().lastOccurrenceRecorded()).toBe(T0 + 3 * MIN);
      await use().recordEvent('stale', T0 + 10 * MIN, {}, T0 + 4 * MIN);
      expect(await use().lastOccurrenceRecorded()).toBe(T0 + 4 * MIN);
      await use().recordEvent('lock-skip', T0 + 10 * MIN, {}, T0 + 5 * MIN);
      expect(await use().lastOccurrenceRecorded()).toBe(T0 + 5 * MIN);
      await use().startRun({ runId: 'r3', owner: 'o', startedAt: T0 + 11 * MIN, scheduledFor: T0 + 11 * MIN });
      expect(await use().lastOccurrenceRecorded()).toBe(T0 + 11 * MIN);
    });

    it('rejects an occurrence that is not integer epoch ms, recording nothing', async () => {
      for (const bad of [1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        await expect(use().recordEvent('missed', T0, {}, bad)).rejects.toThrow(/occurrence/);
      }
      expect(await use().countEvents('missed')).toBe(0);
      expect((await use().totals()).missed).toBe(0);
      expect(await use().lastOccurrenceRecorded()).toBeNull();
    });
  });

  describe('overruns', () => {
    it('an overrun and a lock-skip that name one occurrence are one overrun, in either order (plain cron: the watch and the start cron made for it)', async () => {
      const MIN = 60_000;
      await use().recordEvent('overrun', T0 + 1, {}, T0);
      await use().recordEvent('lock-skip', T0 + 2, {}, T0);
      await use().recordEvent('lock-skip', T0 + MIN + 1, {}, T0 + MIN);
      await use().recordEvent('overrun', T0 + MIN + 2, {}, T0 + MIN);
      expect(await use().totals()).toMatchObject({ overruns: 2, lockSkips: 2 });
      // A second start for one occurrence (by hand), and skips that name no occurrence, still count.
      await use().recordEvent('lock-skip', T0 + 3, {}, T0);
      await use().recordEvent('lock-skip', T0 + 4);
      await use().recordEvent('overrun', T0 + 2 * MIN, {}, T0 + 2 * MIN);
      expect(await use().totals()).toMatchObject({ overruns: 5, lockSkips: 4 });
      expect(await use().countEvents('overrun')).toBe(3);
      expect(await use().countEvents('lock-skip')).toBe(4);
    });
  });

  describe('countEvents', () => {
    it('counts events of one kind, since a time (inclusive)', async () => {
      await use().recordEvent('missed', T0, {}, T0);
      await use().recordEvent('missed', T0 + 10, {}, T0 + 1);
      await use().recordEvent('missed', T0 + 20);
      await use().recordEvent('overrun', T0 + 20);
      expect(await use().countEvents('missed')).toBe(3);
      expect(await use().countEvents('missed', T0 + 10)).toBe(2);
      expect(await use().countEvents('missed', T0 + 21)).toBe(0);
      expect(await use().countEvents('overrun', T0)).toBe(1);
      expect(await use().countEvents('stale')).toBe(0);
    });
  });
}
