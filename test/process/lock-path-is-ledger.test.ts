/**
 * `lock.path` naming the ledger (or one of SQLite's companion files): the lock truncates
 * its file and writes its holder's name into it, and then the flock on the ledger file is
 * refused by the lock's own, so every run wiped the ledger (all item states, dead letters,
 * history) and exited 0 as "skipped-locked", silently, forever. It must be a config error
 * (exit 78, naming lock.path) for run and validate, with the ledger left as it was.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, statusJson, workspace } from '../helpers/cli.js';

describe('lock.path on the ledger file', () => {
  it.each([
    ['the ledger itself', ''],
    ['its write-ahead log', '-wal'],
    ['its start journal', '-starts'],
  ])('%s: exit 78 naming lock.path; the ledger is untouched', async (_name, suffix) => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    const before = readFileSync(ws.db);
    configure(ws, { lock: { path: `${ws.db}${suffix}` } });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/lock\.path: .*state\.sqlite/);
    }
    expect(statSync(ws.db).size).toBe(before.length);
    configure(ws, { lock: { path: `${ws.state}/cronsafe.lock` } });
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1 });
  }, 60_000);

  it('a file of the user\'s (data a run did not write): exit 78 naming lock.path, the file untouched; an empty file is a lock file', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const mine = path.join(ws.dir, 'notes.txt');
    const data = 'my notes: do not lose\n';
    writeFileSync(mine, data);
    configure(ws, { lock: { path: mine } });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/lock\.path: .*notes\.txt holds 22 bytes, not a cronsafe lock/);
    }
    expect(readFileSync(mine, 'utf8')).toBe(data);
    // Emptied (or made by `touch` / flock(1)), it is a lock file: the run takes it and writes its name.
    writeFileSync(mine, '');
    const ok = await runCli(['run', '-c', ws.configPath]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(readFileSync(mine, 'utf8')).toMatch(/^[^\s:]+:\d+:\S+\n$/);
    // The holder line the last run left is no obstacle to the next.
    const again = await runCli(['run', '-c', ws.configPath]);
    expect(again.code, again.stderr).toBe(0);
  }, 60_000);
});
