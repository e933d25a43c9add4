import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Ledger } from '../../src/ledger/types.js';
import { claimOne, claimOpts, failOpts, items, killItem, LEASE_MS, T0, type UseLedger } from './ledger-fixtures.js';
import { metricsReadsContract } from './ledger-contract-metrics.js';
import { recoveryContract } from './ledger-contract-recovery.js';
import { refreshContract } from './ledger-contract-refresh.js';
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
  });
}

function discoveryContract(use: UseLedger): void {
  describe('discoverAndClaim', () => {
    it('claims a new item as attempt 1 with a lease, recording its size and mtime', async () => {
      const claims = await use().discoverAndClaim([{ id: 'a/1.scc', size: 10, mtimeMs: 123 }], claimOpts());
      expect(claims).toEqual([{ id: 'a/1.scc', owner: 'owner-a', attempt: 1, charged: 1 }]);
      expect(await use().get('a/1.scc')).toMatchObject({
        state: 'claimed', owner: 'owner-a', attempts: 1, released: 0, leaseUntil: T0 + LEASE_MS, size: 10, mtimeMs: 123,
      });
    });

    it('is idempotent: rediscovery neither duplicates nor re-claims', async () => {
      await use().discoverAndClaim(items('a', 'b'), claimOpts());
      expect(await use().discoverAndClaim(items('a', 'b', 'a'), claimOpts({ now: T0 + 1 }))).toEqual([]);
      expect(await use().counts()).toEqual({ pending: 0, claimed: 2, done: 0, dead: 0 });
      expect((await use().get('a'))?.attempts).toBe(1);
    });

    it('refreshes size and mtime of known items', async () => {
      await use().discoverAndClaim([{ id: 'a', size: 1, mtimeMs: 1 }], claimOpts({ limit: 0 }));
      await use().discoverAndClaim([{ id: 'a', size: 2, mtimeMs: 2 }], claimOpts({ limit: 0 }));
      expect(await use().get('a')).toMatchObject({ size: 2, mtimeMs: 2, state: 'pending' });
    });

    it('claims at most `limit`; the rest stay pending for the sweep', async () => {
      const claims = await use().discoverAndClaim(items('a', 'b', 'c'), claimOpts({ limit: 1 }));
      expect(claims).toHaveLength(1);
      expect(await use().counts()).toMatchObject({ pending: 2, claimed: 1 });
      const swept = await use().claimDue({ ...claimOpts(), limit: 10 });
      expect(swept.map((c) => c.id).sort()).toEqual(['a', 'b', 'c'].filter((id) => id !== claims[0]?.id));
    });

    it('with limit 0 only discovers; a later call claims the pending items of the batch', async () => {
      expect(await use().discoverAndClaim(items('a', 'b'), claimOpts({ limit: 0 }))).toEqual([]);
      expect(await use().counts()).toEqual({ pending: 2, claimed: 0, done: 0, dead: 0 });
      const claims = await use().discoverAndClaim(items('a', 'b'), claimOpts());
      expect(claims.map((c) => c.attempt)).toEqual([1, 1]);
    });

    it('skips done, dead and claimed items', async () => {
      const done = await claimOne(use(), 'done');
      await use().complete([done], T0);
      await killItem(use(), 'dead');
      await claimOne(use(), 'held', { owner: 'owner-b' });
      const claims = await use().discoverAndClaim(items('done', 'dead', 'held'), claimOpts({ runId: 'run-2', now: T0 + 1e9 }));
      expect(claims).toEqual([]);
      expect(await use().get('held')).toMatchObject({ owner: 'owner-b', attempts: 1 });
    });

    it('does not claim an item before its backoff has passed', async () => {
      const claim = await claimOne(use(), 'a');
      const [out] = await use().fail([{ claim, error: 'x' }], failOpts());
      expect(out).toMatchObject({ result: 'applied', state: 'pending', availableAt: T0 + 500 });
      expect(await use().discoverAndClaim(items('a'), claimOpts({ now: T0 + 499 }))).toEqual([]);
      const again = await use().discoverAndClaim(items('a'), claimOpts({ now: T0 + 500 }));
      expect(again).toEqual([{ id: 'a', owner: 'owner-a', attempt: 2, charged: 2 }]);
    });
  });

  describe('claimDue / nextDueAt (end-of-scan sweep)', () => {
    it("claims only this run's due pending items, earliest first, up to the limit", async () => {
      const claims = await use().discoverAndClaim(items('a', 'b', 'c'), claimOpts());
      const jitter = [0, 0.5, 0.99]; // -> available at +500, +750, +995
      const byId = new Map(claims.map((c) => [c.id, c]));
      for (const [i, id] of ['a', 'b', 'c'].entries()) {
        const claim = byId.get(id);
        if (claim === undefined) throw new Error(`no claim for ${id}`);
        await use().fail([{ claim, error: 'x' }], failOpts({ random: () => jitter[i] ?? 0 }));
      }
      await use().discoverAndClaim(items('other'), claimOpts({ runId: 'run-0', limit: 0 }));
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
