/**
 * A migration's DDL waits for its table lock a few hundred ms at a time (migrate-lock.ts):
 * when the lock never comes, the start ends with an error naming the session that holds it
 * (exit 1), where it waited with no bound; and the caller's own lock_timeout is put back once
 * the DDL went through. Real PostgreSQL (test/process/postgres-migrate-lock-queue.test.ts
 * covers the running pass that no longer stalls).
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { execOn } from '../../src/ledger/postgres/connection.js';
import { migrate } from '../../src/ledger/postgres/migrate.js';
import type { LockHolder } from '../../src/ledger/postgres/migrate-lock.js';
import { MIGRATIONS } from '../../src/ledger/postgres/migrations/index.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('a migration that cannot get its lock on items', () => {
  const db = usePostgresDatabase('miglock');

  const client = async (app: string): Promise<pg.Client> => {
    const c = new pg.Client({ connectionString: db.url, application_name: app });
    await c.connect();
    return c;
  };

  it('gives up after its budget naming the holder, rolls back, and goes through once the holder ends, the caller\'s lock_timeout kept', async () => {
    const pod = await client('cronsafe-lock');
    const report = await client('nightly-report');
    try {
      await pod.query('BEGIN');
      await migrate(execOn(pod), 'ml', MIGRATIONS.filter((m) => m.version <= 6));
      await pod.query('COMMIT');
      await report.query('BEGIN');
      await report.query('SELECT * FROM ml.items LIMIT 1');
      const reportPid = (await report.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

      const told: LockHolder[][] = [];
      await pod.query('BEGIN');
      const failed = await migrate(execOn(pod), 'ml', MIGRATIONS, undefined, { budgetMs: 2_000, onBlocked: (h) => told.push(h) }).then(
        () => undefined,
        (err: unknown) => err as Error,
      );
      await pod.query('ROLLBACK');
      expect(failed?.message).toMatch(/^migration 7 \(state-check\) of schema ml gave up after \d+ tries over \d+ s, each waiting 300 ms for its lock on the schema's tables, held by /);
      expect(failed?.message).toContain(`pid ${reportPid} (user postgres, application nightly-report, idle in transaction for `);
      expect(failed?.message).toContain('on items (AccessShareLock): end that session (SELECT pg_terminate_backend(pid))');
      expect(told).toHaveLength(1);
      expect(told[0]).toEqual([expect.objectContaining({ pid: reportPid, application: 'nightly-report', state: 'idle in transaction', table: 'items' })]);
      const versions = async (): Promise<number> => (await pod.query<{ v: number }>('SELECT max(version) AS v FROM ml.schema_migrations')).rows[0]!.v;
      expect(await versions()).toBe(6);

      // The report ends: the next start migrates, its transaction's own lock_timeout intact after the DDL.
      await report.query('COMMIT');
      await pod.query('BEGIN');
      await pod.query(`SET LOCAL lock_timeout = '4s'`);
      expect(await migrate(execOn(pod), 'ml', MIGRATIONS, undefined, { budgetMs: 2_000, onBlocked: (h) => told.push(h) })).toEqual([7]);
      expect((await pod.query<{ t: string }>(`SELECT current_setting('lock_timeout') AS t`)).rows[0]?.t).toBe('4s');
      await pod.query('COMMIT');
      expect(await versions()).toBe(7);
      expect(told).toHaveLength(1);
    } finally {
      await report.end();
      await pod.end();
    }
  }, 60_000);
});
