import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { DiscoveredItem } from '../../src/ledger/types.js';
import { dryRun } from '../../src/run/dry-run.js';
import { planPass } from '../../src/runner/plan.js';

/**
 * `cronsafe plan` while a run is active (it answers while a run holds the lock): the run
 * writes rows while the plan scans (a discovery, a hand-back), with available_at at the
 * run's clock, later than the plan's start. Through the CLI, a plan during a 20,000-item
 * run listed ~1,000 items as retry-waiting (a backoff none of them had: no handler had
 * failed) and gave a `nextRetryAt` a few milliseconds after its start; the next plan had them
 * pending again. A pending row is due by the time it was read.
 */
const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-plan-live-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const RUN = 'host:1:run-live';
const RETRY = { maxAttempts: 5, backoffMs: 30_000, backoffMaxMs: 3_600_000 };

function setup(name: string, files: string[]) {
  const dir = path.join(root, name);
  mkdirSync(path.join(dir, 'src'), { recursive: true });
  for (const f of files) writeFileSync(path.join(dir, 'src', f), f);
  const file = path.join(dir, 'cronsafe.yaml');
  const db = path.join(dir, 'state', 'cronsafe.db');
  writeFileSync(
    file,
    [
      'name: live',
      `source: {directory: ${path.join(dir, 'src')}}`,
      'handler: {command: ["/bin/true"]}',
      `output: {directory: ${path.join(dir, 'out')}}`,
      `state: {sqlite: ${db}}`,
      `lock: {path: ${path.join(dir, 'state', 'cronsafe.lock')}}`,
      '',
    ].join('\n'),
  );
  mkdirSync(path.dirname(db), { recursive: true });
  return { config: loadConfig(file), db };
}

/** A clock reading strictly after `t`. */
function after(t: number): number {
  let now = Date.now();
  while (now <= t) now = Date.now();
  return now;
}

describe('plan against a ledger a running pass writes meanwhile (real SQLite)', () => {
  it('an item the run discovers while the plan scans is pending, not retry-waiting; a real backoff still is', async () => {
    const { config, db } = setup('mid-scan', []);
    const run = await openSqliteLedger(db, { job: 'live' });
    const reader = await openSqliteLedger(db, { job: 'live' });
    try {
      // A failure with the default backoff: retry-waiting for 15 to 30 s.
      await run.discover([{ id: 'failed' }], { runId: RUN, now: Date.now() });
      const [claim] = await run.claim(['failed'], { owner: RUN, runId: RUN, now: Date.now(), leaseMs: 90_000 });
      await run.fail([{ claim: claim!, error: 'boom' }], { now: Date.now(), retry: RETRY });
      const planStart = Date.now();
      // The plan's scan: the run records `fresh` before the plan reads the ledger about it.
      async function* source(): AsyncGenerator<DiscoveredItem> {
        await run.discover([{ id: 'fresh' }], { runId: RUN, now: after(planStart) });
        yield { id: 'fresh' };
        yield { id: 'failed' };
      }
      const plan = await planPass({ config, ledger: reader, now: planStart, clock: Date.now, limit: 10, source: source() });
      expect(plan.groups.pending).toEqual({ count: 1, first: ['fresh'] });
      expect(plan.groups.retryWaiting).toEqual({ count: 1, first: ['failed'] });
      expect(plan.wouldAttempt).toBe(1);
      expect(plan.nextRetryAt).toBeGreaterThan(planStart + 10_000);
    } finally {
      await reader.close();
      await run.close();
    }
  });

  it('dryRun (cronsafe plan): a row the run wrote after the plan began is judged at the time it was read', async () => {
    const { config, db } = setup('dry-run', ['fresh', 'failed']);
    const run = await openSqliteLedger(db, { job: 'live' });
    try {
      await run.discover([{ id: 'failed' }], { runId: RUN, now: Date.now() });
      const [claim] = await run.claim(['failed'], { owner: RUN, runId: RUN, now: Date.now(), leaseMs: 90_000 });
      await run.fail([{ claim: claim!, error: 'boom' }], { now: Date.now(), retry: RETRY });
      // The plan began (its clock read) before the run discovered `fresh`.
      const planStart = Date.now();
      await run.discover([{ id: 'fresh' }], { runId: RUN, now: after(planStart) });
      const plan = await dryRun(config, { now: planStart, limit: 10 });
      expect(plan.groups.pending).toEqual({ count: 1, first: ['fresh'] });
      expect(plan.groups.retryWaiting).toEqual({ count: 1, first: ['failed'] });
      expect(plan.wouldAttempt).toBe(1);
    } finally {
      await run.close();
    }
  });

  it('items the run discovers after the plan read them as new are not counted as gone; a vanished pending item still is', async () => {
    const { config, db } = setup('discovered-meanwhile', []);
    const run = await openSqliteLedger(db, { job: 'live' });
    const reader = await openSqliteLedger(db, { job: 'live' });
    try {
      // Pending in the ledger, its file deleted since: the pass would forget it.
      await run.discover([{ id: 'vanished' }], { runId: 'host:1:run-before', now: Date.now() });
      // The plan reads a first batch (256 items, unknown: new); the run then records them.
      const first = Array.from({ length: 256 }, (_, i) => ({ id: `n${String(i).padStart(3, '0')}` }));
      async function* source(): AsyncGenerator<DiscoveredItem> {
        yield* first;
        await run.discover(first, { runId: RUN, now: Date.now() });
        yield { id: 'last' };
      }
      const plan = await planPass({ config, ledger: reader, now: Date.now(), clock: Date.now, limit: 10, source: source() });
      expect(plan.groups.new.count).toBe(257);
      // Before: 257 (the 256 the run found meanwhile, pending at the end, and `vanished`).
      expect(plan.gone).toBe(1);
    } finally {
      await reader.close();
      await run.close();
    }
  });
});
