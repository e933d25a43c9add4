/**
 * Another process holds the SQLite ledger in exclusive locking mode: a `sqlite3` shell (here
 * a better-sqlite3 connection of the test's own process) that ran `PRAGMA
 * locking_mode=EXCLUSIVE` and then read a table. SQLite keeps that lock until the connection
 * closes: every command must say so, naming the file and the holder, with exit 1 (the state
 * store unavailable, DESIGN.md), not that the lock was held "longer than cronsafe waits".
 */
import { realpathSync } from 'node:fs';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';

let holder: Database.Database | undefined;
afterEach(() => {
  holder?.close();
  holder = undefined;
});

const COMMANDS: string[][] = [['run'], ['status'], ['status', '--json'], ['dead-letter', 'list'], ['dead-letter', 'list', '--json'], ['dead-letter', 'retry', '--all'], ['requeue', '--all'], ['plan']];

describe('a ledger another process holds in exclusive locking mode', () => {
  it('every command that opens it says so, naming the file and the holder, exit 1; once closed, all is as before', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    holder = new Database(ws.db);
    holder.pragma('locking_mode = EXCLUSIVE');
    holder.prepare('SELECT count(*) FROM items').get();
    const results = await Promise.all(COMMANDS.map((args) => runCli([...args, '-c', ws.configPath])));
    const file = realpathSync(ws.db);
    COMMANDS.forEach((args, i) => {
      const r = results[i]!;
      const what = `${args.join(' ')}: ${r.stderr}`;
      expect(r.code, what).toBe(1);
      expect(r.stderr, what).toContain(`another process (pid ${process.pid}, `);
      expect(r.stderr, what).toContain(`holds the ledger file ${file} in exclusive locking mode (PRAGMA locking_mode=EXCLUSIVE): SQLite keeps that lock until the connection closes`);
      expect(r.stderr, what).not.toContain('longer than cronsafe waits');
      expect(r.stderr, what).not.toMatch(/\n\s+at /); // no stack
    });
    holder.close();
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    const again = await runCli(['run', '-c', ws.configPath]);
    expect(again.code, again.stderr).toBe(0);
  }, 90_000);
});
