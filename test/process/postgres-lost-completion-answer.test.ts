/**
 * A completion whose answer is lost: the connection drops after the claim session's
 * complete-and-claim statement committed, before its answer arrives. The executor runs the
 * statement again (a transient error), and the retry found the items done by this very owner
 * and attempt: it reported them as fenced ("stale claim: write rejected by the ledger
 * (another owner holds this item now)"), the pass's counts said fenced for items that were
 * done, and items_fenced went up, what an operator reads as two pods fighting over an item.
 * The first run's write is the completion: applied, counted once as done, never as fenced.
 *
 * The lost answer is made certain by a TCP proxy in front of the server that, once armed,
 * forwards the next completion statement of the run's claim session, waits for the server's
 * whole answer (up to ReadyForQuery: the statement has committed) and drops it, cutting the
 * connection.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { finished, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase, writeGatedJob } from '../helpers/postgres.js';
import { answerDropper, type AnswerDropper } from '../helpers/relay.js';
import { until } from '../helpers/wait.js';

let proxy: AnswerDropper | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: the answer to a committed completion lost to a connection cut', () => {
  const pg = usePostgresDatabase('lostanswer');

  it('is retried and counts as applied: every item succeeded once, none fenced, items_done counted once', async () => {
    // The completion statement of the run's claim session.
    proxy = await answerDropper(pg.server.port, (text, conn) => conn.startup.includes('cronsafe-claims') && text.includes('cronsafe-complete-claim'));
    const url = pg.url.replace(`:${pg.server.port}/`, `:${proxy.port}/`);
    const ws = workspace({}, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    const { started, go } = writeGatedJob(ws, url);
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(started), 'the handlers to start', 30_000);
    proxy.arm();
    writeFileSync(go, '');
    const e = await run.exited;
    expect(proxy.dropped(), "a completion's answer was dropped").toBe(true);
    expect(e.code, run.stderr()).toBe(0);
    expect(run.lines.some((l) => l.msg === 'state store: a transient error; retrying'), run.stderr()).toBe(true);
    expect(run.lines.filter((l) => l.msg.startsWith('stale claim')).map((l) => l.reason)).toEqual([]);
    expect(finished(run)).toMatchObject({ outcome: 'completed', counts: { succeeded: 3, fenced: 0 } });
    const rows = await pg.server.admin<{ id: string; state: string; attempts: number }>(`SELECT id, state, attempts FROM cronsafe.items ORDER BY id`, [], 'lostanswer');
    expect(rows).toEqual(['a.txt', 'b.txt', 'c.txt'].map((id) => ({ id, state: 'done', attempts: 1 })));
    const counters = await pg.server.admin<{ name: string; value: string }>(
      `SELECT split_part(name, ':', 1) AS name, sum(value)::text AS value FROM cronsafe.counters WHERE name LIKE 'items_done%' OR name LIKE 'items_fenced%' GROUP BY 1 ORDER BY 1`,
      [],
      'lostanswer',
    );
    expect(counters).toEqual([{ name: 'items_done', value: '3' }]);
  }, 120_000);
});
