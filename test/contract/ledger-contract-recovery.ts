import { describe, expect, it } from 'vitest';
import type { LedgerTotals } from '../../src/ledger/types.js';
import { claimOne, claimOpts, failOpts, items, killItem, LEASE_MS, RETRY, T0, type UseLedger } from './ledger-fixtures.js';

/** Crash recovery, leases, dead letters, counts, run history, events and totals. */
export function recoveryContract(use: UseLedger): void {
  describe('reclaimAbandoned (the recovery a run starts with)', () => {
    it('takes every claim not its own on a store a run holds alone, only the expired ones on a shared store', async () => {
      await claimOne(use(), 'expired', { owner: 'dead-pod', now: T0 });
      await claimOne(use(), 'live', { owner: 'live-pod', now: T0 + LEASE_MS });
      await claimOne(use(), 'mine', { owner: 'me', now: T0 + LEASE_MS });
      // After the first claim's lease ended, before the others' did.
      const n = await use().reclaimAbandoned('me', failOpts({ now: T0 + LEASE_MS + 5 }));
      expect(await use().get('expired')).toMatchObject({ state: 'pending', owner: null, attempts: 1 });
      expect(await use().get('mine')).toMatchObject({ state: 'claimed', owner: 'me' });
      if (use().shared) {
        // Another pod of the pass may be alive: its claim stays.
        expect(n).toBe(1);
        expect(await use().get('live')).toMatchObject({ state: 'claimed', owner: 'live-pod' });
      } else {
        // The run lock proves every other run gone.
        expect(n).toBe(2);
        expect(await use().get('live')).toMatchObject({ state: 'pending', owner: null, attempts: 1 });
      }
    });
  });

  describe('reclaimOrphans', () => {
    it("returns other owners' claims to pending with a charged attempt; leaves its own", async () => {
      await claimOne(use(), 'a');
      await claimOne(use(), 'b');
      await claimOne(use(), 'mine', { owner: 'owner-b', runId: 'run-2' });
      expect(await use().reclaimOrphans('owner-b', failOpts({ now: T0 + 5 }))).toBe(2);
      expect(await use().get('a')).toMatchObject({
        state: 'pending', owner: null, attempts: 1, released: 0, availableAt: T0 + 5 + 500,
      });
      expect((await use().get('a'))?.lastError).toMatch(/attempt 1 abandoned/);
      expect(await use().get('mine')).toMatchObject({ state: 'claimed', owner: 'owner-b' });
      expect(await use().reclaimOrphans('owner-b', failOpts())).toBe(0);
    });

    it('charges only the attempts that started: discovered items waiting for a slot stay pending, uncharged', async () => {
      // A dead run had discovered 10 items (its channel) and started 3 of them.
      const ids = await use().discover(items(...Array.from({ length: 10 }, (_, i) => `i${i}`)), { runId: 'run-1', now: T0 });
      const started = await use().claim(ids.slice(0, 3), claimOpts({ owner: 'dead-run' }));
      expect(started).toHaveLength(3);
      expect(await use().reclaimOrphans('next-run', failOpts({ now: T0 + 5 }))).toBe(3);
      for (const id of ids.slice(0, 3)) {
        expect(await use().get(id), id).toMatchObject({ state: 'pending', attempts: 1, released: 0 });
      }
      for (const id of ids.slice(3)) {
        expect(await use().get(id), id).toMatchObject({ state: 'pending', attempts: 0, released: 0, lastError: null });
      }
      // The next run starts the waiting ones as their first attempt.
      expect(await use().claim([ids[5]!], claimOpts({ owner: 'next-run', now: T0 + 5 }))).toMatchObject([{ attempt: 1, charged: 1 }]);
    });

    it('completes an orphan whose output was committed after its claim, even at its last attempt; charges the rest', async () => {
      const retry = { ...RETRY, maxAttempts: 1 };
      await claimOne(use(), 'written', { owner: 'dead-run', now: T0 + 7 });
      await claimOne(use(), 'not-written', { owner: 'dead-run', now: T0 + 7 });
      const asked: Array<[string, number]> = [];
      const committed = (id: string, claimedAt: number) => {
        asked.push([id, claimedAt]);
        return id === 'written';
      };
      const before = await use().totals();
      expect(await use().reclaimOrphans('next-run', { ...failOpts({ retry, now: T0 + 50 }), committed })).toBe(2);
      // Asked with the claim's own time, which is what the output must be newer than.
      expect(asked.sort()).toEqual([['not-written', T0 + 7], ['written', T0 + 7]]);
      expect(await use().get('written')).toMatchObject({ state: 'done', attempts: 1, owner: null, doneAt: T0 + 50 });
      expect(await use().get('not-written')).toMatchObject({ state: 'dead', attempts: 1 });
      const after = await use().totals();
      expect(after.itemsDone - before.itemsDone).toBe(1);
      expect(after.deadLettered - before.deadLettered).toBe(1);
    });

    it('dead-letters an item that kills every run that claims it (OOM)', async () => {
      const retry = { ...RETRY, maxAttempts: 2 };
      await claimOne(use(), 'oom', { owner: 'run-1-owner' });
      // Told of each item it dead-lettered, with the error recorded (the run logs it and posts an Event).
      const told: Array<[string, string]> = [];
      const onDeadLettered = (id: string, error: string) => told.push([id, error]);
      expect(await use().reclaimOrphans('run-2-owner', { ...failOpts({ retry }), onDeadLettered })).toBe(1);
      expect(told).toEqual([]);
      await claimOne(use(), 'oom', { owner: 'run-2-owner', now: T0 + 10_000 });
      expect(await use().reclaimOrphans('run-3-owner', { ...failOpts({ retry, now: T0 + 20_000 }), onDeadLettered })).toBe(1);
      expect(await use().get('oom')).toMatchObject({ state: 'dead', attempts: 2 });
      expect(told).toEqual([['oom', (await use().get('oom'))?.lastError]]);
      expect(told[0]?.[1]).toMatch(/^attempt 2 abandoned/);
      expect(await use().listDead()).toMatchObject([{ id: 'oom', deadAt: T0 + 20_000 }]);
      expect((await use().totals()).deadLettered).toBe(1);
    });
  });

  describe('renew', () => {
    it('extends leases still held and returns the ids no longer held', async () => {
      const a = await claimOne(use(), 'a');
      const b = await claimOne(use(), 'b');
      await use().complete([b], T0);
      expect(await use().renew('owner-a', ['a', 'b', 'ghost'], T0 + 99_000)).toEqual(['b', 'ghost']);
      expect((await use().get('a'))?.leaseUntil).toBe(T0 + 99_000);
      expect(await use().renew('owner-x', ['a'], T0 + 1)).toEqual(['a']);
      expect(await use().complete([a], T0)).toMatchObject([{ result: 'applied' }]);
    });
  });

  describe('dead letters', () => {
    it('lists dead items oldest first, with a limit', async () => {
      await killItem(use(), 'first');
      await killItem(use(), 'second');
      const dead = await use().listDead();
      expect(dead.map((d) => d.id)).toEqual(['first', 'second']);
      expect(dead[0]).toMatchObject({ attempts: 3, lastError: 'boom 3' });
      expect(await use().listDead(1)).toHaveLength(1);
    });

    it('retryDead requeues by id or all, resetting attempts; totals stay', async () => {
      await killItem(use(), 'a');
      await killItem(use(), 'b');
      await claimOne(use(), 'live');
      expect(await use().retryDead(['a', 'live', 'ghost'], T0 + 1)).toBe(1);
      expect(await use().get('a')).toMatchObject({ state: 'pending', attempts: 0, released: 0, availableAt: T0 + 1 });
      expect(await use().get('live')).toMatchObject({ state: 'claimed' });
      expect(await claimOne(use(), 'a', { now: T0 + 1 })).toMatchObject({ attempt: 1, charged: 1 });
      expect(await use().retryDead('all', T0 + 2)).toBe(1);
      expect(await use().retryDead('all', T0 + 3)).toBe(0);
      expect(await use().counts()).toEqual({ pending: 1, claimed: 2, done: 0, dead: 0 });
      expect((await use().totals()).deadLettered).toBe(2);
    });
  });

  describe('counts and get', () => {
    it('counts every state and returns null for unknown ids', async () => {
      await use().complete([await claimOne(use(), 'done')], T0);
      await killItem(use(), 'dead');
      await claimOne(use(), 'claimed');
      await use().discover([{ id: 'p1' }, { id: 'p2' }], { runId: 'r', now: T0 });
      expect(await use().counts()).toEqual({ pending: 2, claimed: 1, done: 1, dead: 1 });
      expect(await use().get('nope')).toBeNull();
    });
  });

  describe('runs and events', () => {
    it('records runs and returns the newest first', async () => {
      await use().startRun({ runId: 'r1', owner: 'o1', startedAt: T0, scheduledFor: T0 - 5 });
      await use().startRun({ runId: 'r2', owner: 'o2', startedAt: T0 + 1000 });
      await use().finishRun('r1', T0 + 500, 'completed', { done: 3, failed: 1 });
      const [r2, r1] = await use().recentRuns(10);
      expect(r2).toEqual({
        runId: 'r2', owner: 'o2', startedAt: T0 + 1000, finishedAt: null, outcome: null, scheduledFor: null, counts: null,
      });
      expect(r1).toEqual({
        runId: 'r1', owner: 'o1', startedAt: T0, finishedAt: T0 + 500, outcome: 'completed',
        scheduledFor: T0 - 5, counts: { done: 3, failed: 1 },
      });
      expect(await use().recentRuns(1)).toHaveLength(1);
    });

    it('heartbeats: unfinished runs beating since a time, newest first; a finished run no longer beats', async () => {
      await use().startRun({ runId: 'old', owner: 'h:1:old', startedAt: T0 - 100_000 });
      await use().startRun({ runId: 'r1', owner: 'h:2:r1', startedAt: T0 });
      await use().startRun({ runId: 'r2', owner: 'h:3:r2', startedAt: T0 + 10 });
      expect((await use().beatingRuns(T0)).map((r) => r.runId)).toEqual(['r2', 'r1']);
      await use().heartbeat('old', T0 + 50);
      await use().finishRun('r2', T0 + 60, 'completed', {});
      await use().heartbeat('r2', T0 + 70); // finished: no longer beats
      expect(await use().beatingRuns(T0)).toEqual([
        { runId: 'r1', owner: 'h:2:r1', startedAt: T0, heartbeatAt: T0 },
        { runId: 'old', owner: 'h:1:old', startedAt: T0 - 100_000, heartbeatAt: T0 + 50 },
      ]);
      expect(await use().beatingRuns(T0 + 51)).toEqual([]);
    });

    it('counts overruns (overrun and lock-skip events), lock skips, missed and stale in the totals', async () => {
      await use().recordEvent('overrun', T0, { missedOccurrences: 2 });
      await use().recordEvent('lock-skip', T0 + 1);
      await use().recordEvent('missed', T0 + 2, {});
      await use().recordEvent('missed', T0 + 2, {}, T0);
      await use().recordEvent('stale', T0 + 3);
      await use().recordEvent('overrun', T0 + 4, undefined, T0 + 1);
      expect(await use().totals()).toEqual({
        deadLettered: 0, overruns: 3, lockSkips: 1, missed: 2, stale: 1, itemsDone: 0, itemsFailed: 0, requeued: 0,
      });
    });

    it('rejects an unknown event kind, counting nothing', async () => {
      await expect(use().recordEvent('bogus' as 'stale', T0)).rejects.toThrow(/unknown event kind/);
      expect(await use().countEvents('bogus' as 'stale')).toBe(0);
      expect(await use().totals()).toMatchObject({ overruns: 0, stale: 0, missed: 0 });
    });
  });

  describe('totals', () => {
    it('only ever grow across a mixed history', async () => {
      const seen: LedgerTotals[] = [await use().totals()];
      const step = async (): Promise<void> => {
        seen.push(await use().totals());
      };
      await use().complete([await claimOne(use(), 'a')], T0);
      await step();
      await killItem(use(), 'b');
      await step();
      await use().retryDead('all', T0);
      await step();
      await use().release([await claimOne(use(), 'c')], T0, 'drained');
      await step();
      await use().recordEvent('lock-skip', T0);
      await step();
      await use().recordEvent('missed', T0, {}, T0);
      await step();
      await use().recordEvent('stale', T0, {}, T0);
      await step();
      for (const [prev, next] of seen.slice(0, -1).map((p, i) => [p, seen[i + 1]] as const)) {
        for (const key of Object.keys(prev) as (keyof LedgerTotals)[]) expect(next?.[key]).toBeGreaterThanOrEqual(prev[key]);
      }
      expect(seen.at(-1)).toEqual({
        deadLettered: 1, overruns: 1, lockSkips: 1, missed: 1, stale: 1, itemsDone: 1, itemsFailed: 3, requeued: 1,
      });
    });
  });
}
