/**
 * The rowid discovery reads is a hint for the write-behind flush (finish.ts
 * START_AND_COMPLETE_BY_ROWID_SQL): it finds the row without the id index, but a rowid that
 * names another row (renumbered, or simply wrong) must apply nothing, so the record goes
 * the two-step way and the outcome is what it would have been without the hint.
 * Real SQLite (the migrated schema), no mocks.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { makeCounters } from '../../src/ledger/sqlite/counters.js';
import { makeDiscover } from '../../src/ledger/sqlite/discover.js';
import { makeFinishOps } from '../../src/ledger/sqlite/finish.js';
import { migrate } from '../../src/ledger/sqlite/migrate.js';

let db: Database.Database;
afterEach(() => db?.close());

function ledger() {
  db = new Database(':memory:');
  migrate(db);
  const discover = makeDiscover(db);
  const finish = makeFinishOps(db, makeCounters(db));
  const rows = discover(['a', 'b', 'c'].map((id) => ({ id })), { runId: 'pass-1', now: 1000 });
  const row = (id: string) => db.prepare('SELECT rowid, state, attempts, owner, done_at FROM items WHERE id = ?').get(id) as { rowid: number; state: string; attempts: number };
  return { rows, finish, row };
}

describe('the rowid hint of discovered rows', () => {
  it('discovery hands out each row with its own rowid', () => {
    const { rows, row } = ledger();
    expect(rows.map((r) => r.id)).toEqual(['a', 'b', 'c']);
    for (const r of rows) expect(r.rowid).toBe(row(r.id).rowid);
  });

  it('a start and its success go pending -> done by rowid', () => {
    const { rows, finish, row } = ledger();
    const a = rows[0]!;
    const applied = db.transaction(() => finish.startAndCompleteIn([{ id: 'a', attempt: 1, at: 1000, rowid: a.rowid, doneAt: 2000 }]))();
    expect([...applied]).toEqual(['a']);
    expect(row('a')).toMatchObject({ state: 'done', attempts: 1, done_at: 2000 });
  });

  it('a rowid that names another row applies nothing, to either row', () => {
    const { finish, row } = ledger();
    const wrong = row('b').rowid;
    const applied = db.transaction(() => finish.startAndCompleteIn([{ id: 'a', attempt: 1, at: 1000, rowid: wrong, doneAt: 2000 }]))();
    expect(applied.size).toBe(0);
    expect(row('a')).toMatchObject({ state: 'pending', attempts: 0 });
    expect(row('b')).toMatchObject({ state: 'pending', attempts: 0 });
    // Without the hint (what a replay sends), by id as before; mixed batches take both ways.
    const both = db.transaction(() =>
      finish.startAndCompleteIn(
        [
          { id: 'a', attempt: 1, at: 1000, doneAt: 2000 },
          { id: 'c', attempt: 1, at: 1000, rowid: row('c').rowid, doneAt: 2000 },
        ],
      ),
    )();
    expect([...both].sort()).toEqual(['a', 'c']);
    expect(row('a')).toMatchObject({ state: 'done', attempts: 1 });
    expect(row('b')).toMatchObject({ state: 'pending', attempts: 0 });
  });
});
