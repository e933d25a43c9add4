import { JOB_KEY, SOURCE_KEY } from '../identity.js';
import { readSchedule, replacesSchedule, SCHEDULE_KEY, scheduleValue, type ScheduleRecord } from '../schedule-record.js';
import type { Exec } from './connection.js';
import { ident, q, type Query } from './query.js';

export const getMetaQuery = (schema: string, key: string): Query => q(`SELECT value FROM ${ident(schema)}.meta WHERE key = $1`, key);

/**
 * Ledger.recordStopRequested: one `meta` row per pod told to stop (its owner after the
 * prefix), kept while it holds claims; the reclaim that takes them back hands them back
 * uncharged and removes the rows of owners left with none (recover.ts).
 */
export const STOP_KEY_PREFIX = 'stop-requested:';
export const recordStopQuery = (schema: string, owner: string, now: number): Query =>
  q(`INSERT INTO ${ident(schema)}.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, STOP_KEY_PREFIX + owner, String(now));

/** Inserts unless a row exists; a concurrent adopter's row wins (the caller reads it back). */
export const adoptMetaQuery = (schema: string, key: string, value: string): Query =>
  q(`INSERT INTO ${ident(schema)}.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, value);

/**
 * Ledger.recordSource in one statement: the row changes only when the directory differs,
 * and then returns the one before (no row: the first record, or the same directory).
 */
export const recordSourceQuery = (schema: string, directory: string): Query => {
  const meta = `${ident(schema)}.meta`;
  return q(
    `WITH before AS (SELECT value FROM ${meta} WHERE key = $1)
INSERT INTO ${meta} AS m (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE m.value IS DISTINCT FROM excluded.value
RETURNING (SELECT value FROM before) AS before`,
    SOURCE_KEY,
    directory,
  );
};

const upsertMetaQuery = (schema: string, key: string, value: string): Query =>
  q(`INSERT INTO ${ident(schema)}.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value);

/** Ledger.recordSchedule: read, and replaced only when it names another expression or zone. */
export async function recordSchedule(exec: Exec, schema: string, schedule: ScheduleRecord): Promise<ScheduleRecord | null> {
  const before = readSchedule((await exec<{ value: string }>(getMetaQuery(schema, SCHEDULE_KEY)))[0]?.value);
  if (replacesSchedule(before, schedule)) await exec(upsertMetaQuery(schema, SCHEDULE_KEY, scheduleValue(schedule)));
  return before;
}

/**
 * The schema's owning job, recording `job` first when none is. The common case is one
 * read; adopting reads back what won, so two jobs adopting at once agree on the owner.
 * The caller compares (outside the executor, which rewraps what a transaction throws).
 */
export async function adoptJob(exec: Exec, schema: string, job: string): Promise<string> {
  const read = async () => (await exec<{ value: string }>(getMetaQuery(schema, JOB_KEY)))[0]?.value;
  const recorded = await read();
  if (recorded !== undefined) return recorded;
  await exec(adoptMetaQuery(schema, JOB_KEY, job));
  return (await read()) ?? job;
}
