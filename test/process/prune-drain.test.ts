import { mkdirSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { finished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

const DAY = 24 * 3600 * 1000;

const pendingLeft = (file: string): number => {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(`SELECT count(*) FROM items WHERE state = 'pending'`).pluck().get() as number;
  } finally {
    db.close();
  }
};

describe('retention pruning and a SIGTERM', () => {
  it('a SIGTERM during a long prune (200,000 items to forget) stops it between two steps, promptly', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    mkdirSync(ws.source, { recursive: true });
    // The ledger, made by a first run; then 200,000 done items whose files went 40 days ago.
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const db = new Database(ws.db);
    const t = Date.now() - 40 * DAY;
    db.prepare(`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 200000)
      INSERT INTO items (id, state, attempts, available_at, first_seen_at, updated_at, done_at, missing_since)
      SELECT 'gone-' || x, 'done', 1, ?, ?, ?, ?, ? FROM n`).run(t - DAY, t - DAY, t - DAY, t - DAY, t);
    db.close();

    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await run.waitFor((l) => l.msg === 'retention: pruning', 60_000);
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0); // the pass itself had completed
    expect(finished(run)?.outcome).toBe('completed');
    const pruned = run.lines.find((l) => l.msg === 'retention: pruned the ledger')?.pruned as { forgotten: number; stopped: boolean } | undefined;
    // Stopped after a few 1,000-row steps, not after all 200 of them.
    expect(pruned?.stopped).toBe(true);
    expect(pruned?.forgotten ?? 0).toBeLessThan(200_000);
  }, 180_000);

  it('a SIGTERM while a complete scan forgets 200,000 pending items whose files are gone stops it between two steps', async () => {
    // Before, one DELETE forgot them all in one transaction: the run heard the SIGTERM only
    // after it (a million items: 45 s, past the pod's grace period) and held the ledger's
    // write lock all along (`cronsafe dead-letter retry` failed: database is locked).
    const ws = workspace({ handler: { command: ['true'] } }, { 'still-here': 'x' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const db = new Database(ws.db);
    const t = Date.now() - DAY;
    db.prepare(`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 200000)
      INSERT INTO items (id, state, available_at, seen_run, first_seen_at, updated_at)
      SELECT 'gone-' || x, 'pending', ?, 'an-earlier-run', ?, ? FROM n`).run(t, t, t);
    db.close();

    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    // The readiness signal: the first forgotten rows are visible to another connection.
    await until(() => pendingLeft(ws.db) < 200_000, 'the run to start forgetting', 90_000);
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0); // the scan was complete: nothing of it is left to do
    const forgot = run.lines.find((l) => l.msg?.startsWith('forgot pending items whose files are gone'));
    expect(forgot?.stopped, JSON.stringify(forgot)).toBe(true);
    expect(forgot?.items).toBeLessThan(200_000);
    const left = pendingLeft(ws.db);
    expect(left).toBeGreaterThan(0);
    expect(left + (forgot?.items as number)).toBe(200_000);

    // The next complete scan forgets the rest.
    const next = await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    expect(next.code, next.stderr).toBe(0);
    expect(finished(next)?.items).toMatchObject({ pending: 0, done: 1 });
  }, 300_000);
});
