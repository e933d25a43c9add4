/**
 * DESIGN 3: an attempt is counted when its handler starts. On PostgreSQL a claim is a round
 * trip; a SIGTERM that came while one was being written handed its claims back unstarted,
 * each with an attempt counted (attempts 1, released 1) that no handler ever made: after a
 * few drains, `attempts` and CRONSAFE_ATTEMPT were ahead of the handler's own starts. Such
 * a claim is now undone. The claim is held in flight here by an operator's table lock
 * (the readiness signal: the run's claim waiting on it in pg_stat_activity), the SIGTERM
 * lands while it waits, and the lock is released once the drain began. Default settings.
 */
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { invocations } from '../helpers/proc.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const LOGGED_COPY = path.join(FIXTURES, 'process/logged-copy.sh');

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a SIGTERM while a claim is being written', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('counts no attempt for the claims it hands back unstarted: attempts equal the handler starts', async () => {
    const db = 'claimstop';
    const url = await server.createDatabase(db);
    const files = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`item-${String(i).padStart(2, '0')}`, `payload ${i}\n`]));
    const ws = workspace({ state: { postgres: url }, log: { level: 'info' } }, files);
    const log = path.join(ws.dir, 'invocations.log');
    configure(ws, { handler: { command: ['/bin/sh', LOGGED_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, DELAY: '0.1' } } });
    const ids = Object.keys(files);

    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => invocations(log).size >= 8, 'the run to start 8 items', 60_000);
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE cronsafe.items IN EXCLUSIVE MODE');
      // The run's next claim (completions and new claims, one statement) waits for the lock.
      await until(
        async () =>
          (
            await server.admin<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE '%state = ''claimed''%'`,
              [db],
            )
          )[0]!.n > 0,
        "the run's claim to wait for the lock",
        30_000,
      );
      run.child.kill('SIGTERM');
      await run.waitFor((l) => l.msg === 'drain: stopped claiming; in-flight items may finish', 30_000);
      await locker.query('ROLLBACK');
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
    const exit = await run.exited;
    expect(exit.code, run.stderr()).toBe(75);

    const startsAtDrain = invocations(log);
    const rows = await server.admin<{ id: string; attempts: number; released: number; state: string }>(
      `SELECT id, attempts, released, state FROM cronsafe.items ORDER BY id`,
      [],
      db,
    );
    expect(rows.filter((r) => r.state === 'claimed')).toEqual([]);
    // Every counted attempt is a handler start: none for the claims the stop met in flight.
    expect(rows.filter((r) => r.attempts !== (startsAtDrain.get(r.id) ?? 0))).toEqual([]);
    expect(rows.some((r) => r.state === 'pending')).toBe(true);

    // The next run finishes the rest; each item started exactly as often as it was counted.
    const clean = await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    expect(clean.code, clean.stderr).toBe(0);
    expect(finished(clean)?.outcome).toBe('completed');
    const starts = invocations(log);
    const after = await server.admin<{ id: string; attempts: number; state: string }>(`SELECT id, attempts, state FROM cronsafe.items ORDER BY id`, [], db);
    expect(after.map((r) => r.id)).toEqual(ids);
    expect(after.filter((r) => r.state !== 'done' || r.attempts !== (starts.get(r.id) ?? 0))).toEqual([]);
  }, 120_000);
});
