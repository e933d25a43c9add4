/**
 * docs/operations.md, "Drains": the first SIGTERM stops a run also during its start-up. A
 * start on PostgreSQL waits for the migration's advisory lock while another pod migrates the
 * ledger (an upgrade's index build over a large items table takes minutes). SIGTERMed there,
 * with the default drain, it waited until the drain's last resort (29.75 s of a 30 s grace)
 * for a pod that had nothing in flight, and its session stayed queued on the server after
 * the exit, holding a connection until the migration was over. It now stops at once: exit
 * 75, nothing claimed, the session gone. Real processes, a real server.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const SCHEMA = 'stopmig';

describe.skipIf(PG_SKIP_REASON !== undefined)('a SIGTERM while the start waits for another pod to migrate the ledger', () => {
  const db = usePostgresDatabase('stopmig');
  let holder: pg.Client | undefined;
  afterEach(async () => {
    await holder?.end().catch(() => undefined);
    holder = undefined;
  });

  const lockSessions = async (): Promise<{ state: string; wait: string | null }[]> =>
    db.server.admin<{ state: string; wait: string | null }>(
      `SELECT state, wait_event_type AS wait FROM pg_stat_activity WHERE datname = 'stopmig' AND application_name = 'cronsafe-lock'`,
    );

  it('stops at once (exit 75, nothing claimed), leaves no session on the server, and the next run does every item once', async () => {
    // The other pod's migration: its transaction holds the lock that migrations take.
    holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT pg_advisory_xact_lock(hashtext('cronsafe:migrate'), hashtext($1))`, [SCHEMA]);

    const ws = workspace(
      { handler: { command: ['/bin/sh', '-c', 'cp "$1" "$2"', 'copy', '{path}', '{output}'] }, state: { postgres: db.url, schema: SCHEMA } },
      { 'a.txt': 'a', 'b.txt': 'b' },
    );
    // drain: the defaults users get (gracePeriodSeconds 30, marginSeconds 5).
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
    await until(async () => (await lockSessions()).some((s) => s.wait === 'Lock'), 'the start to wait for the migration lock', 30_000);
    const stoppedAt = Date.now();
    run.child.kill('SIGTERM');
    const { code, signal } = await run.exited;
    const took = Date.now() - stoppedAt;
    const stderr = run.stderr();
    expect({ code, signal }, stderr).toEqual({ code: 75, signal: null });
    expect(took, `exit ${took} ms after the SIGTERM; stderr: ${stderr}`).toBeLessThan(10_000);
    expect(stderr).toContain('stopped by SIGTERM before the run lock was taken');
    expect(stderr).toContain('waited for the ledger to be migrated');
    expect(stderr).toContain('nothing was claimed');
    expect(run.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'drained', exitCode: 75 });
    // The server hears the hang-up while the statement waits (client_connection_check_interval, 1 s).
    await until(async () => (await lockSessions()).length === 0, 'the stopped start to leave no session on the server', 10_000);

    // The other pod's migration ends without migrating (rolled back): the next start migrates.
    await holder.query('ROLLBACK');
    const next = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 90_000 });
    const done = await next.exited;
    expect(done.code, next.stderr()).toBe(0);
    const items = await db.server.admin<{ id: string; state: string; attempts: number }>(`SELECT id, state, attempts FROM ${SCHEMA}.items ORDER BY id`, [], 'stopmig');
    expect(items).toEqual([
      { id: 'a.txt', state: 'done', attempts: 1 },
      { id: 'b.txt', state: 'done', attempts: 1 },
    ]);
  }, 120_000);
});
