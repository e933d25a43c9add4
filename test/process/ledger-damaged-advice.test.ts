/**
 * A damaged SQLite ledger (a copy cut short by a full disk, a restore interrupted, bytes of
 * its header overwritten): every run failed with exit 1 and SQLite's own words, "database
 * disk image is malformed" or "file is not a database", which named the file but not what
 * to do, while the CronJob kept failing into its backoffLimit. The line now says it: the
 * ledger is damaged; restore it from a backup (its -wal with it), or move it aside, and
 * what moving it aside costs (every item runs again, the dead letters are forgotten).
 * Nothing is started over silently: the file is left as it is.
 */
import { closeSync, openSync, readFileSync, statSync, truncateSync, writeSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

/** A ledger of `n` done items, made by a real run. */
async function ledgerOf(n: number) {
  const files = Object.fromEntries(Array.from({ length: n }, (_, i) => [`d/item-${i}-with-a-name-long-enough-to-fill-pages.txt`, `${i}`]));
  const ws = workspace({ handler: { command: ['true'] }, log: { level: 'warn' } }, files);
  const r = await runCli(['run', '-c', ws.configPath]);
  expect(r.code, r.stderr).toBe(0);
  return ws;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe('a damaged SQLite ledger: run, status, dead-letter, requeue and plan say what to do, in one line, exit 1, the file untouched', () => {
  it.each([
    ['cut to half its size', (db: string) => truncateSync(db, Math.floor(statSync(db).size / 8192) * 4096), /database disk image is malformed/],
    [
      'its header overwritten',
      (db: string) => {
        const fd = openSync(db, 'r+');
        writeSync(fd, Buffer.from('not a header....\0\0\0\0'), 0, 20, 0);
        closeSync(fd);
      },
      /file is not a database/,
    ],
  ])('%s', async (_what, damage, said) => {
    const ws = await ledgerOf(600);
    damage(ws.db);
    const before = readFileSync(ws.db);
    for (const args of [['run'], ['status'], ['dead-letter', 'list'], ['requeue', '--all', '--dry-run'], ['plan']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^cronsafe: state store unavailable \\(sqlite ${escape(ws.db)}\\): [^\\n]*\\n$`));
      expect(r.stderr).toMatch(said);
      expect(r.stderr).toContain(`the ledger file ${ws.db} is damaged`);
      expect(r.stderr).toMatch(/restore it from a backup/);
      expect(r.stderr).toMatch(/move it aside/);
      expect(r.stderr).toMatch(/dead letters/);
    }
    // validate checks the config, not the ledger's pages (docs/operations.md says so).
    const v = await runCli(['validate', '-c', ws.configPath]);
    expect(v.code, v.stderr).toBe(0);
    expect(readFileSync(ws.db).equals(before)).toBe(true);
  }, 60_000);
});
