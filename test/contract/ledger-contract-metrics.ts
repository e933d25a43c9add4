import { describe, expect, it } from 'vitest';
import type { AttemptTotals } from '../../src/ledger/types.js';
import { claimOne, failOpts, killItem, RETRY, T0, type UseLedger } from './ledger-fixtures.js';

/** The reads metrics are built on: attemptTotals() and runStats(). */
export function metricsReadsContract(use: UseLedger): void {
  describe('attemptTotals', () => {
    it('counts every settled attempt by result, fenced writes included', async () => {
      const zero: AttemptTotals = { succeeded: 0, failed: 0, dead: 0, released: 0, fenced: 0, gone: 0 };
      expect(await use().attemptTotals()).toEqual(zero);
      const a = await claimOne(use(), 'a');
      await use().complete([a], T0);
      await use().complete([a], T0 + 1); // already done: fenced
      await killItem(use(), 'b'); // two retryable failures, then dead
      await use().release([await claimOne(use(), 'c')], T0, 'drained');
      const stale = await claimOne(use(), 'd');
      await use().release([stale], T0, 'drained');
      await use().fail([{ claim: stale, error: 'late' }], failOpts()); // the claim was handed back: fenced
      const gone = await claimOne(use(), 'e');
      expect(await use().forget([gone], T0)).toEqual([{ id: 'e', result: 'applied', state: 'gone' }]);
      expect(await use().forget([gone], T0)).toMatchObject([{ id: 'e', result: 'fenced' }]);
      expect(await use().get('e')).toBeNull();
      expect(await use().attemptTotals()).toEqual({ succeeded: 1, failed: RETRY.maxAttempts - 1, dead: 1, released: 2, fenced: 3, gone: 1 });
      // dead = the dead-lettered total; succeeded = items done.
      expect(await use().totals()).toMatchObject({ deadLettered: 1, itemsDone: 1 });
    });

    it('forgetUnseen: pending items the pass did not see are forgotten and counted as gone; claimed, done and dead ones stay', async () => {
      const ids = ['seen', 'unseen-1', 'unseen-2', 'claimed-old', 'done-old', 'dead-old'];
      await use().discover(ids.map((id) => ({ id })), { runId: 'pass-1', now: T0 });
      await use().claim(['claimed-old'], { owner: 'o', runId: 'pass-1', now: T0, leaseMs: 60_000 });
      await use().complete(await use().claim(['done-old'], { owner: 'o', runId: 'pass-1', now: T0, leaseMs: 60_000 }), T0);
      await killItem(use(), 'dead-old');
      // The next pass sees only one of them again.
      await use().discover([{ id: 'seen' }], { runId: 'pass-2', now: T0 + 1 });
      const before = await use().attemptTotals();
      expect(await use().forgetUnseen('pass-2')).toBe(2);
      expect(await use().get('unseen-1')).toBeNull();
      expect(await use().get('unseen-2')).toBeNull();
      for (const id of ['seen', 'claimed-old', 'done-old', 'dead-old']) expect(await use().get(id), id).not.toBeNull();
      expect((await use().attemptTotals()).gone).toBe(before.gone + 2);
      expect(await use().forgetUnseen('pass-2')).toBe(0);
    });

    it('does not go down when dead items are retried', async () => {
      await killItem(use(), 'b');
      const before = await use().attemptTotals();
      await use().retryDead('all', T0);
      expect(await use().attemptTotals()).toEqual(before);
    });
  });

  describe('runStats', () => {
    it('is empty before the first run', async () => {
      expect(await use().runStats()).toEqual({
        byOutcome: { completed: 0, drained: 0, failed: 0, 'skipped-locked': 0, stale: 0, died: 0 },
        firstStartedAt: null,
        lastStartedAt: null,
        lastSuccessAt: null,
      });
    });

    it('counts finished runs by outcome and knows the first start, last start and last success', async () => {
      const run = async (runId: string, startedAt: number, outcome?: 'completed' | 'failed' | 'drained') => {
        await use().startRun({ runId, owner: 'o', startedAt });
        if (outcome) await use().finishRun(runId, startedAt + 100, outcome, {});
      };
      await run('r1', T0, 'completed');
      await run('r2', T0 + 1000, 'completed');
      await run('r3', T0 + 2000, 'failed');
      await run('r4', T0 + 3000, 'drained');
      await run('r5', T0 + 4000); // still running (or died): no outcome
      await use().recordEvent('lock-skip', T0 + 4500); // a skipped start is not a run
      expect(await use().runStats()).toEqual({
        byOutcome: { completed: 2, drained: 1, failed: 1, 'skipped-locked': 0, stale: 0, died: 0 },
        firstStartedAt: T0,
        lastStartedAt: T0 + 4000,
        lastSuccessAt: T0 + 1100,
      });
    });
  });
}
