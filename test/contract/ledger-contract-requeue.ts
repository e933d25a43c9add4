import { describe, expect, it } from 'vitest';
import type { FinishedFilter, FinishedItem } from '../../src/ledger/requeue-types.js';
import type { DiscoveredItem, Ledger, RefreshPolicy } from '../../src/ledger/types.js';
import { classify } from '../../src/runner/plan.js';
import { claimOne, claimOpts, failOpts, items, killItem, T0, type UseLedger } from './ledger-fixtures.js';

const DONE: FinishedFilter = { states: ['done'] };
const BOTH: FinishedFilter = { states: ['done', 'dead'] };

/** Complete `id` (discovered and claimed) at `at`. */
async function doneAt(ledger: Ledger, id: string, at: number): Promise<void> {
  await ledger.complete([await claimOne(ledger, id, { now: at })], at);
}

async function listed(ledger: Ledger, filter: FinishedFilter, pageSize?: number): Promise<FinishedItem[]> {
  const out: FinishedItem[] = [];
  for await (const page of ledger.finishedPages(filter, pageSize)) {
    expect(page.length).toBeGreaterThan(0);
    if (pageSize !== undefined) expect(page.length).toBeLessThanOrEqual(pageSize);
    out.push(...page);
  }
  return out;
}

/** `cronsafe requeue` and `cronsafe plan` (issue 17). */
export function requeueContract(use: UseLedger): void {
  describe('finishedPages', () => {
    it('lists finished items in id order, page by page, by state and finish time', async () => {
      await doneAt(use(), 'c', T0 + 100);
      await doneAt(use(), 'a', T0 + 200);
      await doneAt(use(), 'b', T0 + 300);
      await killItem(use(), 'd'); // dead at T0 + 500 (two backoffs: 500 ms with random 0, then 1000 ms is past: see killItem)
      await claimOne(use(), 'held');
      await use().discover(items('waiting'), { runId: 'run-1', now: T0 });
      const deadAt = (await use().listDead())[0]?.deadAt ?? null;
      expect(deadAt).not.toBeNull();

      for (const pageSize of [1, 2, 500]) {
        expect((await listed(use(), DONE, pageSize)).map((i) => i.id), `pageSize ${pageSize}`).toEqual(['a', 'b', 'c']);
      }
      expect(await listed(use(), BOTH)).toEqual([
        { id: 'a', state: 'done', finishedAt: T0 + 200 },
        { id: 'b', state: 'done', finishedAt: T0 + 300 },
        { id: 'c', state: 'done', finishedAt: T0 + 100 },
        { id: 'd', state: 'dead', finishedAt: deadAt },
      ]);
      expect((await listed(use(), { states: ['dead'] })).map((i) => i.id)).toEqual(['d']);
      // after: inclusive; before: exclusive.
      expect((await listed(use(), { ...DONE, after: T0 + 200 })).map((i) => i.id)).toEqual(['a', 'b']);
      expect((await listed(use(), { ...DONE, before: T0 + 300 })).map((i) => i.id)).toEqual(['a', 'c']);
      expect((await listed(use(), { ...DONE, after: T0 + 101, before: T0 + 300 })).map((i) => i.id)).toEqual(['a']);
      expect(await listed(use(), { ...DONE, after: T0 + 300, before: T0 + 300 })).toEqual([]);
    });

    it('refuses a filter without states or with a state that is not finished', async () => {
      await expect(listed(use(), { states: [] })).rejects.toThrow(/states must be a non-empty list/);
      await expect(listed(use(), { states: ['pending' as 'done'] })).rejects.toThrow(/states must be/);
      await expect(listed(use(), DONE, 0)).rejects.toThrow(/pageSize must be a positive integer/);
    });
  });

  describe('requeue', () => {
    it('moves done items back to pending as a new cycle: attempts 0, available now, lastError kept; counted', async () => {
      const first = await claimOne(use(), 'a');
      await use().fail([{ claim: first, error: 'flaky' }], failOpts());
      const second = await claimOne(use(), 'a', { now: T0 + 500 });
      await use().complete([second], T0 + 600);
      expect(await use().get('a')).toMatchObject({ state: 'done', attempts: 2, doneAt: T0 + 600 });

      expect(await use().requeue(['a'], DONE, T0 + 1000)).toEqual(['a']);
      expect(await use().get('a')).toMatchObject({
        state: 'pending', attempts: 0, released: 0, owner: null, availableAt: T0 + 1000, doneAt: null, lastError: 'flaky',
      });
      expect(await use().counts()).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
      expect((await use().totals()).requeued).toBe(1);
      // The next pass finds it claimable and runs it as attempt 1, with the whole retry budget.
      expect(await use().discover(items('a'), { runId: 'run-2', now: T0 + 1000 })).toEqual(['a']);
      expect(await use().claim(['a'], claimOpts({ runId: 'run-2', now: T0 + 1000 }))).toEqual([{ id: 'a', owner: 'owner-a', attempt: 1, charged: 1 }]);
    });

    it('never touches claimed or pending items, nor dead ones unless asked, nor unknown ids', async () => {
      await doneAt(use(), 'done', T0);
      const held = await claimOne(use(), 'held');
      await use().discover(items('pending'), { runId: 'run-1', now: T0 });
      await killItem(use(), 'dead');
      const before = await use().get('held');

      expect((await use().requeue(['held', 'pending', 'dead', 'ghost', 'done', 'done'], DONE, T0 + 1)).sort()).toEqual(['done']);
      expect(await use().get('held')).toEqual(before);
      expect(await use().get('pending')).toMatchObject({ state: 'pending' });
      expect(await use().get('dead')).toMatchObject({ state: 'dead' });
      expect(await use().get('ghost')).toBeNull();
      // The claim still holds: its completion applies.
      expect(await use().complete([held], T0 + 2)).toMatchObject([{ result: 'applied', state: 'done' }]);

      // Dead items when asked: as dead-letter retry does (attempts reset, deadAt cleared).
      expect(await use().requeue(['dead'], BOTH, T0 + 3)).toEqual(['dead']);
      expect(await use().get('dead')).toMatchObject({ state: 'pending', attempts: 0, availableAt: T0 + 3 });
      expect(await use().listDead()).toEqual([]);
      expect((await use().totals()).requeued).toBe(2);
    });

    it('re-checks the filter at the write: an item finished again at another time since it was listed is left', async () => {
      await doneAt(use(), 'a', T0 + 100);
      await doneAt(use(), 'b', T0 + 100);
      const window: FinishedFilter = { ...DONE, before: T0 + 200 };
      const ids = (await listed(use(), window)).map((i) => i.id);
      expect(ids).toEqual(['a', 'b']);
      // Meanwhile 'b' is requeued by someone else and done again later, outside the window.
      await use().requeue(['b'], DONE, T0 + 150);
      await doneAt(use(), 'b', T0 + 300);
      expect(await use().requeue(ids, window, T0 + 400)).toEqual(['a']);
      expect(await use().get('b')).toMatchObject({ state: 'done', doneAt: T0 + 300 });
      expect((await use().totals()).requeued).toBe(2);
    });

    it('a requeued item is found by the next pass and not taken for a deleted file', async () => {
      await doneAt(use(), 'a', T0);
      await use().requeue(['a'], DONE, T0 + 1);
      expect(await use().discover(items('a'), { runId: 'run-2', now: T0 + 2 })).toEqual(['a']);
      expect(await use().forgetUnseen('run-2')).toBe(0);
      expect(await use().get('a')).toMatchObject({ state: 'pending' });
      expect(await use().claimDue({ ...claimOpts({ runId: 'run-2', now: T0 + 2 }), limit: 5 })).toMatchObject([{ id: 'a', attempt: 1 }]);
    });

    it('dead-letter retry counts as a requeue too', async () => {
      await killItem(use(), 'x');
      await killItem(use(), 'y');
      expect(await use().retryDead(['x'], T0)).toBe(1);
      expect(await use().retryDead('all', T0)).toBe(1);
      expect((await use().totals()).requeued).toBe(2);
    });

    it('an empty list moves nothing', async () => {
      expect(await use().requeue([], DONE, T0)).toEqual([]);
      expect((await use().totals()).requeued).toBe(0);
    });
  });

  describe('peek', () => {
    it('returns what a plan needs of the known items among the ids, and nothing of unknown ones', async () => {
      await use().discover([{ id: 'a', size: 5, mtimeMs: 50 }], { runId: 'run-1', now: T0 });
      const claim = await claimOne(use(), 'a');
      await use().complete([claim], T0 + 10);
      const waiting = await claimOne(use(), 'w');
      await use().fail([{ claim: waiting, error: 'x' }], failOpts());
      const got = (await use().peek(['ghost', 'w', 'a'])).sort((x, y) => (x.id < y.id ? -1 : 1));
      expect(got).toEqual([
        { id: 'a', state: 'done', attempts: 1, released: 0, availableAt: T0, doneAt: T0 + 10, claimedSize: 5, claimedMtimeMs: 50 },
        { id: 'w', state: 'pending', attempts: 1, released: 0, availableAt: T0 + 500, doneAt: null, claimedSize: null, claimedMtimeMs: null },
      ]);
      expect(await use().peek([])).toEqual([]);
    });

    it("with the plan's rules, predicts exactly what discovery then finds claimable, under each refresh policy", async () => {
      const policies: Array<RefreshPolicy | undefined> = [undefined, { doneBefore: T0 + 150 }, { onChange: true }, { doneBefore: T0 + 150, onChange: true }];
      for (const [n, refresh] of policies.entries()) {
        const id = (name: string) => `p${n}/${name}`;
        await use().discover([{ id: id('done-early'), size: 1, mtimeMs: 1 }, { id: id('done-late'), size: 1, mtimeMs: 1 }, { id: id('dead'), size: 1, mtimeMs: 1 }], {
          runId: 'run-1', now: T0,
        });
        const early = await use().claim([id('done-early')], claimOpts());
        await use().complete(early, T0 + 100);
        const late = await use().claim([id('done-late')], claimOpts());
        await use().complete(late, T0 + 200);
        const dead = await use().claim([id('dead')], claimOpts());
        await use().fail(dead.map((claim) => ({ claim, error: 'x' })), failOpts({ retry: { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 } }));
        await claimOne(use(), id('held'));
        const waiting = await claimOne(use(), id('waiting'));
        await use().fail([{ claim: waiting, error: 'x' }], failOpts());
        await use().discover(items(id('pending')), { runId: 'run-1', now: T0 });
        // What the next scan finds: the dead and the late-done item changed on disk.
        const found: DiscoveredItem[] = [
          { id: id('done-early'), size: 1, mtimeMs: 1 },
          { id: id('done-late'), size: 2, mtimeMs: 1 },
          { id: id('dead'), size: 1, mtimeMs: 9 },
          { id: id('held') },
          { id: id('waiting') },
          { id: id('pending') },
          { id: id('new') },
        ];
        const now = T0 + 300;
        const known = new Map((await use().peek(found.map((f) => f.id))).map((p) => [p.id, p]));
        const planned = found.filter((f) => ['new', 'pending', 'refresh'].includes(classify(f, known.get(f.id), now, refresh))).map((f) => f.id);
        const claimable = await use().discover(found, { runId: 'run-2', now, refresh });
        expect(claimable, `refresh ${JSON.stringify(refresh)}`).toEqual(planned);
        expect(classify(found[4]!, known.get(id('waiting')), now, refresh)).toBe('retryWaiting');
        expect(classify(found[3]!, known.get(id('held')), now, refresh)).toBe('claimed');
      }
    });

    it('an item never charged that a clock ahead recorded is pending for the plan and claimable at the next discovery; a charged one backs off', async () => {
      // Written by a run whose clock was an hour ahead: each one's available_at is in the future.
      const ahead = T0 + 3_600_000;
      const at = { now: ahead };
      await use().discover(items('new', 'handed', 'charged'), { runId: 'run-1', now: ahead });
      const [handed] = await use().claim(['handed'], claimOpts(at));
      await use().release([handed!], ahead, 'drained');
      const [charged] = await use().claim(['charged'], claimOpts(at));
      await use().fail([{ claim: charged!, error: 'x' }], failOpts(at));
      // The next run's clock is right.
      const now = T0 + 300;
      const found = items('new', 'handed', 'charged');
      const known = new Map((await use().peek(found.map((f) => f.id))).map((p) => [p.id, p]));
      expect(found.map((f) => classify(f, known.get(f.id), now, undefined))).toEqual(['pending', 'pending', 'retryWaiting']);
      expect(await use().discover(found, { runId: 'run-2', now })).toEqual(['new', 'handed']);
      // The pass's sweep takes them too, the charged one still backing off.
      const claims = await use().claimDue({ ...claimOpts({ now }), runId: 'run-2', limit: 10 });
      expect(claims.map((c) => c.id).sort()).toEqual(['handed', 'new']);
    });
  });
}
