import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { LedgerViewReader } from '../../src/metrics/ledger-view.js';
import { createMetrics } from '../../src/metrics/registry.js';
import { memoryLogger } from '../helpers/log.js';
import { parseMetrics, value } from '../helpers/prom.js';

const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-requeue-metrics-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('cronsafe_items_requeued_total (real SQLite ledger)', () => {
  it('counts requeues and dead-letter retries from the ledger, so a new pod reads the same total', async () => {
    const ledger = await openSqliteLedger(path.join(root, 'state', 'j.db'));
    const now = Date.now();
    const ids = ['a', 'b', 'c'];
    await ledger.discover(ids.map((id) => ({ id })), { runId: 'r', now });
    const claims = await ledger.claim(ids, { owner: 'o', runId: 'r', now, leaseMs: 60_000 });
    await ledger.complete(claims.filter((c) => c.id !== 'c'), now);
    await ledger.fail(claims.filter((c) => c.id === 'c').map((claim) => ({ claim, error: 'x' })), { now, retry: { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 } });
    await ledger.requeue(['a', 'b'], { states: ['done'] }, now + 1);
    await ledger.retryDead('all', now + 2);

    const scrape = async () => {
      const view = new LedgerViewReader(ledger, memoryLogger().log);
      const { registry } = createMetrics({ job: 'j', read: () => view.read() }, 'ledger');
      return parseMetrics(await registry.metrics());
    };
    expect(value(await scrape(), 'cronsafe_items_requeued_total', { job: 'j' })).toBe(3);
    // A requeue that finds nothing to move leaves the total as it is.
    await ledger.requeue(['a'], { states: ['done'] }, now + 3);
    expect(value(await scrape(), 'cronsafe_items_requeued_total', { job: 'j' })).toBe(3);
    await ledger.close();
  });
});
