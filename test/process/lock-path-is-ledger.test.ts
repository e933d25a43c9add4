/**
 * `lock.path` naming the ledger (or one of SQLite's companion files): the lock truncates
 * its file and writes its holder's name into it, and then the flock on the ledger file is
 * refused by the lock's own, so every run wiped the ledger (all item states, dead letters,
 * history) and exited 0 as "skipped-locked", silently, forever. It must be a config error
 * (exit 78, naming lock.path) for run and validate, with the ledger left as it was.
 */
import { readFileSync, statSync } from 'node:fs';
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
});
