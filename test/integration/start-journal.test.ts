import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { journalPath, readJournal } from '../../src/ledger/sqlite/start-journal.js';

/** The start journal's file under hostile conditions (ledger/sqlite/start-journal.ts). */
const T0 = 1_700_000_000_000;
const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-journal-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => path.join(root, `t${++n}`, 'job.db');
const owner = 'host:1:run';
const opts = { owner, runId: owner, now: T0, leaseMs: 90_000 };
const none = { complete: [], fail: [], release: [], gone: [] };

describe('the start journal', () => {
  it('deleted mid-run: what it held is written into the ledger, and a new file takes the next records', async () => {
    const file = fresh();
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover(['a', 'b', 'c'].map((id) => ({ id })), { runId: owner, now: T0 });
      await run.settle(none, T0, { ids: ['a'], opts });
      unlinkSync(journalPath(file)); // an operator, a cleaner
      await run.settle(none, T0 + 1, { ids: ['b'], opts: { ...opts, now: T0 + 1 } });
      const raw = new Database(file, { readonly: true });
      // a's start was only in the deleted file: written now, not lost.
      expect(raw.prepare("SELECT state, attempts FROM items WHERE id = 'a'").get()).toEqual({ state: 'claimed', attempts: 1 });
      raw.close();
      const again = readJournal(journalPath(file));
      expect(again.starts.map((s) => s.id)).toEqual(['b']);
    } finally {
      await run.close();
    }
    expect(existsSync(journalPath(file))).toBe(false);
  });

  it('a FIFO at its path: readers (status) do not hang, the run fails naming the file', async () => {
    const file = fresh();
    mkdirSync(path.dirname(file), { recursive: true });
    expect(spawnSync('mkfifo', [journalPath(file)]).status).toBe(0);
    expect(readJournal(journalPath(file))).toEqual({ starts: [], done: [] });
    expect(() => readJournal(journalPath(file), true)).toThrow(`cronsafe's start journal ${journalPath(file)}`);
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover([{ id: 'a' }], { runId: owner, now: T0 });
      await expect(run.settle(none, T0, { ids: ['a'], opts })).rejects.toThrow(`cronsafe's start journal ${journalPath(file)}`);
      await expect(run.reclaimOrphans('x', { now: T0, retry: { maxAttempts: 3, backoffMs: 0, backoffMaxMs: 0 } })).rejects.toThrow(journalPath(file));
    } finally {
      await run.close().catch(() => undefined);
    }
  });

  it('a directory at its path: the error names the file; it is never removed', async () => {
    const file = fresh();
    mkdirSync(journalPath(file), { recursive: true });
    const run = await openSqliteLedger(file, { writeBehind: true });
    try {
      await run.discover([{ id: 'a' }], { runId: owner, now: T0 });
      await expect(run.settle(none, T0, { ids: ['a'], opts })).rejects.toThrow(journalPath(file));
    } finally {
      await run.close().catch(() => undefined);
    }
    expect(existsSync(journalPath(file))).toBe(true);
    // Nothing was started: the claim was never journalled, so nothing is charged.
    const raw = new Database(file, { readonly: true });
    expect(raw.prepare("SELECT state, attempts FROM items WHERE id = 'a'").get()).toEqual({ state: 'pending', attempts: 0 });
    raw.close();
  });

  it('sits beside the ledger file a symbolic link points to, as SQLite\'s -wal does', async () => {
    const real = fresh();
    const link = path.join(root, `link-${n}.db`);
    await (await openSqliteLedger(real)).close();
    spawnSync('ln', ['-s', real, link]);
    const run = await openSqliteLedger(link, { writeBehind: true });
    try {
      await run.discover([{ id: 'a' }], { runId: owner, now: T0 });
      await run.settle(none, T0, { ids: ['a'], opts });
      expect(existsSync(journalPath(real))).toBe(true);
      expect(existsSync(journalPath(link))).toBe(false);
      expect(readFileSync(journalPath(real), 'utf8')).toContain('S\t"a"\t1');
    } finally {
      await run.close();
    }
  });
});
