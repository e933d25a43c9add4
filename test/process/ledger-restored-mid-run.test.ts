/**
 * The ledger file replaced under a live run by an older copy (a volume snapshot restored
 * with `mv`, rsync or `kubectl cp`, which all put a new file at the path): the run sees its
 * ledger replaced and drains (exit 75), as a removed one. But SQLite keeps the write-ahead
 * log by the ledger's path (`<ledger>-wal`), and a connection whose file was moved or
 * unlinked neither checkpoints nor removes it at close: the run's log, full of pages of
 * the file it had open, stayed beside the restored copy, and the next open of that copy
 * read its pages through it. The restore silently did not happen (the runs and items the
 * copy predates were back), or, on a ledger larger than the pages the run touched, the two
 * files' pages mixed into a damaged database.
 */
import { copyFileSync, mkdirSync, renameSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, runCli, statusJson, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';

const NOOP_MODULE = path.join(FIXTURES, 'process/noop-module.mjs');

describe('the ledger replaced by an older copy while a run holds it', () => {
  it('the run drains (75) and leaves the copy as restored: its write-ahead log is not applied to it', async () => {
    const ws = workspace({ handler: { command: ['true'] }, log: { level: 'info' } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    // Yesterday's copy: one item done, one run.
    const snapshot = path.join(ws.dir, 'snapshot.db');
    copyFileSync(ws.db, snapshot);
    const restore = `cp "$0" "$1.new" && mv "$1.new" "$1" && sleep 2.5`;
    copyFileSync(path.join(ws.source, 'a.txt'), path.join(ws.source, 'b.txt'));
    copyFileSync(path.join(ws.source, 'a.txt'), path.join(ws.source, 'c.txt'));
    // b's handler restores the copy, then the run goes on (the drain waits for it).
    configure(ws, { handler: { command: ['sh', '-c', `case "$2" in b.txt) ${restore} ;; esac`, snapshot, ws.db, '{id}'] }, concurrency: 1 });

    const second = await runCli(['run', '-c', ws.configPath]);
    expect(second.code, second.stderr).toBe(75);
    expect(finished(second)?.outcome).toBe('drained');
    expect(second.lines.some((l) => String(l.reason).includes('was removed or replaced during the run'))).toBe(true);
    // Nothing of the run's log is left to replay over the copy.
    expect(statSync(`${ws.db}-wal`, { throwIfNoEntry: false })?.size ?? 0).toBe(0);

    // The ledger is the copy: one item done, one run; b and c are new to it.
    const status = await statusJson(ws.configPath);
    expect(status.items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    expect((status as { recentRuns?: unknown[] }).recentRuns).toHaveLength(1);
    const check = await runCli(['status', '-c', ws.configPath]);
    expect(check.code, check.stderr).toBe(0);

    // The next run does b and c (b's output overwritten in place) and keeps a.
    configure(ws, { handler: { command: ['true'] } });
    const third = await runCli(['run', '-c', ws.configPath]);
    expect(third.code, third.stderr).toBe(0);
    expect(finished(third)?.counts).toMatchObject({ succeeded: 2 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  }, 60_000);

  it('renamed away (mv job.db kept.db) mid-run: the renamed file alone keeps what the run recorded', async () => {
    const ws = workspace({ handler: { command: ['true'] }, log: { level: 'info' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const kept = path.join(ws.state, 'kept.db');
    configure(ws, { handler: { command: ['sh', '-c', 'case "$2" in b.txt) mv "$1" "$0" && sleep 2.5 ;; esac', kept, ws.db, '{id}'] }, concurrency: 1 });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(75);
    // Copied away without the log beside the old name (as a backup of the one file is).
    const elsewhere = path.join(ws.dir, 'elsewhere', 'test-job.db');
    mkdirSync(path.dirname(elsewhere));
    copyFileSync(kept, elsewhere);
    configure(ws, { state: { sqlite: elsewhere } });
    const status = await statusJson(ws.configPath);
    expect(status.items.done).toBeGreaterThanOrEqual(1);
    expect((status as { recentRuns?: unknown[] }).recentRuns).toHaveLength(1);
  }, 60_000);
});

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon: the ledger replaced by an older copy while it idles', () => {
  // The daemon's own connection stays open between passes, so no pass's close is the last
  // one: the log keeps the pass's pages. The copy put at the path then read its pages through
  // that log: the next pass found the items and the run the copy predates already recorded.
  it('the next pass reads the copy as restored: it runs again what the copy predates', async () => {
    // A module handler: under the 60x clock a command handler's spawn helper has a quarter of
    // a real second to start (its 15 s), which a loaded machine does not always give it, and
    // the pass then fails for a reason that is not this test's.
    const ws = workspace({ handler: { module: NOOP_MODULE }, schedule: { cron: '*/15 * * * *', timeZone: 'UTC' }, log: { level: 'info' } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    const snapshot = path.join(ws.dir, 'snapshot.db');
    copyFileSync(ws.db, snapshot);
    copyFileSync(path.join(ws.source, 'a.txt'), path.join(ws.source, 'b.txt'));
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:15:30', { timeoutMs: 90_000 });
    try {
      // The 12:15 occurrence's pass, at the start; the next is 12:30's, a quarter of a minute later.
      const pass = await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
      expect(pass).toMatchObject({ outcome: 'completed', counts: { succeeded: 1 } }); // b
      copyFileSync(snapshot, `${ws.db}.new`);
      renameSync(`${ws.db}.new`, ws.db);
      const next = await daemon.waitFor((l) => l.msg === 'run finished' && l.time !== pass.time, 45_000);
      // The copy knows a alone: b runs again.
      expect(next).toMatchObject({ outcome: 'completed', counts: { succeeded: 1 } });
    } finally {
      daemon.child.kill('SIGTERM');
    }
    await daemon.exited;
    // The copy's run and the last pass: the pass the copy predates is not in it.
    const status = await statusJson(ws.configPath);
    expect(status.items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    expect((status as { recentRuns?: unknown[] }).recentRuns).toHaveLength(2);
  }, 90_000);
});
