/**
 * SIGTERM once the run's start is recorded, before its pass's first claim, while another
 * connection holds the SQLite ledger's write lock (an operator's `sqlite3` shell in a
 * transaction): the pass's first discovery, the stop's record and the run's end each waited
 * SQLite's whole busy wait (5 s), one after the other; the run exited 75 after ~15 s, its end
 * not recorded (`cronsafe status` said running) and nothing said on stderr. Now the stop ends
 * the first two waits (nothing is claimed, nothing to hand back), and the run's end waits for
 * the lock until the drain's deadline or a second signal, and says so when it cannot be recorded.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, runCli, spawnCliRaw, workspace, type Running, type Workspace } from '../helpers/cli.js';
import { ledgerRows } from '../helpers/ledger-sums.js';
import { until } from '../helpers/wait.js';

const GATE = path.join(FIXTURES, 'process/gate-opendir-register.mjs');

/**
 * A run of `ws` held at its pass's scan (its start recorded, its first discovery not written),
 * the ledger's write lock then taken by another connection, the gate opened and the run
 * SIGTERMed. Returns the run and the connection that holds the lock.
 */
async function stoppedBeforeFirstClaim(ws: Workspace): Promise<{ run: Running; holder: Database.Database }> {
  const gate = path.join(ws.dir, 'gate');
  mkdirSync(gate);
  const run = spawnCliRaw(process.execPath, ['--import', GATE, CLI, 'run', '-c', ws.configPath], { env: { GATE_DIR: gate, GATE_MATCH: ws.source } });
  await until(() => existsSync(path.join(gate, 'waiting')), 'the run to begin its scan');
  await run.waitFor((l) => l.msg === 'run started');
  const holder = new Database(ws.db);
  holder.exec('BEGIN IMMEDIATE');
  writeFileSync(path.join(gate, 'open'), '');
  run.child.kill('SIGTERM');
  await run.waitFor((l) => String(l.msg).startsWith('drain: stopped claiming'));
  return { run, holder };
}

/** A workspace whose first run did a.txt; b.txt is new for the run under test. */
async function doneOnce(): Promise<Workspace> {
  const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
  const first = await runCli(['run', '-c', ws.configPath]);
  expect(first.code, first.stderr).toBe(0);
  writeFileSync(path.join(ws.source, 'b.txt'), 'b');
  return ws;
}

describe('a stop after the run started, before its first claim, another connection holding the SQLite write lock', () => {
  it("the lock let go within the drain's budget (16 s after the stop): the run's end is recorded, drained (75)", async () => {
    const ws = await doneOnce();
    const { run, holder } = await stoppedBeforeFirstClaim(ws);
    let releasedAt = Infinity;
    // Past the 15 s the three waits took before, inside the default 25 s (30 s grace, 5 s margin).
    const release = sleep(16_000).then(() => {
      holder.exec('ROLLBACK');
      holder.close();
      releasedAt = Date.now();
    });
    try {
      const exit = await run.exited;
      const exitedAt = Date.now();
      await release;
      expect(exit.code, run.stderr()).toBe(75);
      expect(exitedAt).toBeGreaterThanOrEqual(releasedAt);
      expect(run.stderr()).not.toContain('database is locked');
      expect(run.lines.some((l) => l.msg === 'could not record the end of the run')).toBe(false);
      expect(ledgerRows(ws.db).runs).toEqual(['completed', 'drained']);
    } finally {
      run.child.kill('SIGKILL');
      await release;
    }
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    expect(ledgerRows(ws.db)).toEqual({
      runs: ['completed', 'drained', 'completed'],
      items: [
        { id: 'a.txt', state: 'done', attempts: 1 },
        { id: 'b.txt', state: 'done', attempts: 1 },
      ],
    });
  }, 90_000);

  it("a second signal ends the wait at once: exit 75, saying the run's end is not recorded; the next run marks it died and does each item once", async () => {
    const ws = await doneOnce();
    const { run, holder } = await stoppedBeforeFirstClaim(ws);
    try {
      const second = Date.now();
      run.child.kill('SIGTERM');
      const exit = await run.exited;
      expect(exit.code, run.stderr()).toBe(75);
      expect(Date.now() - second).toBeLessThan(3000);
      expect(run.stderr()).toContain('cronsafe: the end of the run is not recorded in the ledger: another connection held its write lock');
      expect(run.stderr()).toContain('nothing was claimed');
      expect(run.stderr()).not.toContain('the drain did not end within');
    } finally {
      run.child.kill('SIGKILL');
      holder.exec('ROLLBACK');
      holder.close();
    }
    expect(ledgerRows(ws.db).runs).toEqual(['completed', null]);
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    expect(ledgerRows(ws.db)).toEqual({
      runs: ['completed', 'died', 'completed'],
      items: [
        { id: 'a.txt', state: 'done', attempts: 1 },
        { id: 'b.txt', state: 'done', attempts: 1 },
      ],
    });
  }, 60_000);
});
