/**
 * A pass that claims nothing (its items done, or none) and meets another connection holding
 * the SQLite ledger's write lock at its end-of-scan sweep: a stop (SIGTERM) then ends the
 * sweep's claim's wait (Ledger.stopEndsWaits, on until the pass's first claim). Nothing was
 * written and nothing is held: the pass ends as any stopped one. It ended as failed (exit 1, counted toward
 * the Job's backoffLimit): after SQLite's 5 s busy wait, "database is locked".
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { DiscoveredItem, Ledger } from '../../src/ledger/types.js';
import { runPass } from '../../src/runner/pass.js';
import { workspace } from '../helpers/cli.js';
import { memoryLogger } from '../helpers/log.js';

const open: Ledger[] = [];
const holders: Database.Database[] = [];
afterEach(async () => {
  for (const h of holders.splice(0)) {
    if (h.inTransaction) h.exec('ROLLBACK');
    h.close();
  }
  for (const l of open.splice(0)) await l.close();
});

describe("runPass: a stop while the sweep's claim waits for another connection's write lock, nothing claimed", () => {
  it('ends the wait at once, and the pass is not failed', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const config = loadConfig(ws.configPath);
    // The run's connection, as holding-lock.ts opens it and switches the stop on for the pass.
    const ledger = await openSqliteLedger(ws.db, { writeBehind: true });
    open.push(ledger);
    const stop = new AbortController();
    ledger.stopEndsWaits?.(stop.signal);
    const { log, lines } = memoryLogger();
    // An empty scan that, at its end, has another connection take the write lock and the run stopped soon after.
    async function* source(): AsyncGenerator<DiscoveredItem> {
      const holder = new Database(ws.db);
      holders.push(holder);
      holder.exec('BEGIN IMMEDIATE');
      setTimeout(() => stop.abort('SIGTERM'), 300);
      yield* [];
    }
    const began = Date.now();
    const r = await runPass({ config, ledger, handler: { run: async () => undefined }, log, runId: 'run-1', owner: 'owner-1', stop: stop.signal, force: new AbortController().signal, source: source() });
    // Nothing was due: the stop came after the whole scan, so the pass is over (exit 0), not failed.
    expect(r.error).toBeUndefined();
    expect(r.outcome).toBe('completed');
    expect(lines.some((l) => String(l.msg).startsWith('drain: a write waiting for the ledger ended by the stop'))).toBe(true);
    expect(Date.now() - began).toBeLessThan(3000);
  });
});
