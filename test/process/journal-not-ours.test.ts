/**
 * Something not cronsafe's at the start journal's path (`<state.sqlite>-starts`): a symbolic
 * link planted there, a FIFO or a directory. The run never reads or writes through it (it
 * opens the journal without following links and without blocking), and says so in one line
 * naming state.sqlite with exit 78, as for a foreign lock.path; validate says the same.
 * Before, the run died with "fatal:" and a stack trace (exit 1), and validate said OK.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, statusJson, workspace } from '../helpers/cli.js';

describe("the start journal's path holds something not cronsafe's", () => {
  it.each([
    ['a symbolic link to a file of the user', (file: string, dir: string) => {
      const target = path.join(dir, 'precious.txt');
      writeFileSync(target, 'precious\n');
      symlinkSync(target, file);
      return () => expect(readFileSync(target, 'utf8')).toBe('precious\n');
    }],
    ['a FIFO', (file: string) => {
      execFileSync('mkfifo', [file]);
      return () => {};
    }],
    ['a directory', (file: string) => {
      mkdirSync(file);
      return () => {};
    }],
  ])('%s: validate and run exit 78 naming state.sqlite, one line, nothing claimed', async (_name, plant) => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    writeFileSync(path.join(ws.source, 'b.txt'), 'b');
    const journal = `${ws.db}-starts`;
    const unchanged = plant(journal, ws.dir);
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain('state.sqlite');
      expect(r.stderr).toContain(journal);
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    }
    unchanged();
    rmSync(journal, { recursive: true, force: true });
    // Planted before the first run, with no ledger yet: validate says so too.
    const fresh = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    mkdirSync(path.dirname(fresh.db), { recursive: true });
    const freshJournal = `${fresh.db}-starts`;
    plant(freshJournal, fresh.dir);
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', fresh.configPath]);
      expect(r.code, `${cmd} (no ledger yet): ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(freshJournal);
    }
    const again = await runCli(['run', '-c', ws.configPath]);
    expect(again.code, again.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 2, claimed: 0 });
  }, 60_000);
});

describe("another job's ledger at the start journal's path (its state.sqlite is ours + '-starts')", () => {
  it('validate and run exit 78 naming it; that ledger is neither written nor removed, and its job still runs', async () => {
    const other = workspace({ name: 'other-job', handler: { command: ['true'] } }, { 'x.txt': 'x', 'y.txt': 'y' });
    const ours = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    // Ours: <dir>/jobs; the other job's: <dir>/jobs-starts, where our journal goes.
    const shared = path.join(ours.dir, 'ledgers');
    mkdirSync(shared);
    const ledger = path.join(shared, 'jobs');
    const othersLedger = `${ledger}-starts`;
    configure(ours, { state: { sqlite: ledger } });
    configure(other, { state: { sqlite: othersLedger } });
    const first = await runCli(['run', '-c', other.configPath]);
    expect(first.code, first.stderr).toBe(0);
    const before = readFileSync(othersLedger);
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ours.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr.split('\n')).toEqual([expect.stringContaining(`state.sqlite: cannot use cronsafe's start journal ${othersLedger}: it is not one`), '']);
    }
    // Before: the run took it for its journal, appended to it, emptied it and removed it.
    expect(readFileSync(othersLedger).equals(before)).toBe(true);
    expect((await statusJson(other.configPath)).items).toMatchObject({ done: 2 });
    const again = await runCli(['run', '-c', other.configPath]);
    expect(again.code, again.stderr).toBe(0);
  }, 60_000);
});
