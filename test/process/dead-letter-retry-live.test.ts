import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Ledger } from '../../src/ledger/types.js';
import { runCli, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, psql, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const N = 300_000;
const RETRY = { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 };

/** The live run: it claims f-1, which the command has retried, and it fails again, its last attempt. */
async function deadAgain(run: Ledger): Promise<void> {
  try {
    const now = Date.now();
    const claims = await run.claim(['f-1'], { owner: 'live', runId: 'live', now, leaseMs: 60_000 });
    expect(claims.map((c) => c.id)).toEqual(['f-1']);
    await run.fail([{ claim: claims[0]!, error: 'boom again' }], { now, retry: RETRY });
  } finally {
    await run.close();
  }
}

/**
 * `dead-letter retry --all` pages through the dead items while a run goes on. An item it
 * moved, which the run then claimed and dead-lettered again (its fault not fixed yet), is
 * a dead item of after the command began: the command's later pages must not retry it a
 * second time (a second full retry budget, its attempts reset again, for one retry).
 */
describe('dead-letter retry --all beside a live run (real SQLite ledger)', () => {
  it('retries each item dead when it began once: one the run dead-letters again meanwhile stays dead', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const t = Date.now() - 3600_000;
    const raw = new Database(ws.db);
    raw
      .prepare(
        `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ${N})
        INSERT INTO items (id, state, attempts, available_at, first_seen_at, updated_at, dead_at, last_error)
        SELECT 'f-' || x, 'dead', 1, ?, ?, ?, ? + x, 'boom' FROM n`,
      )
      .run(t, t, t, t);
    raw.close();
    const requeued = (): number => {
      const db = new Database(ws.db, { readonly: true, fileMustExist: true });
      try {
        return (db.prepare(`SELECT value FROM counters WHERE name = 'items_requeued'`).get() as { value: number } | undefined)?.value ?? 0;
      } finally {
        db.close();
      }
    };

    const cmd = spawnCli(['dead-letter', 'retry', '--all', '-c', ws.configPath], { timeoutMs: 120_000 });
    // The oldest dead item is on the first page.
    await until(() => requeued() > 0, 'the first page retried', 60_000);
    // The live run: claims it and it fails again, its last attempt.
    await deadAgain(await openSqliteLedger(ws.db));
    // The command still had pages to move after that.
    expect(requeued()).toBeLessThan(N);

    const { code } = await cmd.exited;
    expect(code, cmd.stderr()).toBe(0);
    expect(cmd.stdout()).toBe(`requeued ${N} dead items\n`);
    const db = new Database(ws.db, { readonly: true, fileMustExist: true });
    try {
      expect(db.prepare(`SELECT state, attempts, last_error AS lastError FROM items WHERE id = 'f-1'`).get()).toEqual({ state: 'dead', attempts: 1, lastError: 'boom again' });
      expect(db.prepare(`SELECT count(*) AS n FROM items WHERE state = 'pending' AND id LIKE 'f-%'`).get()).toEqual({ n: N - 1 });
    } finally {
      db.close();
    }
  }, 120_000);
});

describe.skipIf(PG_SKIP_REASON !== undefined)('dead-letter retry --all beside a live pass on PostgreSQL (real server)', () => {
  const pg = usePostgresDatabase('retrylive', 60_000);

  it('retries each item dead when it began once: one the pass dead-letters again meanwhile stays dead', async () => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: pg.url, schema: 'rl' } });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const t = Date.now() - 3600_000;
    const db = new URL(pg.url).pathname.slice(1);
    psql(
      pg.server,
      `INSERT INTO rl.items (id, state, attempts, available_at, first_seen_at, updated_at, dead_at, last_error)
       SELECT 'f-' || x, 'dead', 1, ${t}, ${t}, ${t}, ${t} + x, 'boom' FROM generate_series(1, ${N}) x; ANALYZE rl.items`,
      db,
    );
    const pending = () => Number(psql(pg.server, `SELECT count(*) FROM rl.items WHERE state = 'pending'`, db).trim());

    const cmd = spawnCli(['dead-letter', 'retry', '--all', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => pending() > 0, 'the first page retried', 60_000);
    await deadAgain(await openPostgresLedger({ url: pg.url, schema: 'rl' }));
    expect(pending()).toBeLessThan(N - 1);

    const { code } = await cmd.exited;
    expect(code, cmd.stderr()).toBe(0);
    expect(cmd.stdout()).toBe(`requeued ${N} dead items\n`);
    expect(psql(pg.server, `SELECT state || ' ' || attempts || ' ' || last_error FROM rl.items WHERE id = 'f-1'`, db).trim()).toBe('dead 1 boom again');
    expect(pending()).toBe(N - 1);
  }, 120_000);
});
