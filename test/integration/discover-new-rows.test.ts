/**
 * Discovery of a batch of new ids (src/ledger/sqlite/discover.ts, allNew): written without
 * RETURNING, each row known from where SQLite puts a new one. Whatever the ledger held
 * before, the rows discovery hands out must be the ones RETURNING would have given: the
 * batch's pending, due rows in batch order, each with its own rowid and attempt counts.
 * Real SQLite (the migrated schema), no mocks.
 */
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { makeDiscover } from '../../src/ledger/sqlite/discover.js';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import { wellFormed } from '../../src/ledger/well-formed.js';

let db: Database.Database | undefined;
afterEach(() => {
  db?.close();
  db = undefined;
});

/** A migrated in-memory ledger whose executed statements are logged. */
function open(): { db: Database.Database; sql: string[] } {
  const sql: string[] = [];
  db = new Database(':memory:', { verbose: (s) => sql.push(String(s)) });
  migrate(db);
  return { db, sql };
}

type Row = { rowid: number; id: string; attempts: number; released: number; updated_at: number };

/** What a claim may take of `batch` now: its pending, due rows, in batch order, once each. */
function claimable(d: Database.Database, batch: string[], now: number): Row[] {
  const get = d.prepare(`SELECT rowid, id, attempts, released, updated_at FROM items WHERE id = ? AND state = 'pending' AND available_at <= ?`);
  const out: Row[] = [];
  const seen = new Set<string>();
  for (const id of batch.map(wellFormed)) {
    if (seen.has(id)) continue;
    seen.add(id);
    const r = get.get(id, now) as Row | undefined;
    if (r) out.push(r);
  }
  return out;
}

const sorted = (rows: readonly object[]) => rows.map((r) => JSON.stringify(Object.entries(r).sort(([a], [b]) => a.localeCompare(b))));

describe('discovery of new ids', () => {
  it('writes a batch of new ids without reading it back, and hands out each row as stored', () => {
    const { db: d, sql } = open();
    const discover = makeDiscover(d);
    sql.length = 0;
    const rows = discover(['b', 'a', 'c'].map((id) => ({ id })), { runId: 'pass-1', now: 1000 });
    expect(sql.filter((s) => /RETURNING/i.test(s))).toEqual([]);
    expect(sorted(rows)).toEqual(sorted(claimable(d, ['b', 'a', 'c'], 1000)));
    expect(rows.map((r) => r.id)).toEqual(['b', 'a', 'c']);
    // After rows were deleted at the end of the table, new ones reuse their rowids: still right.
    d.prepare(`DELETE FROM items WHERE id = 'c'`).run();
    const more = discover(['d', 'e'].map((id) => ({ id })), { runId: 'pass-1', now: 2000 });
    expect(sorted(more)).toEqual(sorted(claimable(d, ['d', 'e'], 2000)));
  });

  it('a batch with known ids hands out what a claim may take of it, and so do the batches after', () => {
    const { db: d } = open();
    const discover = makeDiscover(d);
    discover(['a', 'b'].map((id) => ({ id })), { runId: 'pass-1', now: 1000 });
    d.prepare(`UPDATE items SET state = 'done', done_at = 1000 WHERE id = 'a'`).run();
    const batch = ['c', 'a', 'b', 'd'];
    const rows = discover(batch.map((id) => ({ id })), { runId: 'pass-2', now: 2000 });
    expect(sorted(rows)).toEqual(sorted(claimable(d, batch, 2000)));
    expect(rows.map((r) => r.id)).toEqual(['c', 'b', 'd']);
    const next = discover(['e', 'b'].map((id) => ({ id })), { runId: 'pass-2', now: 3000 });
    expect(sorted(next)).toEqual(sorted(claimable(d, ['e', 'b'], 3000)));
  });

  it('writes a batch listed in a directory order into the id index in id order, and hands it out in batch order', () => {
    // A directory lists in its own order (hash order on ext4): written in that order, each
    // new id landed at a random place in the id index, and every commit rewrote most of its
    // pages. Rowids follow the order of writing: in id order, so are the ids in the index.
    const { db: d } = open();
    const discover = makeDiscover(d);
    const ids = (from: number) => Array.from({ length: 64 }, (_, i) => `item-${String(((i + from) * 37) % 101).padStart(4, '0')}.scc`);
    const first = ids(0);
    const rows = discover(first.map((id) => ({ id })), { runId: 'pass-1', now: 1000 });
    expect(rows.map((r) => r.id)).toEqual(first);
    expect(sorted(rows)).toEqual(sorted(claimable(d, first, 1000)));
    const byRowid = () => d.prepare(`SELECT id FROM items ORDER BY rowid`).pluck().all() as string[];
    expect(byRowid()).toEqual([...first].sort());
    // A batch with known ids (written with RETURNING): the new ones in id order as well.
    const second = ids(40);
    const more = discover(second.map((id) => ({ id })), { runId: 'pass-1', now: 2000 });
    expect(more.map((r) => r.id)).toEqual(second);
    expect(sorted(more)).toEqual(sorted(claimable(d, second, 2000)));
    const added = second.filter((id) => !first.includes(id));
    expect(added.length).toBeGreaterThan(0);
    expect(byRowid()).toEqual([...first].sort().concat([...added].sort()));
  });

  it('hands out what a claim may take of every batch, whatever the ledger held (property)', () => {
    // Ids from a small set, so batches meet known rows; each step may change rows between
    // batches the ways other verbs do (done, dead, claimed, backoff, forgotten).
    const id = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', '\ud800g', 'h\udc00', 'ü', '"q"', 'x\\ud');
    const step = fc.record({
      batch: fc.array(id, { minLength: 1, maxLength: 6 }),
      change: fc.constantFrom('none', 'done', 'dead', 'claimed', 'backoff', 'forget', 'forget-last'),
      target: id,
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 12 }), (steps) => {
        const d = new Database(':memory:');
        try {
          migrate(d);
          const discover = makeDiscover(d);
          let now = 1000;
          for (const s of steps) {
            now += 10;
            const rows = discover(s.batch.map((i) => ({ id: i })), { runId: 'pass', now });
            expect(sorted(rows)).toEqual(sorted(claimable(d, s.batch, now)));
            const t = wellFormed(s.target);
            if (s.change === 'done') d.prepare(`UPDATE items SET state = 'done', owner = NULL, done_at = ? WHERE id = ?`).run(now, t);
            if (s.change === 'dead') d.prepare(`UPDATE items SET state = 'dead', owner = NULL, dead_at = ? WHERE id = ?`).run(now, t);
            if (s.change === 'claimed') d.prepare(`UPDATE items SET state = 'claimed', owner = 'o', attempts = attempts + 1 WHERE id = ?`).run(t);
            if (s.change === 'backoff') d.prepare(`UPDATE items SET available_at = ?, attempts = attempts + 1, updated_at = ? WHERE id = ? AND state = 'pending'`).run(now + 1_000_000, now, t);
            if (s.change === 'forget') d.prepare(`DELETE FROM items WHERE id = ?`).run(t);
            if (s.change === 'forget-last') d.prepare(`DELETE FROM items WHERE rowid = (SELECT max(rowid) FROM items)`).run();
          }
        } finally {
          d.close();
        }
      }),
      { numRuns: 300 },
    );
  });
});
