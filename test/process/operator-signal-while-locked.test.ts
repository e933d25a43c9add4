/**
 * Ctrl-C on `cronsafe dead-letter retry` or `requeue` while another process holds the SQLite
 * ledger's write lock (a run writing, an `sqlite3` shell in a transaction): the command
 * waited for the lock inside SQLite, which stops Node's event loop, so the signal was handled
 * only when the whole busy wait (5 s) was over; it then said both `database is locked` and
 * `interrupted by SIGINT`. Commands with nothing to drain end at once on a signal
 * (docs/operations.md): an operator's write command now waits for the lock in slices, as the
 * run's connection does, and the signal ends it between two, with only the interrupted line.
 */
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runCli, spawnCli, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/** The process's main thread is asleep in a system call that sleeps (SQLite's busy handler sleeps so). */
function sleepingInSyscall(pid: number): boolean {
  try {
    const nr = readFileSync(`/proc/${pid}/syscall`, 'utf8').split(' ')[0];
    // x86-64 nanosleep (35), clock_nanosleep (230); aarch64 nanosleep (101), clock_nanosleep (115).
    return process.arch === 'arm64' ? nr === '101' || nr === '115' : nr === '35' || nr === '230';
  } catch {
    return false;
  }
}

describe.skipIf(process.platform !== 'linux')('an operator command interrupted while the SQLite ledger is locked by another process', () => {
  for (const args of [['dead-letter', 'retry', '--all'], ['dead-letter', 'retry', 'bad.txt'], ['requeue', '--all', '--include-dead']]) {
    it(`${args.join(' ')}: Ctrl-C ends it at once (130), moving nothing, never "database is locked"`, async () => {
      const ws = workspace({ handler: { command: ['false'] }, retry: { maxAttempts: 1, backoffSeconds: 0 } }, { 'bad.txt': 'x' });
      expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
      const holder = new Database(ws.db);
      holder.exec('BEGIN IMMEDIATE');
      const cmd = spawnCli([...args, '-c', ws.configPath], { timeoutMs: 60_000 });
      try {
        await until(() => sleepingInSyscall(cmd.child.pid!), 'the command to wait for the write lock');
        cmd.child.kill('SIGINT');
        const exit = await cmd.exited;
        expect(exit.code, cmd.stderr()).toBe(130);
        expect(cmd.stderr()).toContain('interrupted by SIGINT');
        expect(cmd.stderr()).not.toContain('database is locked');
      } finally {
        cmd.child.kill('SIGKILL');
        holder.exec('ROLLBACK');
        holder.close();
      }
      const db = new Database(ws.db, { readonly: true });
      expect(db.prepare(`SELECT state FROM items WHERE id = 'bad.txt'`).pluck().get()).toBe('dead');
      db.close();
    }, 60_000);
  }
});
