/**
 * A statement of a pod cancelled on the server (SQLSTATE 57014): an operator's
 * `pg_cancel_backend` of a query seen waiting behind maintenance, or the role's
 * `statement_timeout` running out while it waited for a lock. The statement did not commit,
 * as with a `lock_timeout` (55P03) or `pg_terminate_backend` (57P01), which were retried;
 * this one failed the run at once (exit 1, `run failed: claim ... canceling statement due to
 * user request`): its running attempts were aborted and left claimed, charged again by the
 * run that took them over after their lease (siblings waited that long for them). It is
 * retried like them now, and the pass ends as if nothing happened.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const ITEMS = 6;

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a claim statement cancelled on the server', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('pg_cancel_backend of the claim waiting behind a LOCK TABLE: retried, the run completes, each item charged once', async () => {
    const url = await server.createDatabase('cancel');
    const files = Object.fromEntries(Array.from({ length: ITEMS }, (_, i) => [`item-${i}.txt`, String(i)]));
    const ws = workspace({ handler: { module: 'handler.mjs' }, concurrency: 1, state: { postgres: url, schema: 'cx' }, log: { level: 'info' } }, files);
    const go = path.join(ws.dir, 'go');
    // The first attempt waits for the test to have locked the table; the others run at once.
    writeFileSync(
      path.join(ws.dir, 'handler.mjs'),
      `import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
export default async function (item, ctx) {
  while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20));
  await writeFile(ctx.outputPath, item.id);
}
`,
    );
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await run.waitFor((l) => l.msg === 'run started', 60_000);
    const claimedNow = async () => (await server.admin<{ n: number }>(`SELECT count(*)::int AS n FROM cx.items WHERE state = 'claimed'`, [], 'cancel').catch(() => []))[0]?.n ?? 0;
    await until(async () => (await claimedNow()) === 1, 'the first claim', 60_000);

    // An operator's LOCK TABLE: the claim the pod sends once its slot is free waits for it.
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE cx.items IN SHARE MODE');
      writeFileSync(go, '');
      const waiting = async () =>
        (
          await server.admin<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE datname = 'cancel' AND application_name = 'cronsafe-claims' AND wait_event_type = 'Lock'`,
          )
        ).map((r) => r.pid);
      await until(async () => (await waiting()).length === 1, 'the claim statement to wait for the lock', 30_000);
      // ... and is cancelled, as a DBA cancels a query seen waiting (or a statement_timeout would).
      const [pid] = await waiting();
      expect((await server.admin<{ ok: boolean }>(`SELECT pg_cancel_backend($1) AS ok`, [pid]))[0]?.ok).toBe(true);
      await run.waitFor((l) => /transient error/.test(l.msg) || l.msg === 'run finished', 30_000);
      await locker.query('COMMIT');
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }

    const exit = await run.exited;
    expect(exit.code, run.stderr()).toBe(0);
    expect(run.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'completed', counts: { succeeded: ITEMS } });
    const rows = await server.admin<{ state: string; attempts: number }>(`SELECT state, attempts FROM cx.items ORDER BY id`, [], 'cancel');
    expect(rows).toEqual(Array.from({ length: ITEMS }, () => ({ state: 'done', attempts: 1 })));
  }, 180_000);
});
