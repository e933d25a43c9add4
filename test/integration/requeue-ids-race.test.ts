import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { byIds } from '../../src/commands/requeue.js';
import { openStore } from '../../src/ledger/open.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Ledger } from '../../src/ledger/types.js';
import type { Config } from '../../src/config/types.js';

/**
 * `cronsafe requeue <id>...` during a run: an id whose attempt was running (claimed) is not
 * moved, and the reason printed was the item's state read after the requeue's write. An
 * attempt that ended in between made it "f2528.scc: done" among the ids "not requeued"
 * (exit 1), though done items are what requeue moves; seen through the CLI about once in 40
 * requeues of 6 ids during a 3,000-item run. Here the run's success lands right after the
 * requeue's write, on a real SQLite ledger through the store the command opens.
 */
const T0 = 1_700_000_000_000;
const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-rq-ids-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const owner = 'host:1:run-live';
const none = { complete: [], fail: [], release: [], gone: [] };

describe('requeue <id>... while a run finishes one of them', () => {
  it('says the id was claimed when the requeue met it, not done', async () => {
    const file = path.join(root, 'job.db');
    // The run's own open records its job, as `cronsafe run` does: requeue refuses a ledger no
    // job has named (it would have made it its own).
    const run = await openSqliteLedger(file, { job: 'job' });
    await run.discover(['a', 'b'].map((id) => ({ id })), { runId: owner, now: T0 });
    const opts = { owner, runId: owner, now: T0, leaseMs: 90_000 };
    const { claims } = await run.settle(none, T0, { ids: ['a', 'b'], opts });
    const [a, b] = [claims.find((c) => c.id === 'a')!, claims.find((c) => c.id === 'b')!];
    await run.settle({ ...none, complete: [a] }, T0 + 5);

    const store = openStore({ name: 'job', configPath: path.join(root, 'c.yaml'), state: { sqlite: file } } as unknown as Config);
    const real = await store.openLedger({ operator: true });
    // The run's attempt at b succeeds just after the requeue's write.
    const ledger = new Proxy(real, {
      get(target, prop) {
        const v = Reflect.get(target, prop, target) as unknown;
        if (prop === 'requeue') {
          return async (...args: Parameters<Ledger['requeue']>) => {
            const moved = await target.requeue(...args);
            await run.settle({ ...none, complete: [b] }, T0 + 10);
            return moved;
          };
        }
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    try {
      const out = await byIds(ledger, ['a', 'b'], { states: ['done'] }, { dryRun: false, json: false }, store);
      expect(out.first).toEqual(['a']);
      expect(out.notMoved).toEqual([{ id: 'b', state: 'claimed' }]);
      expect(await run.get('b')).toMatchObject({ state: 'done' });
    } finally {
      await real.close();
      await run.close();
    }
  });
});
