import { describe, expect, it } from 'vitest';
import type { Claim } from '../../src/ledger/types.js';
import { claimOne, discoverAndClaim, claimOpts, failOpts, RETRY, T0, type UseLedger } from './ledger-fixtures.js';

/** complete / fail / release: fencing, backoff, dead-lettering, drain hand-back. */
export function transitionsContract(use: UseLedger): void {
  /** `a` claimed by owner-a, then orphaned and re-claimed by owner-b as attempt 2. */
  async function stolen(): Promise<{ stale: Claim; current: Claim }> {
    const stale = await claimOne(use(), 'a');
    await use().reclaimOrphans('owner-b', failOpts());
    const current = await claimOne(use(), 'a', { owner: 'owner-b', runId: 'run-2', now: T0 + 10_000 });
    return { stale, current };
  }

  /** `a` claimed, handed back, re-claimed by the same owner as attempt 2. */
  async function superseded(): Promise<{ stale: Claim; current: Claim }> {
    const stale = await claimOne(use(), 'a');
    await use().release([stale], T0, 'drain');
    const current = await claimOne(use(), 'a');
    return { stale, current };
  }

  describe('complete', () => {
    it('moves the held claim to done and counts it', async () => {
      const claim = await claimOne(use(), 'a');
      expect(await use().complete([claim], T0 + 5)).toEqual([{ id: 'a', result: 'applied', state: 'done' }]);
      expect(await use().get('a')).toMatchObject({ state: 'done', owner: null, doneAt: T0 + 5, attempts: 1 });
      expect((await use().totals()).itemsDone).toBe(1);
    });

    for (const [what, setup] of [['a stale owner', stolen], ['a stale attempt', superseded]] as const) {
      it(`is fenced for ${what} and changes nothing`, async () => {
        const { stale, current } = await setup();
        const [out] = await use().complete([stale], T0 + 20_000);
        expect(out).toMatchObject({ id: 'a', result: 'fenced' });
        expect(out?.result === 'fenced' && out.reason.length > 0).toBe(true);
        expect(await use().get('a')).toMatchObject({ state: 'claimed', owner: current.owner, attempts: current.attempt });
        expect((await use().totals()).itemsDone).toBe(0);
        expect(await use().complete([current], T0 + 20_000)).toMatchObject([{ result: 'applied' }]);
      });
    }

    it('is fenced the second time and for unknown items; one outcome per claim, in order', async () => {
      const a = await claimOne(use(), 'a');
      const b = await claimOne(use(), 'b');
      await use().complete([a], T0);
      const ghost: Claim = { id: 'ghost', owner: 'owner-a', attempt: 1, charged: 1 };
      const outs = await use().complete([a, b, ghost], T0);
      expect(outs.map((o) => [o.id, o.result])).toEqual([['a', 'fenced'], ['b', 'applied'], ['ghost', 'fenced']]);
      expect(await use().get('ghost')).toBeNull();
      expect((await use().totals()).itemsDone).toBe(2);
    });
  });

  describe('fail', () => {
    it('backs off exponentially with equal jitter and keeps the error', async () => {
      let claim = await claimOne(use(), 'a');
      const [first] = await use().fail([{ claim, error: 'exit 1' }], failOpts({ random: () => 0 }));
      expect(first).toEqual({ id: 'a', result: 'applied', state: 'pending', availableAt: T0 + 500 });
      expect(await use().get('a')).toMatchObject({ state: 'pending', owner: null, lastError: 'exit 1', availableAt: T0 + 500 });
      claim = await claimOne(use(), 'a', { now: T0 + 500 });
      const [second] = await use().fail([{ claim, error: 'exit 2' }], failOpts({ now: T0 + 500, random: () => 0.5 }));
      // charged 2: ceiling 2000 ms, half fixed + half of the other half.
      expect(second).toMatchObject({ state: 'pending', availableAt: T0 + 500 + 1500 });
    });

    it('uses a random jitter when none is injected', async () => {
      const claim = await claimOne(use(), 'a');
      const [out] = await use().fail([{ claim, error: 'x' }], { now: T0, retry: RETRY });
      const at = out?.result === 'applied' ? out.availableAt ?? 0 : 0;
      expect(at).toBeGreaterThanOrEqual(T0 + 500);
      expect(at).toBeLessThanOrEqual(T0 + 1000);
    });

    it('dead-letters after maxAttempts charged attempts, keeping the last error', async () => {
      let now = T0;
      const outs = [];
      for (let i = 1; i <= RETRY.maxAttempts; i++) {
        const claim = await claimOne(use(), 'a', { now });
        const [out] = await use().fail([{ claim, error: `boom ${i}` }], failOpts({ now }));
        outs.push(out);
        now += 10_000;
      }
      expect(outs.map((o) => (o?.result === 'applied' ? o.state : o?.result))).toEqual(['pending', 'pending', 'dead']);
      expect(await use().get('a')).toMatchObject({ state: 'dead', attempts: 3, lastError: 'boom 3', owner: null });
      expect(await use().listDead()).toEqual([{ id: 'a', attempts: 3, lastError: 'boom 3', deadAt: T0 + 20_000 }]);
      expect(await discoverAndClaim(use(), [{ id: 'a' }], claimOpts({ now: T0 + 1e9 }))).toEqual([]);
      expect(await use().totals()).toMatchObject({ deadLettered: 1, itemsFailed: 3 });
      expect(await use().counts()).toEqual({ pending: 0, claimed: 0, done: 0, dead: 1 });
    });

    it('is fenced for a stale owner and changes nothing', async () => {
      const { stale, current } = await stolen();
      const failedBefore = (await use().totals()).itemsFailed;
      const [out] = await use().fail([{ claim: stale, error: 'late' }], failOpts({ now: T0 + 20_000 }));
      expect(out).toMatchObject({ result: 'fenced' });
      expect(await use().get('a')).toMatchObject({ state: 'claimed', owner: current.owner, attempts: 2 });
      expect((await use().totals()).itemsFailed).toBe(failedBefore);
    });
  });

  describe('release (drain hand-back)', () => {
    it('puts the item back pending at once without charging the attempt', async () => {
      const claim = await claimOne(use(), 'a');
      expect(await use().release([claim], T0 + 7, 'drained')).toEqual([
        { id: 'a', result: 'applied', state: 'pending', availableAt: T0 + 7 },
      ]);
      expect(await use().get('a')).toMatchObject({
        state: 'pending', attempts: 1, released: 1, availableAt: T0 + 7, lastError: 'drained', owner: null,
      });
      expect(await claimOne(use(), 'a', { now: T0 + 7 })).toMatchObject({ attempt: 2, charged: 1 });
    });

    it('never dead-letters, however often the item is drained', async () => {
      for (let i = 0; i < RETRY.maxAttempts * 2; i++) {
        const claim = await claimOne(use(), 'a');
        await use().release([claim], T0, 'drained');
      }
      const claim = await claimOne(use(), 'a');
      expect(claim).toMatchObject({ attempt: RETRY.maxAttempts * 2 + 1, charged: 1 });
      expect(await use().fail([{ claim, error: 'x' }], failOpts())).toMatchObject([{ state: 'pending' }]);
    });

    it('is fenced for a stale attempt and changes nothing', async () => {
      const { stale, current } = await superseded();
      expect(await use().release([stale], T0, 'late')).toMatchObject([{ result: 'fenced' }]);
      expect(await use().get('a')).toMatchObject({ state: 'claimed', attempts: current.attempt, released: 1 });
    });

    it('unstarted (a stop met the claim in flight): undoes the claim, counting no attempt and keeping the last error', async () => {
      const first = await claimOne(use(), 'a');
      await use().fail([{ claim: first, error: 'boom' }], failOpts());
      const claim = await claimOne(use(), 'a', { now: T0 + 60_000 });
      expect(claim).toMatchObject({ attempt: 2 });
      expect(await use().release([claim], T0 + 60_001, 'handed back unstarted', true)).toMatchObject([{ id: 'a', result: 'applied', state: 'pending' }]);
      expect(await use().get('a')).toMatchObject({ state: 'pending', attempts: 1, released: 0, lastError: 'boom', owner: null });
      expect(await claimOne(use(), 'a', { now: T0 + 60_002 })).toMatchObject({ attempt: 2, charged: 2 });
    });
  });
}
