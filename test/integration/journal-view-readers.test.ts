import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Ledger } from '../../src/ledger/types.js';

/**
 * `cronsafe plan` and `cronsafe requeue --dry-run` read the ledger read-only, as `status`
 * does, and must see a running (or killed) pass's journal as `status` and the real
 * `requeue` do. Through the CLI, after a SIGKILL of a 3,000-item run: status said 312 done
 * and 4 claimed, `requeue --all --dry-run` said 236 (the successes only in the journal were
 * left out) while `requeue --all` then moved 312, and `plan` showed 8 claimed at
 * concurrency 4 (a claim written to the ledger whose success was only in the journal).
 */
const T0 = 1_700_000_000_000;
const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-jv-readers-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const owner = 'host:1:run-live';
const none = { complete: [], fail: [], release: [], gone: [] };
const DONE = { states: ['done'] as const };

async function finishedIds(ledger: Ledger): Promise<string[]> {
  const ids: string[] = [];
  for await (const page of ledger.finishedPages(DONE)) ids.push(...page.map((i) => i.id));
  return ids.sort();
}

describe('read-only readers see the journal as status does', () => {
  it('a success only in the journal is done for peek (plan) and finishedPages (requeue --dry-run), whether its claim was written or not', async () => {
    const file = path.join(root, 'job.db');
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover(['a', 'b', 'c', 'd'].map((id) => ({ id })), { runId: owner, now: T0 });
      const opts = { owner, runId: owner, now: T0 + 10, leaseMs: 90_000 };
      const first = await run.settle(none, T0 + 10, { ids: ['a'], opts });
      await run.get('a'); // a read flushes: a's claim is in the ledger now
      // a succeeds, b and c start; then c succeeds: all of it only in the journal.
      const second = await run.settle({ ...none, complete: first.claims }, T0 + 20, { ids: ['b', 'c'], opts: { ...opts, now: T0 + 20 } });
      await run.settle({ ...none, complete: second.claims.filter((c) => c.id === 'c') }, T0 + 30, { ids: [], opts: { ...opts, now: T0 + 30 } });

      const reader = await openSqliteLedger(file, { readOnly: true });
      try {
        expect(await reader.counts()).toEqual({ pending: 1, claimed: 1, done: 2, dead: 0 }); // status
        const peeked = Object.fromEntries((await reader.peek(['a', 'b', 'c', 'd'])).map((p) => [p.id, p.state]));
        expect(peeked).toEqual({ a: 'done', b: 'claimed', c: 'done', d: 'pending' });
        expect(await finishedIds(reader)).toEqual(['a', 'c']);
        // A time filter applies to them as to written rows: done at T0 + 20 and T0 + 30.
        const after = [];
        for await (const page of reader.finishedPages({ ...DONE, after: T0 + 25 })) after.push(...page.map((i) => i.id));
        expect(after).toEqual(['c']);
      } finally {
        await reader.close();
      }
      // What the real requeue moves (it catches the journal up first): the same two.
      const writer = await openSqliteLedger(file, {});
      try {
        expect(await finishedIds(writer)).toEqual(['a', 'c']);
      } finally {
        await writer.close();
      }
    } finally {
      await run.close();
    }
  });
});
