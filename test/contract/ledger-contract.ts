import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Ledger } from '../../src/ledger/types.js';
import { claimOne, discoverAndClaim, claimOpts, failOpts, items, killItem, LEASE_MS, T0, type UseLedger } from './ledger-fixtures.js';
import { metricsReadsContract } from './ledger-contract-metrics.js';
import { operatorContract } from './ledger-contract-operator.js';
import { recoveryContract } from './ledger-contract-recovery.js';
import { refreshContract } from './ledger-contract-refresh.js';
import { requeueContract } from './ledger-contract-requeue.js';
import { retentionContract } from './ledger-contract-retention.js';
import { scheduleContract } from './ledger-contract-schedule.js';
import { transitionsContract } from './ledger-contract-transitions.js';

/**
 * The behaviour every Ledger adapter must show, written against the interface only.
 * Each test gets a fresh, empty ledger from `open()` and closes it afterwards.
 *
 *   ledgerContract('sqlite', () => openSqliteLedger(freshFile()));
 */
export function ledgerContract(name: string, open: () => Promise<Ledger>): void {
  describe(`Ledger contract: ${name}`, () => {
    let ledger: Ledger | undefined;
    const use: UseLedger = () => {
      if (ledger === undefined) throw new Error('ledger not open');
      return ledger;
    };
    beforeEach(async () => {
      ledger = await open();
    });
    afterEach(async () => {
      await ledger?.close();
      ledger = undefined;
    });

    discoveryContract(use);
    transitionsContract(use);
    recoveryContract(use);
    metricsReadsContract(use);
    refreshContract(use);
    scheduleContract(use);
    operatorContract(use);
    requeueContract(use);
    retentionContract(use);
  });
}

function discoveryContract(use: UseLedger): void {
  describe('discover', () => {
    it('records new items as pending with their size and mtime, claims nothing, and says they are claimable', async () => {
      const ids = await use().discover([{ id: 'a/1.scc', size: 10, mtimeMs: 123 }, { id: 'b' }], { runId: 'run-1', now: T0 });
      expect(ids).toEqual(['a/1.scc', 'b']);
      expect(await use().get('a/1.scc')).toMatchObject({
        state: 'pending', owner: null, attempts: 0, released: 0, size: 10, mtimeMs: 123,
      });
      expect(await use().counts()).toEqual({ pending: 2, claimed: 0, done: 0, dead: 0 });
    });

    it('is idempotent and returns each id once, in batch order', async () => {
      await use().discover(items('a', 'b'), { runId: 'run-1', now: T0 });
      expect(await use().discover(items('b', 'a', 'b', 'c'), { runId: 'run-1', now: T0 + 1 })).toEqual(['b', 'a', 'c']);
      expect(await use().counts()).toEqual({ pending: 3, claimed: 0, done: 0, dead: 0 });
    });

    it('refreshes size and mtime of known items', async () => {
      await use().discover([{ id: 'a', size: 1, mtimeMs: 1 }], { runId: 'run-1', now: T0 });
      await use().discover([{ id: 'a', size: 2, mtimeMs: 2 }], { runId: 'run-1', now: T0 });
      expect(await use().get('a')).toMatchObject({ size: 2, mtimeMs: 2, state: 'pending' });
    });

    it('leaves out done, dead, claimed and backing-off items', async () => {
      const done = await claimOne(use(), 'done');
      await use().complete([done], T0);
      await killItem(use(), 'dead');
      await claimOne(use(), 'held', { owner: 'owner-b' });
      const waiting = await claimOne(use(), 'waiting');
      await use().fail([{ claim: waiting, error: 'x' }], failOpts());
      const ids = await use().discover(items('done', 'dead', 'held', 'waiting', 'new'), { runId: 'run-2', now: T0 + 1 });
      expect(ids).toEqual(['new']);
      expect(await use().get('held')).toMatchObject({ owner: 'owner-b', attempts: 1 });
    });
  });

  describe('claim (at the slot)', () => {
    it('claims discovered items as attempt 1 with a lease, in the order asked', async () => {
      await use().discover(items('a', 'b', 'c'), { runId: 'run-1', now: T0 });
      const claims = await use().claim(['c', 'a'], claimOpts());
      expect(claims).toEqual([
        { id: 'c', owner: 'owner-a', attempt: 1, charged: 1 },
        { id: 'a', owner: 'owner-a', attempt: 1, charged: 1 },
      ]);
      expect(await use().get('a')).toMatchObject({ state: 'claimed', owner: 'owner-a', attempts: 1, leaseUntil: T0 + LEASE_MS });
      expect(await use().get('b')).toMatchObject({ state: 'pending', attempts: 0 });
    });

    it('leaves out ids no longer claimable: claimed by another, done, unknown', async () => {
      await use().discover(items('a', 'b', 'c'), { runId: 'run-1', now: T0 });
      await use().claim(['a'], claimOpts({ owner: 'owner-b' }));
      await use().complete(await use().claim(['b'], claimOpts()), T0);
      expect(await use().claim(['a', 'b', 'ghost', 'c'], claimOpts())).toEqual([{ id: 'c', owner: 'owner-a', attempt: 1, charged: 1 }]);
      expect(await use().get('a')).toMatchObject({ owner: 'owner-b', attempts: 1 });
    });

    it('does not claim an item before its backoff has passed', async () => {
      const claim = await claimOne(use(), 'a');
      const [out] = await use().fail([{ claim, error: 'x' }], failOpts());
      expect(out).toMatchObject({ result: 'applied', state: 'pending', availableAt: T0 + 500 });
      expect(await use().discover(items('a'), { runId: 'run-1', now: T0 + 499 })).toEqual([]);
      expect(await use().claim(['a'], claimOpts({ now: T0 + 499 }))).toEqual([]);
      expect(await use().discover(items('a'), { runId: 'run-1', now: T0 + 500 })).toEqual(['a']);
      expect(await use().claim(['a'], claimOpts({ now: T0 + 500 }))).toEqual([{ id: 'a', owner: 'owner-a', attempt: 2, charged: 2 }]);
    });
  });

  describe('claimDue / nextDueAt (end-of-scan sweep)', () => {
    it("claims only this run's due pending items, earliest first, up to the limit", async () => {
      const claims = await discoverAndClaim(use(), items('a', 'b', 'c'), claimOpts());
      const jitter = [0, 0.5, 0.99]; // -> available at +500, +750, +995
      const byId = new Map(claims.map((c) => [c.id, c]));
      for (const [i, id] of ['a', 'b', 'c'].entries()) {
        const claim = byId.get(id);
        if (claim === undefined) throw new Error(`no claim for ${id}`);
        await use().fail([{ claim, error: 'x' }], failOpts({ random: () => jitter[i] ?? 0 }));
      }
      await use().discover(items('other'), { runId: 'run-0', now: T0 });
      expect(await use().nextDueAt('run-1')).toBe(T0 + 500);
      expect(await use().claimDue({ ...claimOpts({ now: T0 + 499 }), limit: 10 })).toEqual([]);
      const first = await use().claimDue({ ...claimOpts({ now: T0 + 2000 }), limit: 2 });
      expect(first.map((c) => c.id)).toEqual(['a', 'b']);
      expect(first[0]).toMatchObject({ attempt: 2, charged: 2, owner: 'owner-a' });
      expect(await use().nextDueAt('run-1')).toBe(T0 + 995);
      expect((await use().claimDue({ ...claimOpts({ now: T0 + 2000 }), limit: 10 })).map((c) => c.id)).toEqual(['c']);
      expect(await use().nextDueAt('run-1')).toBeNull();
      expect((await use().get('other'))?.state).toBe('pending');
    });

    it('returns null when the run has seen nothing', async () => {
      expect(await use().nextDueAt('never')).toBeNull();
      expect(await use().claimDue({ ...claimOpts({ runId: 'never' }), limit: 5 })).toEqual([]);
    });
  });

  describe('migrate', () => {
    it('is idempotent and keeps data', async () => {
      await claimOne(use(), 'a');
      await use().migrate();
      await use().migrate();
      expect((await use().get('a'))?.state).toBe('claimed');
    });
  });
}
