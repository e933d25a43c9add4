import { describe, expect, it } from 'vitest';
import type { Ledger, RunOutcome } from '../../src/ledger/types.js';
import { claimOpts, discoverAndClaim, items, killItem, T0, type UseLedger } from './ledger-fixtures.js';

const MIN = 60_000;
const DAY = 24 * 3600 * 1000;
const OUTCOMES: RunOutcome[] = ['completed', 'failed', 'drained', 'stale', 'died'];

/** Repeat a bounded step until it does less than `limit`; the sizes of the steps. */
async function steps(step: () => Promise<number>, limit: number): Promise<number[]> {
  const out: number[] = [];
  for (;;) {
    const n = await step();
    out.push(n);
    if (n < limit) return out;
  }
}

/** Walk markMissing on to the end of the items, `limit` rows per step; the total marked. */
async function markAll(ledger: Ledger, passId: string, at: number, limit: number): Promise<number> {
  let marked = 0;
  for (let walks = 0; walks < 1000; walks++) {
    const s = await ledger.markMissing({ passId, scanStartedAt: at, now: at, limit });
    marked += s.marked;
    if (s.wrapped) return marked;
  }
  throw new Error('markMissing never ended its walk');
}

/** A pass at `at` whose scan finds `ids`: discover, then (the runner's) complete the new ones. */
async function pass(ledger: Ledger, passId: string, at: number, ids: string[]): Promise<void> {
  const claims = await discoverAndClaim(ledger, items(...ids), claimOpts({ runId: passId, now: at }));
  if (claims.length > 0) await ledger.complete(claims, at);
}

/** Retention (issue 17): bounded pruning steps that never lower a total. */
export function retentionContract(use: UseLedger): void {
  describe('retention: runs and events', () => {
    it('folds pruned runs into the totals: runStats, lastRunStart and lastOccurrenceRecorded never go back', async () => {
      const l = use();
      // An old run that never finished (its run died unseen): never pruned.
      await l.startRun({ runId: 'open', owner: 'o', startedAt: T0 - MIN });
      for (let i = 0; i < 30; i++) {
        // The oldest run carries the greatest occurrence (a late, manual run would).
        await l.startRun({ runId: `r${i}`, owner: 'o', startedAt: T0 + i * MIN, scheduledFor: i === 0 ? T0 + 1000 * MIN : T0 + i * MIN });
        await l.finishRun(`r${i}`, T0 + i * MIN + 10, OUTCOMES[i % OUTCOMES.length]!, { scanned: i });
      }
      const stats = await l.runStats();
      const last = await l.lastRunStart();
      expect(await l.lastOccurrenceRecorded()).toBe(T0 + 1000 * MIN);

      // Keep 20: r0..r9 go, 7 rows per step.
      expect(await steps(() => l.pruneRuns({ keep: 20, before: 0, limit: 7 }), 7)).toEqual([7, 3]);
      const left = await l.recentRuns(100);
      expect(left.map((r) => r.runId)).toEqual([...Array.from({ length: 20 }, (_, i) => `r${29 - i}`), 'open']);
      expect(await l.runStats()).toEqual(stats);
      expect(await l.lastOccurrenceRecorded()).toBe(T0 + 1000 * MIN);

      // Everything older than the far future, past the newest 20 (status and the failure
      // streak read them, whatever their age): none here; the unfinished one stays too.
      expect(await steps(() => l.pruneRuns({ keep: 1000, before: T0 + 10_000 * MIN, limit: 1000 }), 1000)).toEqual([0]);
      expect((await l.recentRuns(100)).map((r) => r.runId)).toEqual([...Array.from({ length: 20 }, (_, i) => `r${29 - i}`), 'open']);
      expect(await l.runStats()).toEqual(stats);
      expect(await l.lastRunStart()).toEqual(last);
      expect(await l.lastOccurrenceRecorded()).toBe(T0 + 1000 * MIN);

      // New runs add to the folded totals.
      await l.startRun({ runId: 'r30', owner: 'o', startedAt: T0 + 30 * MIN });
      await l.finishRun('r30', T0 + 30 * MIN + 10, 'completed', {});
      const after = await l.runStats();
      expect(after.byOutcome.completed).toBe(stats.byOutcome.completed + 1);
      expect(after.lastSuccessAt).toBe(T0 + 30 * MIN + 10);
      expect(after.firstStartedAt).toBe(stats.firstStartedAt);

      // A newer run pushes the 21st newest out: retention.days deletes it.
      expect(await steps(() => l.pruneRuns({ keep: 1000, before: T0 + 10_000 * MIN, limit: 1000 }), 1000)).toEqual([1]);
      expect((await l.recentRuns(100)).map((r) => r.runId)).toEqual([...Array.from({ length: 20 }, (_, i) => `r${30 - i}`), 'open']);
      expect(await l.runStats()).toEqual(after);
    });

    it('prunes events beyond retention; event totals and the last occurrence stay', async () => {
      const l = use();
      await l.recordEvent('missed', T0, {}, T0 + 500 * MIN); // the oldest holds the greatest occurrence
      for (let i = 1; i < 30; i++) await l.recordEvent(i % 2 ? 'overrun' : 'lock-skip', T0 + i * MIN, {}, T0 + i * MIN);
      const totals = await l.totals();
      expect(await steps(() => l.pruneEvents({ keep: 20, before: 0, limit: 4 }), 4)).toEqual([4, 4, 2]);
      expect((await l.countEvents('overrun')) + (await l.countEvents('lock-skip')) + (await l.countEvents('missed'))).toBe(20);
      expect(await l.countEvents('missed')).toBe(0);
      expect(await l.totals()).toEqual(totals);
      expect(await l.lastOccurrenceRecorded()).toBe(T0 + 500 * MIN);
      // By age: the events recorded before T0 + 25 min.
      expect(await l.pruneEvents({ keep: 20, before: T0 + 25 * MIN, limit: 100 })).toBe(15);
      expect(await l.totals()).toEqual(totals);
    });
  });

  describe('retention: done items whose files are gone', () => {
    it('marks done items a complete scan did not find, clears the mark when found again, forgets them after the delay; never dead ones', async () => {
      const l = use();
      await pass(l, 'p1', T0, ['a', 'b', 'c', 'e']);
      await killItem(l, 'd');
      const done = (await l.attemptTotals()).succeeded;

      // Gaps of two days: PostgreSQL refreshes a done row's seen mark at most once a day.
      await pass(l, 'p2', T0 + 2 * DAY, ['a', 'b', 'e']);
      expect(await markAll(l, 'p2', T0 + 2 * DAY, 2)).toBe(1); // c
      expect(await l.forgetMissing({ before: T0 + 2 * DAY, limit: 10 })).toBe(0); // marked at, not before

      await pass(l, 'p3', T0 + 4 * DAY, ['a', 'b', 'c', 'e']); // c is back: no longer missing
      expect(await markAll(l, 'p3', T0 + 4 * DAY, 3)).toBe(0);
      expect(await l.forgetMissing({ before: T0 + 100 * DAY, limit: 10 })).toBe(0);

      await pass(l, 'p4', T0 + 6 * DAY, ['a']);
      expect(await markAll(l, 'p4', T0 + 6 * DAY, 1000)).toBe(3); // b, c, e; not the dead d
      expect(await markAll(l, 'p4', T0 + 6 * DAY, 1000)).toBe(0); // marks are kept, not renewed
      expect(await l.forgetMissing({ before: T0 + 6 * DAY, limit: 10 })).toBe(0);
      expect(await steps(() => l.forgetMissing({ before: T0 + 6 * DAY + 1, limit: 2 }), 2)).toEqual([2, 1]);
      expect(await l.get('b')).toBeNull();
      expect(await l.get('c')).toBeNull();
      expect(await l.get('a')).toMatchObject({ state: 'done' });
      expect(await l.get('d')).toMatchObject({ state: 'dead' });
      expect(await l.counts()).toEqual({ pending: 0, claimed: 0, done: 1, dead: 1 });
      expect((await l.attemptTotals()).succeeded).toBe(done);

      // A file that comes back after it was forgotten is a new item.
      expect(await l.discover(items('c'), { runId: 'p5', now: T0 + 7 * DAY })).toEqual(['c']);
      expect(await l.get('c')).toMatchObject({ state: 'pending', attempts: 0 });
    });

    it('walks a bounded slice per call and goes on from there in the next pass', async () => {
      const l = use();
      await pass(l, 'p1', T0, ['a', 'b', 'c', 'd', 'e']);
      await pass(l, 'p2', T0 + 2 * DAY, []);
      expect(await l.markMissing({ passId: 'p2', scanStartedAt: T0 + 2 * DAY, now: T0 + 2 * DAY, limit: 2 })).toEqual({ marked: 2, wrapped: false });
      // The next complete pass goes on after b; its marks carry its own time.
      await pass(l, 'p3', T0 + 4 * DAY, []);
      expect(await l.markMissing({ passId: 'p3', scanStartedAt: T0 + 4 * DAY, now: T0 + 4 * DAY, limit: 2 })).toEqual({ marked: 2, wrapped: false });
      expect(await l.markMissing({ passId: 'p3', scanStartedAt: T0 + 4 * DAY, now: T0 + 4 * DAY, limit: 2 })).toEqual({ marked: 1, wrapped: true });
      expect(await l.forgetMissing({ before: T0 + 3 * DAY, limit: 10 })).toBe(2); // a, b
      expect(await l.get('c')).toMatchObject({ state: 'done' });
      // Then from the start again.
      expect(await l.markMissing({ passId: 'p3', scanStartedAt: T0 + 4 * DAY, now: T0 + 4 * DAY, limit: 10 })).toEqual({ marked: 0, wrapped: true });
      expect(await l.forgetMissing({ before: T0 + 5 * DAY, limit: 10 })).toBe(3);
      expect(await l.counts()).toEqual({ pending: 0, claimed: 0, done: 0, dead: 0 });
    });

    it('a file that comes back after it was forgotten is a new item', async () => {
      const l = use();
      await pass(l, 'p1', T0, ['c']);
      await pass(l, 'p2', T0 + 2 * DAY, []);
      expect(await markAll(l, 'p2', T0 + 2 * DAY, 10)).toBe(1);
      expect(await l.forgetMissing({ before: T0 + 40 * DAY, limit: 10 })).toBe(1);
      expect(await l.discover(items('c'), { runId: 'p5', now: T0 + 7 * DAY })).toEqual(['c']);
      expect(await l.get('c')).toMatchObject({ state: 'pending', attempts: 0 });
    });

  });
}
