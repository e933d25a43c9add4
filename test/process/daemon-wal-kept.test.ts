/**
 * `cronsafe daemon` keeps its own connection to the SQLite ledger open between passes. Each
 * pass released the flock it takes on the ledger file by closing that descriptor, and a
 * close drops every POSIX lock the process holds on the file, SQLite's own included. A
 * manual `cronsafe run` beside the daemon (or an operator's `sqlite3`) then closed its
 * connection as the last one: SQLite checkpointed and deleted the `-wal` and `-shm` the
 * daemon still had open, and the daemon's next read said "database disk image is malformed"
 * (or "file is not a database"), once, then at every tick, silently running nothing until
 * restarted. The descriptor is now kept open (unlocked) for the process's life.
 */
import path from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

describe('cronsafe daemon beside a manual run on SQLite', () => {
  it('keeps reading and running after the manual run closes the ledger', async () => {
    // A yearly occurrence long past (no graceSeconds: never stale): one pass at start, then
    // only growth passes, each a readiness signal.
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1, growth: { enabled: true, cooldownSeconds: 1 } },
      },
      { 'a.scc': 'a' },
    );
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    const passes = () => daemon.lines.filter((l) => l.msg === 'run finished').length;
    const broken = () => daemon.lines.filter((l) => l.msg === 'daemon: the state store is unavailable; trying again every tick');
    try {
      await until(() => passes() === 1, "the daemon's first pass");
      // Nothing new: this run records itself and closes its connection, the only writer left.
      const manual = await runCli(['run', '-c', ws.configPath]);
      expect(manual.code).toBe(0);
      expect(existsSync(`${ws.db}-wal`)).toBe(true); // the daemon's connection keeps it

      writeFileSync(path.join(ws.source, 'b.scc'), 'b');
      await until(() => passes() === 2 || broken().length > 0, 'a growth pass for b');
      writeFileSync(path.join(ws.source, 'c.scc'), 'c');
      await until(() => passes() === 3 || broken().length > 0, 'a growth pass for c');
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code).toBe(0);
    expect(broken().map((l) => l.err)).toEqual([]);
    expect(daemon.lines.filter((l) => l.msg === 'run finished').map((l) => l.outcome)).toEqual(['completed', 'completed', 'completed']);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  });
});
