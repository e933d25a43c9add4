/**
 * SIGTERM on `cronsafe run` (and a `cronsafe daemon` pass) while another process took the
 * SQLite ledger's write lock after the run had opened it (an operator's `sqlite3` shell in a
 * transaction): the open waits in slices and a stop ends it (run-signal-while-locked), but
 * the start-up writes after it (the reclaim of a dead run's claims, the runs that died, the
 * run's start) each waited SQLite's whole busy wait (5 s) whatever the stop, and the run then
 * failed, exit 1 ("cannot record the start of the run: database is locked"), counted toward
 * the Job's backoffLimit. Now a stop ends their wait too: drained (75), nothing claimed, the
 * run not recorded, and the next run does every item once, attempt 1.
 */
import { mkdirSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, runCli, spawnCli, spawnCliRaw, workspace, type Running, type Workspace } from '../helpers/cli.js';
import { freePort } from '../helpers/prom.js';
import { ledgerRows } from '../helpers/ledger-sums.js';
import { until } from '../helpers/wait.js';

const GATE = path.join(FIXTURES, 'process/gate-import-register.mjs');
const GATED_MODULE = path.join(FIXTURES, 'process/gated-import-module.mjs');

/** Take the ledger's write lock from another connection (as a `sqlite3` shell's BEGIN IMMEDIATE), once the file exists. */
function holdWriteLock(ws: Workspace): Database.Database {
  const holder = new Database(ws.db);
  holder.exec('BEGIN IMMEDIATE');
  return holder;
}

/** The stopped run's exit and lines: drained, nothing claimed, no 'database is locked'. */
async function expectDrained(run: Running): Promise<void> {
  const exit = await run.exited;
  expect(exit.code, run.stderr()).toBe(75);
  expect(run.stderr()).toContain('stopped by SIGTERM while another connection held the ledger');
  expect(run.stderr()).toContain('nothing was claimed, and the run is not recorded in the ledger');
  expect(run.stderr()).not.toContain('database is locked');
}

/**
 * Once the process waits at its gate (`ready` exists), take the ledger's write lock, open the
 * gate and SIGTERM it; then `check` its exit. The process is killed and the lock let go
 * whatever `check` found.
 */
async function stopWhileLocked(ws: Workspace, proc: Running, gate: string, ready: string, what: string, check: () => Promise<void>): Promise<void> {
  let holder: Database.Database | undefined;
  try {
    await until(() => existsSync(path.join(gate, ready)), what);
    holder = holdWriteLock(ws);
    writeFileSync(path.join(gate, 'open'), '');
    proc.child.kill('SIGTERM');
    await check();
  } finally {
    proc.child.kill('SIGKILL');
    holder?.exec('ROLLBACK');
    holder?.close();
  }
}

describe('a stop during the start-up writes, another connection holding the SQLite write lock', () => {
  it('the reclaim waiting: SIGTERM drains the run (75) at once, nothing recorded; the next run does each item once', async () => {
    const port = await freePort();
    const ws = workspace({ handler: { command: ['true'] }, metrics: { port } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    writeFileSync(path.join(ws.source, 'b.txt'), 'b');
    const gate = path.join(ws.dir, 'gate');
    mkdirSync(gate);
    // Held at the metrics' import (the program's ESM chunks, not its script: source maps on): the
    // ledger is open, no start-up write done yet.
    const run = spawnCliRaw(process.execPath, ['--enable-source-maps', '--import', GATE, CLI, 'run', '-c', ws.configPath], { env: { GATE_DIR: gate, GATE_MATCH: 'ledger-view' } });
    await stopWhileLocked(ws, run, gate, 'waiting', 'the run to open its ledger', async () => {
      await expectDrained(run);
    });
    expect(ledgerRows(ws.db).runs).toEqual(['completed']);
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    const rows = ledgerRows(ws.db);
    expect(rows.runs).toEqual(['completed', 'completed']);
    expect(rows.items).toEqual([
      { id: 'a.txt', state: 'done', attempts: 1 },
      { id: 'b.txt', state: 'done', attempts: 1 },
    ]);
  }, 60_000);

  it("the first run ever (no ledger before it), its start waiting: SIGTERM drains it (75); the next run does each item once", async () => {
    const ws = workspace({ handler: { module: GATED_MODULE } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const gate = path.join(ws.dir, 'gate');
    mkdirSync(gate);
    const env = { GATE_DIR: gate };
    // Held at the handler's import: the ledger made, the reclaim done, the run's start not recorded.
    const run = spawnCli(['run', '-c', ws.configPath], { env });
    await stopWhileLocked(ws, run, gate, 'importing', 'the run to import its handler', async () => {
      await expectDrained(run);
    });
    expect(ledgerRows(ws.db)).toEqual({ runs: [], items: [] });
    const next = await runCli(['run', '-c', ws.configPath], { env });
    expect(next.code, next.stderr).toBe(0);
    expect(ledgerRows(ws.db)).toEqual({
      runs: ['completed'],
      items: [
        { id: 'a.txt', state: 'done', attempts: 1 },
        { id: 'b.txt', state: 'done', attempts: 1 },
      ],
    });
    expect(readFileSync(path.join(gate, 'invocations'), 'utf8').split('\n').filter(Boolean).sort()).toEqual(['a.txt 1', 'b.txt 1']);
  }, 60_000);

  it("a daemon's pass, its start waiting: SIGTERM drains the pass as a run's (75), the pass not recorded; a run then does each item once", async () => {
    // A yearly occurrence long past: the daemon runs its pass at start-up.
    const ws = workspace({ handler: { module: GATED_MODULE }, schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const gate = path.join(ws.dir, 'gate');
    mkdirSync(gate);
    const env = { GATE_DIR: gate };
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { env });
    await stopWhileLocked(ws, daemon, gate, 'importing', "the daemon's pass to import its handler", async () => {
      const exit = await daemon.exited;
      // As a stop during any pass with work left (docs/schedule.md): drained, 75.
      expect(exit.code, daemon.stderr()).toBe(75);
      expect(daemon.stderr()).toContain('stopped by SIGTERM while another connection held the ledger');
      expect(daemon.stderr()).not.toContain('database is locked');
      expect(daemon.lines.find((l) => l.msg === 'daemon stopped')).toMatchObject({ result: 'drained', signal: 'SIGTERM' });
    });
    expect(ledgerRows(ws.db)).toEqual({ runs: [], items: [] });
    const next = await runCli(['run', '-c', ws.configPath], { env });
    expect(next.code, next.stderr).toBe(0);
    expect(ledgerRows(ws.db).items).toEqual([
      { id: 'a.txt', state: 'done', attempts: 1 },
      { id: 'b.txt', state: 'done', attempts: 1 },
    ]);
    expect(readFileSync(path.join(gate, 'invocations'), 'utf8').split('\n').filter(Boolean).sort()).toEqual(['a.txt 1', 'b.txt 1']);
  }, 60_000);
});
