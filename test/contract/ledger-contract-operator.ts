import { describe, expect, it } from 'vitest';
import type { Ledger } from '../../src/ledger/types.js';
import { discoverAndClaim, claimOpts, items, T0, type UseLedger } from './ledger-fixtures.js';

/** Dead-letter `ids` at `now`, all in one result batch (so they share a deadAt). */
async function deadAt(ledger: Ledger, now: number, ...ids: string[]): Promise<void> {
  const claims = await discoverAndClaim(ledger, items(...ids), claimOpts({ now }));
  await ledger.fail(claims.map((claim) => ({ claim, error: `boom ${claim.id}` })), { now, retry: { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 } });
}

/** Every page, checking that none is empty or larger than asked. */
async function pages<T>(it: AsyncIterable<T[]>, pageSize = 500): Promise<T[][]> {
  const out: T[][] = [];
  for await (const page of it) {
    expect(page.length).toBeGreaterThan(0);
    expect(page.length).toBeLessThanOrEqual(pageSize);
    out.push(page);
  }
  return out;
}
const all = async <T>(it: AsyncIterable<T[]>, pageSize?: number): Promise<T[]> => (await pages(it, pageSize)).flat();

/** What operator commands read: dead letters page by page, runs that died. */
export function operatorContract(use: UseLedger): void {
  describe('deadPages', () => {
    it("yields listDead's order page by page, each item once, ties on deadAt split across pages", async () => {
      await deadAt(use(), T0 + 2000, 'm', 'n');
      await deadAt(use(), T0 + 1000, 'g', 'c', 'a', 'e', 'b', 'f', 'd');
      const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'm', 'n'];
      expect((await use().listDead()).map((d) => d.id)).toEqual(ids);
      for (const pageSize of [1, 3, 7, 500]) {
        const got = await pages(use().deadPages({ pageSize }), pageSize);
        expect(got.flat().map((d) => d.id), `pageSize ${pageSize}`).toEqual(ids);
        expect(got).toHaveLength(Math.ceil(ids.length / pageSize));
      }
      expect((await all(use().deadPages()))[0]).toEqual({ id: 'a', attempts: 1, lastError: 'boom a', deadAt: T0 + 1000 });
    });

    it('since (inclusive) and limit', async () => {
      await deadAt(use(), T0 + 1000, 'a', 'b', 'c');
      await deadAt(use(), T0 + 2000, 'd', 'e');
      const ids = async (q: Parameters<Ledger['deadPages']>[0]) => (await all(use().deadPages(q), q?.pageSize)).map((d) => d.id);
      expect(await ids({ since: T0 + 2000 })).toEqual(['d', 'e']);
      expect(await ids({ since: T0 + 1001 })).toEqual(['d', 'e']);
      expect(await ids({ since: T0 + 2001 })).toEqual([]);
      expect(await ids({ limit: 4, pageSize: 3 })).toEqual(['a', 'b', 'c', 'd']);
      expect(await ids({ since: T0 + 1000, limit: 1 })).toEqual(['a']);
      await expect(ids({ pageSize: 0 })).rejects.toThrow(/pageSize must be a positive integer/);
    });

    it('skips items that are no longer dead', async () => {
      await deadAt(use(), T0, 'a', 'b', 'c');
      await use().retryDead(['b'], T0 + 1);
      expect((await all(use().deadPages({ pageSize: 1 }), 1)).map((d) => d.id)).toEqual(['a', 'c']);
    });
  });

  describe('markRunsDied', () => {
    it('ends unfinished runs silent since before a time: outcome died, finishedAt their last sign of life', async () => {
      await use().startRun({ runId: 'old', owner: 'h:1:old', startedAt: T0 - 100_000 });
      await use().startRun({ runId: 'beat', owner: 'h:2:beat', startedAt: T0 - 90_000 });
      await use().heartbeat('beat', T0 - 10_000);
      await use().startRun({ runId: 'done', owner: 'h:3:done', startedAt: T0 - 80_000 });
      await use().finishRun('done', T0 - 70_000, 'completed', { succeeded: 1 });
      await use().startRun({ runId: 'live', owner: 'h:4:live', startedAt: T0 - 1000 });

      expect((await use().markRunsDied(T0 - 10_000)).sort()).toEqual(['old']);
      expect((await use().markRunsDied(T0)).sort()).toEqual(['beat', 'live']);
      expect(await use().markRunsDied(Number.MAX_SAFE_INTEGER)).toEqual([]);
      const runs = Object.fromEntries((await use().recentRuns(10)).map((r) => [r.runId, r]));
      expect(runs.old).toMatchObject({ outcome: 'died', finishedAt: T0 - 100_000, counts: null });
      expect(runs.beat).toMatchObject({ outcome: 'died', finishedAt: T0 - 10_000 });
      expect(runs.done).toMatchObject({ outcome: 'completed', finishedAt: T0 - 70_000 });
      expect(await use().beatingRuns(0)).toEqual([]);
      expect((await use().runStats()).byOutcome).toMatchObject({ died: 3, completed: 1 });
    });

    it('a run marked died that turns out alive and finishes stays died: cronsafe_runs_total{outcome="died"} never goes down', async () => {
      // On PostgreSQL a new pass marks every unfinished run died; a pod whose lock session was
      // cut while it went on (paused, a network blip) finishes afterwards.
      await use().startRun({ runId: 'paused', owner: 'h:1:paused', startedAt: T0 });
      expect(await use().markRunsDied(Number.MAX_SAFE_INTEGER)).toEqual(['paused']);
      expect((await use().runStats()).byOutcome).toMatchObject({ died: 1, completed: 0 });
      await use().finishRun('paused', T0 + 5000, 'completed', { succeeded: 3 });
      expect((await use().runStats()).byOutcome).toMatchObject({ died: 1, completed: 0 });
      expect((await use().recentRuns(1))[0]).toMatchObject({ runId: 'paused', outcome: 'died', finishedAt: T0 + 5000, counts: { succeeded: 3 } });
    });
  });
}
