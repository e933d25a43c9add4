/**
 * A failure's or a hand-back's answer lost: the connection drops after the write committed,
 * before its answer arrives. The executor runs the write again (a transient error), and the
 * retry found the rows no longer claimed (a failed or handed-back row keeps no owner): it
 * reported them as fenced ("stale claim: write rejected by the ledger (another owner holds
 * this item now)"), the pass's counts said fenced for items that had failed or been handed
 * back, and items_fenced went up, what an operator reads as two pods fighting over an item.
 * The first try's write is the outcome: applied, counted once, never as fenced. (The same
 * for a completion: postgres-lost-completion-answer.test.ts.)
 *
 * The lost answer is made certain by a TCP proxy in front of the server that, once armed,
 * forwards the next failure's COMMIT (or the next hand-back statement), waits for the
 * server's whole answer (up to ReadyForQuery: it has committed) and drops it, cutting the
 * connection.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { finished, spawnCli, workspace, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase, writeGatedJob } from '../helpers/postgres.js';
import { answerDropper, type AnswerDropper, type ProxiedConnection } from '../helpers/relay.js';
import { until } from '../helpers/wait.js';

let proxy: AnswerDropper | undefined;
let run: Running | undefined;
afterEach(async () => {
  if (run?.child.exitCode === null) run.child.kill('SIGKILL');
  run = undefined;
  await proxy?.close();
  proxy = undefined;
});

/** A job whose handler waits for `go` (then runs `then`), its items a, b, c. */
function gatedJob(url: string, then: string): { ws: ReturnType<typeof workspace>; started: string; go: string } {
  const ws = workspace({}, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
  return { ws, ...writeGatedJob(ws, url, [], { then, drain: 'drain: {gracePeriodSeconds: 8, marginSeconds: 4}' }) };
}

describe.skipIf(PG_SKIP_REASON !== undefined)("PostgreSQL: the answer to a committed failure or hand-back lost to a connection cut", () => {
  const pg = usePostgresDatabase('lostfail');

  const counters = () =>
    pg.server.admin<{ name: string; value: string }>(
      `SELECT split_part(name, ':', 1) AS name, sum(value)::text AS value FROM cronsafe.counters
WHERE name LIKE 'items_failed%' OR name LIKE 'items_released%' OR name LIKE 'items_gone%' OR name LIKE 'items_fenced%' GROUP BY 1 ORDER BY 1`,
      [],
      'lostfail',
    );
  const rows = () => pg.server.admin<{ id: string; state: string; attempts: number; released: number }>(`SELECT id, state, attempts, released FROM cronsafe.items ORDER BY id`, [], 'lostfail');

  it('a failure is retried and counts as applied: every item failed once, none fenced, items_failed counted once', async () => {
    await pg.server.admin(`DROP SCHEMA IF EXISTS cronsafe CASCADE`, [], 'lostfail');
    // The failure's transaction: its UPDATE of the decided failures, then its COMMIT.
    const failing = new WeakSet<ProxiedConnection>();
    proxy = await answerDropper(pg.server.port, (text, conn) => {
      if (text.includes('AS u(id, state, available_at, error)')) failing.add(conn);
      return failing.has(conn) && text.includes('COMMIT');
    });
    const { ws, started, go } = gatedJob(pg.url.replace(`:${pg.server.port}/`, `:${proxy.port}/`), 'exit 1');
    run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(started), 'the handlers to start', 30_000);
    proxy.arm();
    writeFileSync(go, '');
    const e = await run.exited;
    expect(proxy.dropped(), "a failure's answer was dropped").toBe(true);
    expect(e.code, run.stderr()).toBe(0);
    expect(run.lines.some((l) => l.msg === 'state store: a transient error; retrying'), run.stderr()).toBe(true);
    expect(run.lines.filter((l) => l.msg.startsWith('stale claim')).map((l) => l.reason)).toEqual([]);
    expect(run.lines.filter((l) => l.msg === 'item failed; will retry').map((l) => l.itemId).sort()).toEqual(['a.txt', 'b.txt', 'c.txt']);
    expect(finished(run)).toMatchObject({ outcome: 'completed', counts: { failed: 3, fenced: 0 } });
    expect(await rows()).toEqual(['a.txt', 'b.txt', 'c.txt'].map((id) => ({ id, state: 'pending', attempts: 1, released: 0 })));
    expect(await counters()).toEqual([{ name: 'items_failed', value: '3' }]);
  }, 120_000);

  it('a drain\'s hand-back is retried and counts as applied: every item handed back once, none fenced, items_released counted once', async () => {
    await pg.server.admin(`DROP SCHEMA IF EXISTS cronsafe CASCADE`, [], 'lostfail');
    proxy = await answerDropper(pg.server.port, (text) => text.includes('released = i.released + 1'));
    const { ws, started } = gatedJob(pg.url.replace(`:${pg.server.port}/`, `:${proxy.port}/`), 'exit 0');
    run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(started), 'the handlers to start', 30_000);
    await until(async () => (await rows()).filter((r) => r.state === 'claimed').length === 3, 'the three claims', 30_000);
    proxy.arm();
    run.child.kill('SIGTERM');
    const e = await run.exited;
    expect(proxy.dropped(), "a hand-back's answer was dropped").toBe(true);
    expect(e.code, run.stderr()).toBe(75);
    expect(run.lines.some((l) => l.msg === 'state store: a transient error; retrying'), run.stderr()).toBe(true);
    expect(run.lines.filter((l) => l.msg.startsWith('stale claim')).map((l) => l.reason)).toEqual([]);
    expect(finished(run)).toMatchObject({ counts: { released: 3, fenced: 0 } });
    // Said once each, once written.
    expect(run.lines.filter((l) => /claim handed back \(attempt not charged\)/.test(l.msg)).map((l) => l.itemId).sort()).toEqual(['a.txt', 'b.txt', 'c.txt']);
    expect(await rows()).toEqual(['a.txt', 'b.txt', 'c.txt'].map((id) => ({ id, state: 'pending', attempts: 1, released: 1 })));
    expect(await counters()).toEqual([{ name: 'items_released', value: '3' }]);
  }, 120_000);

  it("an item gone (its file deleted during its attempt) is forgotten once, its retry finding the row gone: none fenced, items_gone counted once", async () => {
    await pg.server.admin(`DROP SCHEMA IF EXISTS cronsafe CASCADE`, [], 'lostfail');
    proxy = await answerDropper(pg.server.port, (text) => text.includes('DELETE FROM') && text.includes('USING unnest('));
    const { ws, started, go } = gatedJob(pg.url.replace(`:${pg.server.port}/`, `:${proxy.port}/`), 'rm -f \\"$CRONSAFE_ITEM_PATH\\"; exit 1');
    run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(started), 'the handlers to start', 30_000);
    proxy.arm();
    writeFileSync(go, '');
    const e = await run.exited;
    expect(proxy.dropped(), "a forget's answer was dropped").toBe(true);
    expect(e.code, run.stderr()).toBe(0);
    expect(run.lines.some((l) => l.msg === 'state store: a transient error; retrying'), run.stderr()).toBe(true);
    expect(run.lines.filter((l) => l.msg.startsWith('stale claim')).map((l) => l.reason)).toEqual([]);
    expect(run.lines.filter((l) => l.msg.startsWith('item gone')).map((l) => l.itemId).sort()).toEqual(['a.txt', 'b.txt', 'c.txt']);
    expect(finished(run)).toMatchObject({ outcome: 'completed', counts: { gone: 3, fenced: 0 } });
    expect(await rows()).toEqual([]);
    expect(await counters()).toEqual([{ name: 'items_gone', value: '3' }]);
  }, 120_000);
});
