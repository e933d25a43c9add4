import type { Ledger } from '../../src/ledger/types.js';
import { LedgerViewReader } from '../../src/metrics/ledger-view.js';
import { createMetrics } from '../../src/metrics/registry.js';
import { memoryLogger } from './log.js';

// Shared by the retention tests (SQLite and PostgreSQL).

/** The counters a scrape shows (every `_total` sample), read from the ledger as a new pod would. */
export async function metricTotals(ledger: Ledger, now: number): Promise<string[]> {
  const { log } = memoryLogger();
  const view = new LedgerViewReader(ledger, log, () => now);
  const { registry } = createMetrics({ job: 'test-job', read: () => view.read() }, 'ledger');
  const text = await registry.metrics();
  return text.split('\n').filter((l) => /^cronsafe_\w+_total\{/.test(l) || l.startsWith('cronsafe_first_run_timestamp_seconds'));
}

/** `n` items discovered and completed at `at`, in batches as a pass would. */
export async function seedDone(ledger: Ledger, ids: string[], at: number): Promise<void> {
  for (let i = 0; i < ids.length; i += 1000) {
    const batch = ids.slice(i, i + 1000);
    const found = await ledger.discover(batch.map((id) => ({ id })), { runId: 'seed', now: at });
    const claims = await ledger.claim(found, { owner: 'seed', runId: 'seed', now: at, leaseMs: 60_000 });
    await ledger.complete(claims, at);
  }
}

