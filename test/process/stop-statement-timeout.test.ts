/**
 * `cronsafe run` on PostgreSQL, SIGTERMed while its writes are cancelled by the role's (or
 * the database's) statement_timeout, a lock held longer than it on the ledger's tables. The
 * server was reached: it cancelled each statement (57014), retried for 30 s, then given up.
 * That is no outage, and a run without the stop fails with it (exit 1). With the stop, the
 * drained-without-the-store path (an outage ending the drain, exit 75) took it for one: the
 * run said `drained`, exit 75, 'cronsafe: drained without the state store'. It fails (1).
 */
import { existsSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase, writeGatedJob } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe run SIGTERMed while statement_timeout cancels its writes', () => {
  const db = usePostgresDatabase('stop_stmt_timeout');

  it('a stop whose drain met statement timeouts (57014), not an outage, fails the run (1), not drained (75)', async () => {
    await db.server.admin(`ALTER DATABASE stop_stmt_timeout SET statement_timeout = '1s'`);
    const ws = workspace({}, { 'a.txt': 'a' });
    const { started, go } = writeGatedJob(ws, db.url);
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 150_000 });
    const locker = new pg.Client({ connectionString: db.url });
    try {
      await run.waitFor((l) => l.msg === 'run started', 30_000);
      await until(() => existsSync(started), 'the handler to start');
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('SET LOCAL statement_timeout = 0');
      await locker.query('LOCK TABLE cronsafe.items IN ACCESS EXCLUSIVE MODE');
      run.child.kill('SIGTERM');
      await run.waitFor((l) => l.msg === 'drain: stopped claiming; in-flight items may finish');
      writeFileSync(go, '');
      const { code } = await run.exited;
      // Under the old code: 75, 'drained without the state store'.
      expect(code, run.stderr()).toBe(1);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end().catch(() => undefined);
      run.child.kill('SIGKILL');
    }
    expect(run.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'failed' });
    expect(run.stderr()).toMatch(/^cronsafe: run failed: .*statement timeout.*\[57014\]/m);
    expect(run.stderr()).not.toContain('drained without the state store');
  }, 180_000);
});
