/**
 * `cronsafe schedule` of a newer cronsafe (an operator's machine upgraded first, a rollout
 * half-way) on a PostgreSQL ledger of an older schema: it migrated the schema, and the job's
 * pods, still on the older cronsafe, were refused at their next start ("newer than this
 * cronsafe knows", exit 1) until they were upgraded. It now reads the last run's start as it
 * is (the runs table is the same since the first schema) and changes nothing; another job's
 * older ledger is still refused (78), unchanged.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execOn } from '../../src/ledger/postgres/connection.js';
import { migrate } from '../../src/ledger/postgres/migrate.js';
import { MIGRATIONS } from '../../src/ledger/postgres/migrations/index.js';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const KNOWN = Math.max(...MIGRATIONS.map((m) => m.version));
const STARTED = Date.parse('2026-12-01T10:00:00.000Z');

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: schedule on a ledger of an older schema', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** A database whose schema `qc` an older cronsafe left at `version`, `job` recorded when given, with one run. */
  async function olderLedger(name: string, version: number, job?: string): Promise<string> {
    const url = await server.createDatabase(name);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query('BEGIN');
      await migrate(execOn(c), 'qc', MIGRATIONS.filter((m) => m.version <= version));
      await c.query('COMMIT');
      if (job !== undefined) await c.query(`INSERT INTO qc.meta (key, value) VALUES ('job', $1)`, [job]);
      await c.query(`INSERT INTO qc.runs (run_id, owner, started_at) VALUES ('old-run', 'host:1:old-run', $1)`, [STARTED]);
    } finally {
      await c.end();
    }
    return url;
  }

  const versionOf = async (db: string) => server.admin<{ v: number }>(`SELECT max(version) AS v FROM qc.schema_migrations`, [], db);

  it.each([
    ['its own job recorded', 'own', KNOWN - 1, 'test-job'],
    ['no job recorded (from before job names)', 'unnamed', 1, undefined],
  ])('%s: reads the last run, migrates nothing (before: migrated to the latest schema)', async (_what, db, version, job) => {
    const url = await olderLedger(db, version, job);
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: url, schema: 'qc' }, schedule: { cron: '*/5 * * * *', timeZone: 'UTC' } });
    const r = await runCli(['schedule', '--json', '--at', '2026-12-01T10:02:00Z', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ job: 'test-job', lastRunStartedAt: '2026-12-01T10:00:00.000Z' });
    expect(await versionOf(db)).toEqual([{ v: version }]);
  }, 60_000);

  it("another job's: refused (78), nothing changed", async () => {
    const url = await olderLedger('other', KNOWN - 1, 'alpha');
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: url, schema: 'qc' }, schedule: { cron: '*/5 * * * *', timeZone: 'UTC' } });
    const r = await runCli(['schedule', '--json', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('"alpha"');
    expect(await versionOf('other')).toEqual([{ v: KNOWN - 1 }]);
  }, 60_000);
});
