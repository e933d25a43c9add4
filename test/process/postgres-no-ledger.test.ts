/**
 * A job that never ran on a PostgreSQL ledger (its schema does not exist yet): the commands
 * that only look (plan, schedule) must answer as they do on SQLite before the first run
 * (plan: every item is new; schedule: no last run) and create nothing: no schema, no
 * tables, no owner recorded. Before, plan exited 1 and schedule created the whole ledger,
 * with this config's name recorded as its owner.
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, psql, usePostgresDatabase } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('plan and schedule on a PostgreSQL ledger that no run has created', () => {
  const pg = usePostgresDatabase('noledger');

  const schemaExists = (schema: string) => psql(pg.server, `SELECT count(*) FROM pg_namespace WHERE nspname = '${schema}'`, 'noledger').trim();

  it('plan: every item is new, exit 0, nothing created', async () => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: pg.url, schema: 'fresh_plan' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const r = await runCli(['plan', '-c', ws.configPath, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ledger: 'none', wouldAttempt: 2, new: { count: 2 } });
    expect(schemaExists('fresh_plan')).toBe('0');
  }, 60_000);

  it('schedule --json: no last run, exit 0, nothing created', async () => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: pg.url, schema: 'fresh_schedule' }, schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London' } }, { 'a.txt': 'a' });
    const r = await runCli(['schedule', '--json', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ job: 'test-job', lastRunStartedAt: null });
    expect(schemaExists('fresh_schedule')).toBe('0');
  }, 60_000);
});
