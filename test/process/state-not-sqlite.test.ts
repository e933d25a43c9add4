/**
 * `state.sqlite` naming a file that is not an SQLite database at all: another job's lock
 * file (a config whose `lock.path` is this job's ledger path, run first), or a text file
 * (the config itself). SQLite writes nothing to it, but `run`, `status` and the other
 * commands exited 1 with "file is not a database", naming no key, and `validate` said OK.
 * It is a config error now, exit 78 naming state.sqlite, as another program's SQLite
 * database already was; the file is left as it is.
 */
import { closeSync, openSync, readFileSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, workspace } from '../helpers/cli.js';

const COMMANDS = [['validate'], ['run'], ['status'], ['plan'], ['dead-letter', 'list'], ['requeue', '--all']];

describe('state.sqlite that is not an SQLite database', () => {
  it("another job's lock file there: exit 78 naming state.sqlite and the job holding it, the lock file untouched", async () => {
    const ledger = workspace({ name: 'job-a', handler: { command: ['true'] } }, { 'a.txt': 'a' });
    // Job b's lock.path is job a's ledger path; b runs first and leaves its holder line there.
    const other = workspace({ name: 'job-b', handler: { command: ['true'] }, lock: { path: ledger.db } }, { 'b.txt': 'b' });
    const b = await runCli(['run', '-c', other.configPath]);
    expect(b.code, b.stderr).toBe(0);
    const lockText = readFileSync(ledger.db, 'utf8');
    expect(lockText).toMatch(/@job-b\n$/);
    for (const args of COMMANDS) {
      const r = await runCli([...args, '-c', ledger.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`${ledger.configPath}: state.sqlite: ${ledger.db} is not an SQLite database (it is a run lock file, last held by `);
      expect(r.stderr).toContain("@job-b: another job's lock.path?), not a cronsafe ledger; nothing was written to it");
    }
    expect(readFileSync(ledger.db, 'utf8')).toBe(lockText);
  }, 60_000);

  it('a text file there (the config itself): exit 78 naming state.sqlite, the file untouched', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    configure(ws, { state: { sqlite: ws.configPath } });
    const text = readFileSync(ws.configPath, 'utf8');
    for (const args of COMMANDS) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.sqlite: ${ws.configPath} is not an SQLite database (its first bytes are not an SQLite header), not a cronsafe ledger`);
    }
    expect(readFileSync(ws.configPath, 'utf8')).toBe(text);
  }, 60_000);

  // state.sqlite may be a link (its file is followed, as SQLite follows it); one to a text
  // file was told apart from a damaged ledger without following it, so it said exit 1 "file
  // is not a database", naming no key, where the same file named directly is exit 78.
  it('a link to a text file there: exit 78 naming state.sqlite, as the file named directly is; the file untouched', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const notes = path.join(ws.dir, 'notes.txt');
    writeFileSync(notes, 'just some notes\n');
    const link = path.join(ws.dir, 'ledger.db');
    symlinkSync(notes, link);
    configure(ws, { state: { sqlite: link } });
    for (const args of [['run'], ['status']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.sqlite: ${link} is not an SQLite database (its first bytes are not an SQLite header), not a cronsafe ledger`);
    }
    expect(readFileSync(notes, 'utf8')).toBe('just some notes\n');
  }, 60_000);

  // Its own ledger, its header damaged (a torn write, a disk error): SQLite says "file is not
  // a database" as for a text file. That is the state store unusable, exit 1 as a damaged page
  // of it is, never "not a cronsafe ledger ... point state.sqlite at a file of cronsafe's
  // own", which sent the operator to a new ledger: every item done would be run again.
  it.each([
    ['its first bytes overwritten', 0, 'XXXX'],
    ['its page size field damaged (the SQLite header intact)', 16, '\x00\x03'],
  ])("this job's own ledger with a damaged header (%s): exit 1, not told it is no ledger", async (_what, at, bytes) => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    const fd = openSync(ws.db, 'r+');
    writeSync(fd, Buffer.from(bytes, 'latin1'), 0, bytes.length, at);
    closeSync(fd);
    const damaged = readFileSync(ws.db);
    for (const args of [['run'], ['status']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(`state store unavailable (sqlite ${ws.db}): file is not a database`);
      expect(r.stderr).not.toContain('not a cronsafe ledger');
    }
    expect(readFileSync(ws.db).equals(damaged)).toBe(true);
  }, 60_000);
});
