/**
 * `cronsafe daemon` on PostgreSQL, SIGTERMed during a pass while the database is stopped:
 * the drain could not write the ledger (the item's result, the run's end), the pass ended
 * `failed` and the daemon exited 1 ("state store unavailable"), counted by a supervisor as a
 * failure, though the outage alone never ends the daemon and the stop asked for a drain. It
 * is the drain's exit now, 75 (DESIGN.md: drained on SIGTERM with work left), as the drain's
 * last resort gives when the ledger's retries outlast the grace period: `run finished` says
 * `drained` with the store's error, `daemon stopped` says `drained`.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase, writeGatedJob } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe daemon SIGTERMed during a pass while PostgreSQL is down', () => {
  const db = usePostgresDatabase('daemon_stop_outage');

  it('exits 75 (drained), not 1: the drain could not write the ledger, what it left is taken back after its lease', async () => {
    const ws = workspace({}, { 'a.txt': 'a' });
    const { started, go } = writeGatedJob(ws, db.url, ['schedule: {cron: "0 0 1 1 *", timeZone: UTC}']);
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 120_000 });
    try {
      await daemon.waitFor((l) => l.msg === 'run started', 30_000);
      await until(() => existsSync(started), 'the handler to start');
      await db.server.halt();
      try {
        daemon.child.kill('SIGTERM');
        await daemon.waitFor((l) => l.msg === 'drain: stopped claiming; in-flight items may finish');
        writeFileSync(go, '');
        const { code } = await daemon.exited;
        // Under the old code: 1, `run finished` failed, `daemon stopped` failed.
        expect(code, daemon.stderr()).toBe(75);
      } finally {
        await db.server.start();
      }
    } finally {
      daemon.child.kill('SIGKILL');
    }
    const finished = daemon.lines.find((l) => l.msg === 'run finished');
    expect(finished).toMatchObject({ outcome: 'drained', exitCode: 75 });
    expect(JSON.stringify(finished?.err)).toMatch(/ECONNREFUSED|the database system is shutting down|terminating connection/);
    expect(daemon.lines.find((l) => l.msg === 'daemon stopped')).toMatchObject({ result: 'drained' });
    expect(daemon.stderr()).toMatch(/^cronsafe: drained without the state store: .*; what the drain could not write is taken back after its lease$/m);
    expect(daemon.stderr()).not.toContain('run failed');
    expect(daemon.stderr()).not.toContain('the drain did not end');
  }, 180_000);
});
