/**
 * The run's plan of its fire (missed occurrences, a stale or repeated fire) reads the events
 * and runs tables after the run lock is taken. When those reads gave up (the server gone in a
 * failover at that moment, or an operator's lock on `events` past the role's
 * statement_timeout), the PostgreSQL error was not said as the store's: `cronsafe: fatal:` and
 * a stack, and a daemon died of it (exit 1) instead of waiting the outage out.
 */
import { Client } from 'pg';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)("PostgreSQL: the fire's plan cannot read the ledger", () => {
  const pg = usePostgresDatabase('admin');

  it('run: exit 1 naming the store and what it could not do, in one line, not a fatal stack', async () => {
    await pg.server.admin(`CREATE ROLE plan LOGIN`);
    await pg.server.admin(`CREATE DATABASE plan OWNER plan`);
    const url = `postgres://plan@127.0.0.1:${pg.server.port}/plan`;
    const ws = workspace({ handler: { command: ['/bin/cp', '{path}', '{output}'] }, state: { postgres: url, schema: 'st' }, schedule: { cron: '* * * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(first.code, first.stderr).toBe(0);
    // An operator holds `events` (a VACUUM FULL, a LOCK TABLE); the role's statement_timeout
    // cancels each read of it that waits, until the retries give up.
    await pg.server.admin(`ALTER ROLE plan SET statement_timeout = '300ms'`);
    const holder = new Client({ connectionString: `postgres://postgres@127.0.0.1:${pg.server.port}/plan` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE st.events IN ACCESS EXCLUSIVE MODE');
      const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).not.toContain('fatal');
      expect(r.stderr).toMatch(/^cronsafe: .*state store unavailable \(postgres\): plan the fire: /m);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  }, 150_000);
});
