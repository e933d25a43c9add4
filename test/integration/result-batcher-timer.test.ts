import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Claim } from '../../src/ledger/types.js';
import { ResultBatcher, type AttemptOutcome } from '../../src/runner/results.js';
import { discoverAndClaim, items, T0 } from '../contract/ledger-fixtures.js';

const root = mkdtempSync(join(tmpdir(), 'cronsafe-batcher-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// The batcher keeps one maxDelayMs timer and re-arms it per batch (results.ts): a result
// queued after a batch went out with a claim must still be written on its own, with no
// claim or flush to carry it (the last attempts of a pass, a drain).
describe('ResultBatcher: results no claim carries', () => {
  it('are written after maxDelayMs, batch after batch, also after one went out with a claim', async () => {
    const ledger = await openSqliteLedger(join(root, 'ledger.db'));
    try {
      const opts = { owner: 'me', runId: 'r1', now: T0, leaseMs: 60_000 };
      const claims = await discoverAndClaim(ledger, items('a', 'b', 'c', 'd'), opts);
      expect(claims.map((c) => c.id).sort()).toEqual(['a', 'b', 'c', 'd']);
      const byId = new Map(claims.map((c) => [c.id, c]));
      const written = new Map<string, () => void>();
      const seen: [string, AttemptOutcome][] = [];
      const batcher = new ResultBatcher(ledger, pino({ level: 'silent' }), {
        now: () => T0 + 1,
        maxBatch: 100,
        maxDelayMs: 20,
        onError: (err) => {
          throw err;
        },
        onOutcome: (c: Claim, outcome) => {
          seen.push([c.id, outcome]);
          written.get(c.id)?.();
        },
      });
      const writtenOnItsOwn = (id: string) =>
        new Promise<void>((resolve) => {
          written.set(id, resolve);
          batcher.complete(byId.get(id)!);
        });
      // By the timer alone.
      await writtenOnItsOwn('a');
      // With a claim (nothing left to claim): the timer armed for it must not fire for nothing ...
      batcher.complete(byId.get('b')!);
      const claimed = await batcher.flushAndClaim([], () => ({ ...opts, now: T0 + 1 }));
      expect(claimed.claims).toEqual([]);
      // ... and the next results are written by it again, twice.
      await writtenOnItsOwn('c');
      await writtenOnItsOwn('d');
      expect(seen).toEqual([
        ['a', 'succeeded'],
        ['b', 'succeeded'],
        ['c', 'succeeded'],
        ['d', 'succeeded'],
      ]);
      expect((await ledger.counts()).done).toBe(4);
    } finally {
      await ledger.close();
    }
  });
});
