import type Database from 'better-sqlite3';
import { checkJob, JOB_KEY, LedgerNotOwnedYet, LedgerOwnedByAnotherJob, SOURCE_KEY } from '../identity.js';
import { readSchedule, replacesSchedule, SCHEDULE_KEY, scheduleValue, type ScheduleRecord } from '../schedule-record.js';

export const GET_META_SQL = 'SELECT value FROM meta WHERE key = ?';
export const SET_META_SQL = 'INSERT INTO meta (key, value) VALUES (?, ?)';
const UPSERT_META_SQL = 'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value';

/**
 * The `meta` row naming the owner of the last run asked to stop (Ledger.recordStopRequested).
 * One row: SQLite has one run at a time, and the next run's reclaim reads and removes it.
 */
export const STOP_KEY = 'stop-requested';

/**
 * The `meta` row naming the pass that discovered last (discover.ts writes it when it changes:
 * once per pass). A requeue gives the rows it makes pending that pass (requeue.ts): discovery
 * does not rewrite an unchanged done row on every pass, so one a running pass has scanned
 * already still carries an older pass, and pending again, that pass's end-of-scan
 * forgetUnseen would take it for a deleted file. As the pass's own, that pass sweeps it.
 */
export const PASS_KEY = 'discovery.pass';

/** Ledger.recordStopRequested: `owner`'s drain began. */
export function recordStopRequested(db: Database.Database, owner: string): void {
  db.prepare(UPSERT_META_SQL).run(STOP_KEY, owner);
}

/** Ledger.recordSource: the source recorded before when it was another. */
export function recordSource(db: Database.Database, directory: string): string | null {
  return db
    .transaction((): string | null => {
      const before = db.prepare(GET_META_SQL).pluck().get(SOURCE_KEY) as string | undefined;
      if (before === directory) return null;
      db.prepare(UPSERT_META_SQL).run(SOURCE_KEY, directory);
      return before ?? null;
    })
    .immediate();
}

/** Ledger.recordSchedule, in one IMMEDIATE transaction. */
export function recordSchedule(db: Database.Database, schedule: ScheduleRecord): ScheduleRecord | null {
  return db
    .transaction((): ScheduleRecord | null => {
      const before = readSchedule(db.prepare(GET_META_SQL).pluck().get(SCHEDULE_KEY) as string | undefined);
      if (replacesSchedule(before, schedule)) db.prepare(UPSERT_META_SQL).run(SCHEDULE_KEY, scheduleValue(schedule));
      return before;
    })
    .immediate();
}

/**
 * Record `job` as the ledger's owner if none is, else check that it is the owner (throws
 * LedgerOwnedByAnotherJob). IMMEDIATE, so two jobs opening a new ledger at once cannot
 * both adopt it: the second waits for the write lock, then sees the first one's name.
 * `adopt` false: none recorded is LedgerNotOwnedYet, and nothing is written.
 */
export function claimJob(db: Database.Database, job: string, adopt = true): void {
  const get = db.prepare(GET_META_SQL).pluck();
  const set = db.prepare(SET_META_SQL);
  db.transaction(() => {
    if (checkJob(get.get(JOB_KEY) as string | undefined, job) !== 'adopt') return;
    if (!adopt) throw new LedgerNotOwnedYet();
    set.run(JOB_KEY, job);
  }).immediate();
}

/**
 * Before the migrations: a ledger (of an older schema) that records another job's name is
 * refused as claimJob refuses it, but unchanged. Migrated first, as PostgreSQL's assertJob
 * prevents, a second job pointed at it by mistake on a newer cronsafe upgraded it before it
 * was refused (78), and the owner's runs, on the cronsafe it had, then failed every start
 * with "newer than this cronsafe knows".
 */
export function refuseAnotherJob(db: Database.Database, job: string): void {
  const meta = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'`).get();
  if (meta === undefined) return;
  const recorded = db.prepare(GET_META_SQL).pluck().get(JOB_KEY) as string | undefined;
  if (recorded !== undefined && recorded !== job) throw new LedgerOwnedByAnotherJob(recorded, job);
}
