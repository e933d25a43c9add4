/**
 * `cronsafe dead-letter retry --all` on PostgreSQL moves the dead items a page
 * (RETRY_DEAD_PAGE) per transaction and stopped at the first page that moved fewer rows
 * than a page. A page moves fewer than it picked when another session changes one of its
 * rows meanwhile (a colleague's `dead-letter retry ID`, `requeue --include-dead`, a pass's
 * `schedule.refresh: on-change`): the UPDATE waits for that row's lock and then skips it,
 * as it is no longer dead. So every dead item past that page stayed dead, and the command
 * said `requeued 1999 dead items` and exited 0. It now pages on until a page finds fewer
 * than a page to move.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { RETRY_DEAD_PAGE } from '../../src/ledger/dead-pages.js';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe dead-letter retry --all on PostgreSQL beside another command', () => {
  const db = usePostgresDatabase('retry_all_concurrent');

  it('requeues every dead item when another session moved one of its first page meanwhile', async () => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: db.url } });
    const total = RETRY_DEAD_PAGE + 500;
    // Dead items, oldest first by id: the first page is item-00000 .. item-01999.
    const ledger = await openPostgresLedger({ url: db.url, schema: 'cronsafe', job: 'test-job' });
    try {
      const retry = { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 };
      for (let start = 0; start < total; start += 500) {
        const now = Date.UTC(2026, 0, 1) + start;
        const batch = Array.from({ length: 500 }, (_, i) => ({ id: `item-${String(start + i).padStart(5, '0')}` }));
        const ids = await ledger.discover(batch, { runId: 'seed', now });
        const claims = await ledger.claim(ids, { owner: 'seed', runId: 'seed', now, leaseMs: 60_000 });
        await ledger.fail(claims.map((claim) => ({ claim, error: 'exit code 1' })), { now, retry });
      }
      expect(await ledger.counts()).toMatchObject({ dead: total });
    } finally {
      await ledger.close();
    }

    // Another operator's `dead-letter retry item-00001`, its transaction open while ours starts.
    const other = new pg.Client({ connectionString: db.url });
    await other.connect();
    const watcher = new pg.Client({ connectionString: db.url });
    await watcher.connect();
    const retrying = spawnCli(['dead-letter', 'retry', '--all', '-c', ws.configPath], { timeoutMs: 60_000 });
    try {
      await other.query('BEGIN');
      await other.query(`UPDATE cronsafe.items SET state = 'pending', attempts = 0, dead_at = NULL WHERE id = 'item-00001' AND state = 'dead'`);
      const waiting = async () =>
        (await watcher.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'cronsafe%' AND wait_event_type = 'Lock'`)).rows[0]?.n ?? 0;
      await until(async () => (await waiting()) > 0, 'the retry to wait for the row the other session holds');
      await other.query('COMMIT');
      const exit = await retrying.exited;
      expect(exit.code, retrying.stderr()).toBe(0);
      expect(retrying.stdout()).toBe(`requeued ${total - 1} dead items\n`);
      const after = await watcher.query<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM cronsafe.items GROUP BY state`);
      expect(Object.fromEntries(after.rows.map((r) => [r.state, r.n]))).toEqual({ pending: total });
    } finally {
      retrying.child.kill('SIGKILL');
      await other.query('ROLLBACK').catch(() => undefined);
      await other.end();
      await watcher.end();
    }
  }, 90_000);
});
