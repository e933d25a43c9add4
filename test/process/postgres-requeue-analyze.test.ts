/**
 * A pass after `requeue --all` (or `dead-letter retry`, a refresh policy) claims rows that
 * became pending since `items` was last analyzed: the statistics said none was. The claim
 * then read the whole pending index once per offered id: with 100,000 requeued rows each
 * claim took 0.5 to 1.1 s and the pass 44 s instead of 12 (and a DBA's statement_timeout
 * failed it). A pod analyzed `items` only after inserting 1,024 rows; it now counts the
 * claimable rows its discovery finds, inserted or not, and analyzes after the first 256.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const ITEMS = 1100;

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a pass over rows made pending again', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('after requeue --all, the next pass analyzes items before it claims against stale statistics', async () => {
    const url = await server.createDatabase('requeued');
    const files = Object.fromEntries(Array.from({ length: ITEMS }, (_, i) => [`d${i % 10}/f-${i}.txt`, String(i)]));
    const ws = workspace({ handler: { module: 'handler.mjs' }, state: { postgres: url, schema: 'rq' }, log: { level: 'info' } }, files);
    writeFileSync(path.join(ws.dir, 'handler.mjs'), 'export default async function () {}\n');
    const analyzed = async (): Promise<number> => {
      const [row] = await server.admin<{ n: string }>(
        `SELECT analyze_count AS n FROM pg_stat_user_tables WHERE schemaname = 'rq' AND relname = 'items'`,
        [],
        'requeued',
      );
      return Number(row?.n ?? 0);
    };
    /** The server counts an ANALYZE once its session has reported it (at the latest when it ends). */
    const settled = async (atLeast: number): Promise<number> => {
      for (const until = Date.now() + 5_000; Date.now() < until; ) {
        const n = await analyzed();
        if (n >= atLeast) return n;
        await new Promise((r) => setTimeout(r, 100));
      }
      return analyzed();
    };

    const first = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(first.code, first.stderr).toBe(0);
    const before = await settled(1); // the first pass inserted the rows, and analyzed them
    expect(before).toBeGreaterThanOrEqual(1);

    const requeue = await runCli(['requeue', '--all', '-c', ws.configPath]);
    expect(requeue.code, requeue.stderr).toBe(0);
    expect(requeue.stdout).toContain(`requeued ${ITEMS} items`);

    const second = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    expect(second.code, second.stderr).toBe(0);
    expect(second.lines.find((l) => l.msg === 'run finished')).toMatchObject({ counts: { succeeded: ITEMS } });
    expect(await settled(before + 1)).toBeGreaterThan(before);
  }, 60_000);
});
