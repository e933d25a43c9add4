/**
 * SIGTERM on `cronsafe run` while another process holds the SQLite ledger's write lock as the
 * run opens it (an operator's `sqlite3` shell in a transaction, another tool): the open waited
 * for the lock inside SQLite, which stops Node's event loop, for the whole busy wait (5 s),
 * and the run then failed, exit 1 ("database is locked"), which counts toward the Job's
 * backoffLimit, though it had been told to stop before it claimed anything. A stop while
 * the run lock is being taken drains (75, docs/operations.md); so does this one now: the open
 * waits in slices and the signal ends the wait between two, nothing claimed or charged.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runCli, spawnCli, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/** The lock file names its holder (`host:pid:runId@name`) once the run has taken it, just before it opens the ledger. */
function lockHeldBy(lockFile: string, pid: number): boolean {
  try {
    return readFileSync(lockFile, 'utf8').includes(`:${pid}:`);
  } catch {
    return false;
  }
}

describe('a run stopped while another process holds the SQLite ledger write lock', () => {
  it('SIGTERM drains it (75) with nothing claimed, never "database is locked"; the next run does the item', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    writeFileSync(path.join(ws.source, 'b.txt'), 'b');
    const holder = new Database(ws.db);
    holder.exec('BEGIN IMMEDIATE');
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    try {
      await until(() => lockHeldBy(path.join(ws.state, 'cronsafe.lock'), run.child.pid!), 'the run to take its lock and open the ledger');
      run.child.kill('SIGTERM');
      const exit = await run.exited;
      expect(exit.code, run.stderr()).toBe(75);
      expect(run.stderr()).toContain('stopped by SIGTERM while another connection held the ledger');
      expect(run.stderr()).toContain('nothing was claimed');
      expect(run.stderr()).not.toContain('database is locked');
    } finally {
      run.child.kill('SIGKILL');
      holder.exec('ROLLBACK');
      holder.close();
    }
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    const db = new Database(ws.db, { readonly: true });
    // Done in one attempt: the stopped run charged nothing.
    expect(db.prepare(`SELECT state, attempts FROM items WHERE id = 'b.txt'`).get()).toEqual({ state: 'done', attempts: 1 });
    db.close();
  }, 60_000);
});
