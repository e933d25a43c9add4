import { mkdirSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { finished, runCli, spawnCli, workspace } from '../helpers/cli.js';

const DAY = 24 * 3600 * 1000;

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
});
