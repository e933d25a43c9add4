/**
 * An idle `cronsafe daemon` on PostgreSQL whose own read of the last run waits on the store
 * (its `runs` table locked by VACUUM FULL or an operator's LOCK TABLE; an outage within its
 * 30 s of retries) ignored SIGTERM while it waited: no pass was going, yet it exited only
 * at the drain's last resort, 30 s later with the default drain, with exit 75 and "the drain
 * did not end within drain.gracePeriodSeconds (a ledger write is blocked ...)". A stop now
 * ends the idle daemon at once, exit 0, `daemon stopped`.
 */
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe daemon stopped while its own read waits on PostgreSQL', () => {
  const db = usePostgresDatabase('daemon_stop_reading');

  it('ends at once with exit 0, not at the drain\'s last resort', async () => {
    // A yearly occurrence long past: one pass at start, then only the daemon's reads, every second.
    const ws = workspace({
      handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
      state: { postgres: db.url },
      schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
      daemon: { tickSeconds: 1 },
    });
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    const watcher = new pg.Client({ connectionString: db.url });
    await watcher.connect();
    try {
      await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE cronsafe.runs IN ACCESS EXCLUSIVE MODE');
      const waiting = async () =>
        (await watcher.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'cronsafe%' AND wait_event_type = 'Lock'`)).rows[0]?.n ?? 0;
      await until(async () => (await waiting()) > 0, "the daemon's read to wait for the lock");
      const signalled = Date.now();
      daemon.child.kill('SIGTERM');
      const exit = await daemon.exited;
      expect(exit.code, daemon.stderr()).toBe(0);
      expect(Date.now() - signalled).toBeLessThan(5_000);
      expect(daemon.stderr()).not.toContain('the drain did not end');
      expect(daemon.lines.at(-1)).toMatchObject({ msg: 'daemon stopped', result: 'stopped' });
    } finally {
      daemon.child.kill('SIGKILL');
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
      await watcher.end();
    }
  }, 90_000);
});
