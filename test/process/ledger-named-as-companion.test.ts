/**
 * Two jobs in one state directory, one of whose `state.sqlite` is named as a file SQLite
 * keeps beside the other's ledger (`a.db` and `a.db-wal`). The next run of `a.db` deleted
 * the other job's whole ledger (SQLite removes its write-ahead log at close), exit 0, and
 * that job started over with every item new. Now the job named so is refused while the
 * other ledger exists, and the other refuses to open its ledger beside such a database;
 * both exit 78 naming state.sqlite, and no ledger is touched.
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';

function pair() {
  const a = workspace({ name: 'job-a', handler: { command: ['true'] } }, { 'x.txt': 'x', 'y.txt': 'y' });
  const b = workspace({ name: 'job-b', handler: { command: ['true'] }, state: { sqlite: `${a.db}-wal` }, lock: { path: path.join(a.state, 'b.lock') } }, { 'z.txt': 'z' });
  mkdirSync(a.state, { recursive: true });
  return { a, b };
}

describe("a ledger named as another ledger's -wal file", () => {
  it('made after the other: refused (exit 78), the other runs on', async () => {
    const { a, b } = pair();
    expect((await runCli(['run', '-c', a.configPath])).code).toBe(0);
    for (const args of [['validate'], ['run'], ['status']]) {
      const r = await runCli([...args, '-c', b.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.sqlite: ${a.db}-wal is the name of a file kept beside the ledger ${a.db} (its wal file)`);
    }
    expect((await runCli(['run', '-c', a.configPath])).code).toBe(0);
    expect((await statusJson(a.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  }, 60_000);

  it('made first: the other job refuses to open its ledger beside it (exit 78), and it is not deleted', async () => {
    const { a, b } = pair();
    const first = await runCli(['run', '-c', b.configPath]);
    expect(first.code, first.stderr).toBe(0);
    for (const args of [['run'], ['status'], ['validate']]) {
      const r = await runCli([...args, '-c', a.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.sqlite: ${a.db}-wal is an SQLite database (another ledger, named after this one?), not the wal file SQLite keeps beside ${a.db}`);
    }
    expect(existsSync(`${a.db}-wal`)).toBe(true);
    expect((await statusJson(b.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  }, 60_000);
});
