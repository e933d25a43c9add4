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
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe daemon SIGTERMed during a pass while PostgreSQL is down', () => {
  const db = usePostgresDatabase('daemon_stop_outage');

  it('exits 75 (drained), not 1: the drain could not write the ledger, what it left is taken back after its lease', async () => {
    const ws = workspace({}, { 'a.txt': 'a' });
    const started = path.join(ws.dir, 'started');
    const go = path.join(ws.dir, 'go');
    // A handler that runs until the test lets it end, after the stop: its result then has a
    // ledger to reach only if the database is up. The drain's grace is long, so that the
    // ledger's retries (30 s) end the pass, not the last resort.
    writeFileSync(
      ws.configPath,
      [
        'name: test-job',
        `source: {directory: ${ws.source}}`,
        `output: {directory: ${ws.out}}`,
        `state: {postgres: "${db.url}"}`,
        `lock: {path: ${path.join(ws.state, 'cronsafe.lock')}}`,
        `handler: {command: ["/bin/sh", "-c", "touch '${started}'; while [ ! -e '${go}' ]; do sleep 0.05; done"]}`,
        'schedule: {cron: "0 0 1 1 *", timeZone: UTC}',
        'drain: {gracePeriodSeconds: 300, marginSeconds: 5}',
      ].join('\n'),
    );
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
