import { describe, expect, it } from 'vitest';
import type { DiscoveredItem } from '../../src/ledger/types.js';
import { claimOne, discoverAndClaim, claimOpts, failOpts, items, RETRY, T0, type UseLedger } from './ledger-fixtures.js';

type Stat = Omit<DiscoveredItem, 'id'>;

/** refresh policies (schedule.refresh): every-occurrence (doneBefore) and on-change. */
export function refreshContract(use: UseLedger): void {
  /** Discover `id` with `stat` and claim it; fails the test when it is not claimed. */
  const claimWith = async (id: string, stat: Stat, now = T0) => {
    const [claim] = await discoverAndClaim(use(), [{ id, ...stat }], claimOpts({ now }));
    if (claim === undefined) throw new Error(`expected ${id} to be claimed`);
    return claim;
  };
  const doneWith = async (id: string, stat: Stat, now = T0): Promise<void> => {
    await use().complete([await claimWith(id, stat, now)], now);
  };
  const deadWith = async (id: string, stat: Stat): Promise<void> => {
    let now = T0;
    for (let i = 1; i <= RETRY.maxAttempts; i++) {
      const [out] = await use().fail([{ claim: await claimWith(id, stat, now), error: `boom ${i}` }], failOpts({ now }));
      now = out?.result === 'applied' && out.availableAt !== undefined ? out.availableAt : now;
    }
    expect((await use().get(id))?.state).toBe('dead');
  };
  const onChange = (found: DiscoveredItem[], now = T0 + 1e6) =>
    discoverAndClaim(use(), found, claimOpts({ runId: 'run-2', now, refresh: { onChange: true } }));
  const ids = (claims: { id: string }[]) => claims.map((c) => c.id);

  describe('refresh: every-occurrence (doneBefore)', () => {
    it('reclaims an item done before the horizon as a new cycle: attempt 1, full retry budget', async () => {
      const first = await claimOne(use(), 'a');
      await use().fail([{ claim: first, error: 'x' }], failOpts());
      await use().release([await claimOne(use(), 'a', { now: T0 + 500 })], T0 + 500, 'drained');
      await use().complete([await claimOne(use(), 'a', { now: T0 + 600 })], T0 + 700);
      expect(await use().get('a')).toMatchObject({ state: 'done', attempts: 3, released: 1, doneAt: T0 + 700 });
      const opts = claimOpts({ runId: 'run-2', owner: 'owner-b', now: T0 + 5000, refresh: { doneBefore: T0 + 701 } });
      expect(await discoverAndClaim(use(), items('a'), opts)).toEqual([{ id: 'a', owner: 'owner-b', attempt: 1, charged: 1 }]);
      expect(await use().get('a')).toMatchObject({ state: 'claimed', attempts: 1, released: 0, doneAt: null, lastError: 'drained' });
      expect((await use().totals()).itemsDone).toBe(1);
    });

    it('keeps items done at or after the horizon done, so runs of one occurrence continue a sweep', async () => {
      const horizon = T0 + 1000;
      await use().complete([await claimOne(use(), 'before')], horizon - 1);
      await use().complete([await claimOne(use(), 'at')], horizon);
      await use().complete([await claimOne(use(), 'after')], horizon + 1);
      const refresh = { doneBefore: horizon };
      const claims = await discoverAndClaim(use(), items('before', 'at', 'after'), claimOpts({ runId: 'run-2', now: horizon + 10, refresh }));
      expect(ids(claims)).toEqual(['before']);
      await use().complete(claims, horizon + 20);
      // The next run inside the same occurrence finds nothing left to do.
      expect(await discoverAndClaim(use(), items('before', 'at', 'after'), claimOpts({ runId: 'run-3', now: horizon + 30, refresh }))).toEqual([]);
      expect(await use().counts()).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
    });

    it('never revives dead items', async () => {
      await deadWith('dead', {});
      const refresh = { doneBefore: T0 + 1e9 };
      expect(await discoverAndClaim(use(), items('dead'), claimOpts({ now: T0 + 1e6, refresh }))).toEqual([]);
      expect(await use().get('dead')).toMatchObject({ state: 'dead', attempts: RETRY.maxAttempts });
      expect(await use().listDead()).toHaveLength(1);
    });

    it("leaves refreshed items past the limit pending for this run's sweep", async () => {
      for (const id of ['a', 'b', 'c']) await use().complete([await claimOne(use(), id)], T0);
      const opts = claimOpts({ runId: 'run-2', now: T0 + 10, refresh: { doneBefore: T0 + 1 } });
      expect(await discoverAndClaim(use(), items('a', 'b', 'c'), { ...opts, limit: 1 })).toMatchObject([{ id: 'a', attempt: 1 }]);
      expect(await use().counts()).toEqual({ pending: 2, claimed: 1, done: 0, dead: 0 });
      expect(await use().claimDue({ ...claimOpts({ runId: 'run-other', now: T0 + 10 }), limit: 10 })).toEqual([]);
      const swept = await use().claimDue({ ...opts, limit: 10 });
      expect(swept.map((c) => [c.id, c.attempt]).sort()).toEqual([['b', 1], ['c', 1]]);
    });

    it('refreshes with limit 0 too (discovery only); the sweep claims them', async () => {
      await use().complete([await claimOne(use(), 'a')], T0);
      const opts = claimOpts({ runId: 'run-2', now: T0 + 10, refresh: { doneBefore: T0 + 1 } });
      expect(await discoverAndClaim(use(), items('a'), { ...opts, limit: 0 })).toEqual([]);
      expect(await use().get('a')).toMatchObject({ state: 'pending', attempts: 0, availableAt: T0 + 10 });
      expect(await use().claimDue({ ...opts, limit: 10 })).toMatchObject([{ id: 'a', attempt: 1 }]);
    });

    it('refreshes nothing without a policy, with an empty one, or with onChange false', async () => {
      await use().complete([await claimOne(use(), 'a', { now: T0 })], T0);
      for (const refresh of [undefined, {}, { onChange: false }]) {
        expect(await discoverAndClaim(use(), [{ id: 'a', size: 9 }], claimOpts({ now: T0 + 1e6, refresh }))).toEqual([]);
      }
      expect((await use().get('a'))?.state).toBe('done');
    });

    it('rejects a doneBefore that is not a time, changing nothing', async () => {
      const refresh = { doneBefore: Number.NaN };
      await expect(discoverAndClaim(use(), items('a'), claimOpts({ refresh }))).rejects.toThrow(/doneBefore/);
      expect(await use().get('a')).toBeNull();
    });
  });

  describe('refresh: on-change', () => {
    it('reclaims a done item whose size or mtime changed; an unchanged one stays done', async () => {
      const mtime = 1_700_000_000_123.4568; // fractional, as fs.stat gives it
      for (const id of ['size', 'mtime', 'same']) await doneWith(id, { size: 10, mtimeMs: mtime });
      const claims = await onChange([
        { id: 'size', size: 11, mtimeMs: mtime },
        { id: 'mtime', size: 10, mtimeMs: mtime + 1 },
        { id: 'same', size: 10, mtimeMs: mtime },
      ]);
      expect(claims.map((c) => [c.id, c.attempt, c.charged])).toEqual([['size', 1, 1], ['mtime', 1, 1]]);
      expect((await use().get('same'))?.state).toBe('done');
    });

    it('reclaims a dead item whose file changed as a fresh item (a fixed corrupt file)', async () => {
      await deadWith('bad', { size: 1, mtimeMs: 1 });
      expect(await onChange([{ id: 'bad', size: 1, mtimeMs: 1 }])).toEqual([]);
      expect(await onChange([{ id: 'bad', size: 2, mtimeMs: 2 }])).toMatchObject([{ id: 'bad', attempt: 1, charged: 1 }]);
      expect(await use().listDead()).toEqual([]);
      expect(await use().counts()).toEqual({ pending: 0, claimed: 1, done: 0, dead: 0 });
      expect((await use().totals()).deadLettered).toBe(1);
    });

    it('never counts an item discovered without stat data as changed; each known field counts', async () => {
      await doneWith('a', { size: 10, mtimeMs: 100 });
      expect(await onChange([{ id: 'a' }])).toEqual([]);
      expect(await onChange([{ id: 'a', size: 10 }])).toEqual([]);
      expect(await onChange([{ id: 'a', mtimeMs: 101 }])).toMatchObject([{ id: 'a', attempt: 1 }]);
    });

    it('compares with the version last claimed, not the one last discovered', async () => {
      const claim = await claimWith('a', { size: 1, mtimeMs: 1 });
      // The file changes while it is being processed: the claimed version is still 1.
      await discoverAndClaim(use(), [{ id: 'a', size: 2, mtimeMs: 2 }], claimOpts({ now: T0 + 1 }));
      await use().complete([claim], T0 + 2);
      expect(await use().get('a')).toMatchObject({ state: 'done', size: 2, mtimeMs: 2 });
      const [again] = await onChange([{ id: 'a', size: 2, mtimeMs: 2 }]);
      expect(again).toMatchObject({ id: 'a', attempt: 1 });
      // Now version 2 is the one processed: seeing it again changes nothing.
      await use().complete(again ? [again] : [], T0 + 1e6);
      expect(await onChange([{ id: 'a', size: 2, mtimeMs: 2 }], T0 + 2e6)).toEqual([]);
    });

    it('takes the first stat seen as the baseline of an item claimed without one', async () => {
      await doneWith('a', {}); // e.g. processed under `never`, which does not stat
      expect(await onChange([{ id: 'a', size: 5, mtimeMs: 5 }])).toEqual([]);
      expect(await onChange([{ id: 'a', size: 5, mtimeMs: 5 }])).toEqual([]);
      expect(await onChange([{ id: 'a', size: 6, mtimeMs: 5 }])).toMatchObject([{ id: 'a', attempt: 1 }]);
    });

    it('leaves claimed and backing-off items alone', async () => {
      await claimWith('held', { size: 1 });
      const [out] = await use().fail([{ claim: await claimWith('waiting', { size: 1 }), error: 'x' }], failOpts());
      expect(out).toMatchObject({ state: 'pending', availableAt: T0 + 500 });
      expect(await onChange([{ id: 'held', size: 2 }, { id: 'waiting', size: 2 }], T0 + 1)).toEqual([]);
      expect(await use().get('held')).toMatchObject({ state: 'claimed', owner: 'owner-a', attempts: 1 });
      expect(await use().get('waiting')).toMatchObject({ state: 'pending', attempts: 1 });
    });

    it('combines with doneBefore: either revives a done item; dead needs a change', async () => {
      await doneWith('old', { size: 1 }, T0);
      await doneWith('changed', { size: 1 }, T0 + 10);
      await doneWith('recent', { size: 1 }, T0 + 10);
      await deadWith('dead', { size: 1 });
      const found = [{ id: 'old', size: 1 }, { id: 'changed', size: 2 }, { id: 'recent', size: 1 }, { id: 'dead', size: 1 }];
      const opts = claimOpts({ runId: 'run-2', now: T0 + 1e6, refresh: { doneBefore: T0 + 5, onChange: true } });
      expect(ids(await discoverAndClaim(use(), found, opts))).toEqual(['old', 'changed']);
    });
  });
}
