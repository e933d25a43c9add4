import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Ledger } from '../../src/ledger/types.js';

/**
 * `cronsafe requeue --all` while a run is writing behind (src/ledger/sqlite/write-behind.ts).
 * The command takes its clock once (commands/requeue.ts, byFilter: `const now = Date.now()`),
 * then each page catches up the live run's journal and requeues what it finds done. A start
 * and success journalled after that clock reading are caught up as done, requeued with the
 * older time, and then the run's own flush (or the next run's replay) applies the same
 * records again: their guard `updated_at <= start time` holds, so the requeue is undone.
 * Found through the CLI: `requeue --all` six times during a 30,000-item run of a no-op
 * module handler left 20 to 376 items done that never ran again (items_done that much
 * above the handler's invocations), on main and on the build before today's hot-path
 * changes (9312dc0) alike.
 */
const T0 = 1_700_000_000_000;
const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-rq-live-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const owner = 'host:1:run-live';
const none = { complete: [], fail: [], release: [], gone: [] };
const DONE = { states: ['done'] as const };

/** What `cronsafe requeue --all` does, with the clock it read before its first catch-up. */
async function requeueAll(ledger: Ledger, now: number): Promise<string[]> {
  const moved: string[] = [];
  for await (const page of ledger.finishedPages(DONE)) moved.push(...(await ledger.requeue(page.map((i) => i.id), DONE, now)));
  return moved;
}

/** `a` succeeds and `b` starts: a's success is in the run's start journal, not yet in the ledger. */
async function succeedWhileJournalled(run: Ledger): Promise<void> {
  await run.discover(['a', 'b'].map((id) => ({ id })), { runId: owner, now: T0 });
  const opts = { owner, runId: owner, now: T0, leaseMs: 90_000 };
  const { claims } = await run.settle(none, T0, { ids: ['a'], opts });
  await run.settle({ ...none, complete: claims }, T0 + 5, { ids: ['b'], opts: { ...opts, now: T0 + 5 } });
}

describe('requeue while a run writes behind', () => {
  it('a success the requeue caught up from the journal stays requeued: the run\'s flush neither redoes it nor counts it again', async () => {
    const file = path.join(root, `t${++n}`, 'job.db');
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover(['a', 'b'].map((id) => ({ id })), { runId: owner, now: T0 });
      // `cronsafe requeue --all` starts: it reads the clock.
      const requeueNow = T0 + 10;
      // Meanwhile the run starts a, which succeeds: both only in the journal so far.
      const opts = { owner, runId: owner, now: T0 + 20, leaseMs: 90_000 };
      const { claims } = await run.settle(none, T0 + 20, { ids: ['a'], opts });
      await run.settle({ ...none, complete: claims }, T0 + 25, { ids: ['b'], opts: { ...opts, now: T0 + 25 } });

      const other = await openSqliteLedger(file, {});
      try {
        expect(await requeueAll(other, requeueNow)).toEqual(['a']);
        // What `status` shows right after the requeue (it reads through the journal).
        expect(await other.get('a')).toMatchObject({ state: 'pending', attempts: 0 });
      } finally {
        await other.close();
      }
      // The run flushes (every read flushes first).
      expect(await run.get('a')).toMatchObject({ state: 'pending', attempts: 0 });
      const totals = await run.totals();
      // a ran once: one success, one requeue.
      expect({ done: totals.itemsDone, requeued: totals.requeued }).toEqual({ done: 1, requeued: 1 });
    } finally {
      await run.close();
    }
  });

  it('another writer\'s catch-up (a requeue of nothing) is no fenced attempt: the run\'s flush of the same records counts none', async () => {
    // cronsafe_items_processed_total{result="fenced"} means a result was rejected because its
    // claim had moved on. Here nothing was rejected: the run's own success was written
    // first by the other writer's catch-up, and the run's flush finds it done already.
    // Through the CLI: `requeue --all` after each of 4 SIGKILLs of a 15,000-item run left
    // items_fenced at 3,136 with no attempt ever fenced.
    const file = path.join(root, `t${++n}`, 'job.db');
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await succeedWhileJournalled(run);
      const other = await openSqliteLedger(file, {});
      try {
        expect(await other.requeue(['nothing'], DONE, T0 + 10)).toEqual([]);
      } finally {
        await other.close();
      }
      expect(await run.attemptTotals()).toMatchObject({ succeeded: 1, fenced: 0 });
    } finally {
      await run.close();
    }
  });

  it('a success caught up and then requeued is no fenced attempt: later catch-ups and the run\'s flush skip it', async () => {
    // The success is in the ledger (the catch-up wrote it) and the operator moved the item on
    // since: its record is history, as the journal view reads it, not a result the ledger
    // rejected. Through the CLI: `requeue --all` and `dead-letter retry --all` 25 times each
    // during a 20,000-item run (no failure, no stale-claim line, `fenced: 0` in `run finished`)
    // left items_fenced at 15,231: every later command's catch-up counted each such record again.
    const file = path.join(root, `t${++n}`, 'job.db');
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await succeedWhileJournalled(run);
      const other = await openSqliteLedger(file, {});
      try {
        expect(await requeueAll(other, T0 + 10)).toEqual(['a']);
        // Two more operator commands, each catching up the same journal first.
        expect(await other.requeue(['nothing'], DONE, T0 + 20)).toEqual([]);
        expect(await other.retryDead('all', T0 + 30)).toBe(0);
        expect(await other.attemptTotals()).toMatchObject({ succeeded: 1, fenced: 0 });
      } finally {
        await other.close();
      }
      expect(await run.get('a')).toMatchObject({ state: 'pending', attempts: 0 });
      expect(await run.attemptTotals()).toMatchObject({ succeeded: 1, fenced: 0 });
    } finally {
      await run.close();
    }
  });

  it('a success recorded at an earlier wall-clock time than its start (the clock set back) is still written', async () => {
    const file = path.join(root, `t${++n}`, 'job.db');
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover(['a', 'b'].map((id) => ({ id })), { runId: owner, now: T0 });
      const opts = { owner, runId: owner, now: T0 + 100, leaseMs: 90_000 };
      const { claims } = await run.settle(none, T0 + 100, { ids: ['a'], opts });
      // The start is written (a read flushes): the row's updated_at is the start's time.
      expect(await run.get('a')).toMatchObject({ state: 'claimed', attempts: 1 });
      await run.settle({ ...none, complete: claims }, T0 + 50, { ids: ['b'], opts: { ...opts, now: T0 + 50 } });
      expect(await run.get('a')).toMatchObject({ state: 'done', attempts: 1 });
      expect(await run.attemptTotals()).toMatchObject({ succeeded: 1, fenced: 0 });
    } finally {
      await run.close();
    }
  });
});
