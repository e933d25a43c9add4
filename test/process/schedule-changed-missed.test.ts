/**
 * schedule.cron (or schedule.timeZone) changed between two runs: the next run counted every
 * occurrence of the new expression since the last run's fire (made under the old one) as
 * missed, though the old schedule had no fire there. A daily job made hourly said
 * `occurrences since the last recorded one never ran` for each hour since midnight, and
 * cronsafe_missed_occurrences_total rose by as many. The first run under the new expression
 * now says the schedule changed and counts only occurrences both schedules had; runs after it
 * count as before. Real CLI, SQLite and a real PostgreSQL server.
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure, FIXTURES, runCli, workspace, type LogLine, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const MISSED = 'schedule: occurrences since the last recorded one never ran';
const CHANGED = 'schedule: schedule.cron or schedule.timeZone changed since the last recorded occurrence; of the occurrences since, only those of both schedules are counted as missed';

async function runAt(ws: Workspace, fire: string): Promise<LogLine[]> {
  const r = await runCli(['run', '-c', ws.configPath, '--scheduled-time', fire]);
  expect(r.code, r.stderr).toBe(0);
  return r.lines;
}

/** The steps, on a ledger whose missed events `missedEvents` counts. */
async function changeSchedule(ws: Workspace, missedEvents: () => Promise<number>): Promise<void> {
  await runAt(ws, '2026-06-01T00:00:00Z');

  // Daily made hourly: 01:00-04:00 were no fires of the daily schedule.
  configure(ws, { schedule: { cron: '0 * * * *', timeZone: 'UTC' } });
  const changed = await runAt(ws, '2026-06-01T05:00:00Z');
  expect(changed.find((l) => l.msg === MISSED), 'no occurrence missed under both schedules').toBeUndefined();
  expect(changed.find((l) => l.msg === CHANGED)).toMatchObject({
    cron: '0 * * * *',
    timeZone: 'UTC',
    before: { cron: '0 0 * * *', timeZone: 'UTC' },
    lastRecorded: '2026-06-01T00:00:00.000Z',
  });
  expect(await missedEvents()).toBe(0);

  // Counted again from the first fire of the new expression: 06:00 and 07:00.
  const after = await runAt(ws, '2026-06-01T08:00:00Z');
  expect(after.find((l) => l.msg === CHANGED)).toBeUndefined();
  expect(after.find((l) => l.msg === MISSED)).toMatchObject({ missed: 2, first: '2026-06-01T06:00:00.000Z' });
  expect(await missedEvents()).toBe(2);

  // The same expression written otherwise is no change.
  configure(ws, { schedule: { cron: '@hourly', timeZone: 'UTC' } });
  const same = await runAt(ws, '2026-06-01T09:00:00Z');
  expect(same.find((l) => l.msg === CHANGED)).toBeUndefined();
  expect(same.find((l) => l.msg === MISSED)).toBeUndefined();

  // Hourly to daily at midnight in London: of the hours since, the two London midnights
  // were fires of both schedules, and no run came of them.
  configure(ws, { schedule: { cron: '0 0 * * *', timeZone: 'Europe/London' } });
  const zone = await runAt(ws, '2026-06-03T23:00:00Z');
  expect(zone.find((l) => l.msg === CHANGED)).toMatchObject({ before: { cron: '0 * * * *', timeZone: 'UTC' }, timeZone: 'Europe/London' });
  expect(zone.find((l) => l.msg === MISSED)).toMatchObject({ missed: 2, first: '2026-06-01T23:00:00.000Z' });
  expect(await missedEvents()).toBe(4);
}

const handler = { module: path.join(FIXTURES, 'process/noop-module.mjs') };

describe('a change of schedule.cron or schedule.timeZone between runs', () => {
  it('SQLite: the first run under the new schedule says so, and counts no occurrence the old one did not have', async () => {
    const ws = workspace({ handler, schedule: { cron: '0 0 * * *', timeZone: 'UTC' }, log: { level: 'info' } }, { 'a.txt': 'a' });
    await changeSchedule(ws, async () => {
      const db = new Database(ws.db, { readonly: true });
      try {
        return db.prepare("SELECT count(*) FROM events WHERE kind = 'missed'").pluck().get() as number;
      } finally {
        db.close();
      }
    });
  }, 120_000);
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a change of schedule.cron or schedule.timeZone between runs', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('the first run under the new schedule says so, and counts no occurrence the old one did not have', async () => {
    const url = await server.createDatabase('schedule_changed');
    const ws = workspace({ handler, state: { postgres: url, schema: 'schedule_changed' }, schedule: { cron: '0 0 * * *', timeZone: 'UTC' }, log: { level: 'info' } }, { 'a.txt': 'a' });
    await changeSchedule(ws, async () => {
      const [r] = await server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM schedule_changed.events WHERE kind = 'missed'`, [], 'schedule_changed');
      return r?.n ?? -1;
    });
  }, 180_000);
});
