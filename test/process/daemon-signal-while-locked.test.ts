/**
 * SIGTERM on `cronsafe daemon` while another process holds the SQLite ledger's write lock as
 * the daemon opens it at start-up (an operator's `sqlite3` shell in a transaction): the open
 * waited for the lock inside SQLite, which stops Node's event loop, for the whole busy wait
 * (5 s), and the daemon then failed, exit 1 ("database is locked"), for a stop asked before
 * it. As a run's open does (run-signal-while-locked.test.ts), it now waits in slices and the
 * signal ends the wait: `daemon stopped`, exit 0, no pass run.
 */
import { readdirSync, readlinkSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runCli, spawnCli, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/** Whether process `pid` has `file` open: the daemon's open has begun (and waits for the lock). */
function hasOpen(pid: number, file: string): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === file;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

describe('a daemon stopped while another process holds the SQLite ledger write lock at start-up', () => {
  it('SIGTERM stops it (exit 0, daemon stopped) at once, never "database is locked"', async () => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '0 0 1 1 *' } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const holder = new Database(ws.db);
    holder.exec('BEGIN IMMEDIATE');
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    try {
      await until(() => hasOpen(daemon.child.pid!, ws.db), 'the daemon to open the ledger');
      const signalled = Date.now();
      daemon.child.kill('SIGTERM');
      const exit = await daemon.exited;
      expect(exit.code, daemon.stderr()).toBe(0);
      expect(daemon.stderr()).not.toContain('database is locked');
      expect(daemon.lines.find((l) => l.msg === 'daemon stopped')).toMatchObject({ signal: 'SIGTERM' });
      // Well inside SQLite's busy wait (5 s), which it used to sit out.
      expect(Date.now() - signalled).toBeLessThan(4000);
    } finally {
      daemon.child.kill('SIGKILL');
      holder.exec('ROLLBACK');
      holder.close();
    }
  }, 60_000);
});
