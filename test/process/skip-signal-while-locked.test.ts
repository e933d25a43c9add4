/**
 * A start that finds the run lock held (another run of the job: every overlapping CronJob
 * fire) records its skip in the ledger. With another connection holding the SQLite ledger's
 * write lock (an operator's `sqlite3` shell in a transaction), a SIGTERM meanwhile waited out
 * SQLite's whole busy wait (5 s) for that one event before the start exited. Now the stop
 * ends the wait: exit 0 at once, saying the skip is not recorded.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, finished, spawnCli, spawnCliRaw, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

const GATE = path.join(FIXTURES, 'process/gate-opendir-register.mjs');

describe('a start skipped on the held run lock, stopped while another connection holds the SQLite write lock', () => {
  it('exits 0 at once, saying its skip is not recorded', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const gate = path.join(ws.dir, 'gate');
    mkdirSync(gate);
    // The first run holds the run lock, held at its scan.
    const first = spawnCliRaw(process.execPath, ['--import', GATE, CLI, 'run', '-c', ws.configPath], { env: { GATE_DIR: gate, GATE_MATCH: ws.source } });
    let holder: Database.Database | undefined;
    try {
      await until(() => existsSync(path.join(gate, 'waiting')), 'the first run to begin its scan');
      holder = new Database(ws.db);
      holder.exec('BEGIN IMMEDIATE');
      const second = spawnCli(['run', '-c', ws.configPath]);
      try {
        await second.waitFor((l) => l.msg === 'skipped: another run holds the lock');
        const stopped = Date.now();
        second.child.kill('SIGTERM');
        const exit = await second.exited;
        expect(exit.code, second.stderr()).toBe(0);
        expect(Date.now() - stopped).toBeLessThan(2500);
        expect(finished(second)?.outcome).toBe('skipped-locked');
        expect(second.lines.some((l) => String(l.msg).startsWith('the skipped start is not recorded in the ledger: stopped by SIGTERM'))).toBe(true);
      } finally {
        second.child.kill('SIGKILL');
      }
    } finally {
      first.child.kill('SIGKILL');
      holder?.exec('ROLLBACK');
      holder?.close();
      writeFileSync(path.join(gate, 'open'), '');
      await first.exited;
    }
  }, 60_000);
});
