import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { migrate } from '../../src/ledger/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/ledger/sqlite/migrations/index.js';
import type { DiscoverOptions, Ledger } from '../../src/ledger/types.js';
import { T0 } from '../contract/ledger-fixtures.js';

// Discovery on SQLite rewrote every row it found on every pass, done ones included (only to
// move seen_run to the pass): ~166 MiB of WAL per pass at 1,000,000 done files. A done row
// is now written only when its stat changed, it is marked missing, or its seen mark is a
// day old (src/ledger/sqlite/discover.ts, migration 006).

const HOUR = 3600 * 1000;
const DAY = 24 * HOUR;
/** An SQLite WAL: a 32-byte header, then frames of a 24-byte header and a 4 KiB page. */
const WAL_HEADER = 32;
const FRAME = 24 + 4096;

const root = mkdtempSync(join(tmpdir(), 'cronsafe-seen-'));
let n = 0;
const freshFile = (): string => join(root, `t${++n}`, 'state', 'cronsafe.db');
afterAll(() => rmSync(root, { recursive: true, force: true }));

const ids = (count: number, prefix = 'f'): string[] => Array.from({ length: count }, (_, i) => `${prefix}${String(i).padStart(5, '0')}`);

/** A pass's discovery of `found` (batches of 1,024, as a pass's), the new items claimed and completed. */
async function pass(ledger: Ledger, found: string[], opts: DiscoverOptions): Promise<string[]> {
  const claimable: string[] = [];
  for (let i = 0; i < found.length; i += 1024) {
    const got = await ledger.discover(found.slice(i, i + 1024).map((id) => ({ id })), opts);
    claimable.push(...got);
    const claims = await ledger.claim(got, { owner: 'o', runId: opts.runId, now: opts.now, leaseMs: 60_000 });
    await ledger.complete(claims, opts.now);
  }
  return claimable;
}

/** Pages `write` appends to the file's WAL (emptied first by a checkpoint of another connection). */
async function framesWritten(file: string, write: () => Promise<unknown>): Promise<number> {
  const side = new Database(file);
  try {
    expect(side.pragma('wal_checkpoint(TRUNCATE)')).toEqual([{ busy: 0, log: 0, checkpointed: 0 }]);
  } finally {
    side.close();
  }
  await write();
  return Math.max(0, (statSync(`${file}-wal`).size - WAL_HEADER) / FRAME);
}

/** Every column of every item, in id order, as another connection reads them. */
function rows(file: string): unknown[] {
  const side = new Database(file, { readonly: true });
  try {
    return side.prepare('SELECT * FROM items ORDER BY id').all();
  } finally {
    side.close();
  }
}

/** Walk markMissing over the whole ledger; the total marked. */
async function markAll(ledger: Ledger, passId: string, scanStartedAt: number): Promise<number> {
  let marked = 0;
  for (;;) {
    const s = await ledger.markMissing({ passId, scanStartedAt, now: scanStartedAt, limit: 1000 });
    marked += s.marked;
    if (s.wrapped) return marked;
  }
}

describe('SQLite discovery of done items writes only what changed', () => {
  it.each([false, true])('a pass that finds 5,000 done files unchanged writes no item row (write-behind %s); a day later once, then none again', async (writeBehind) => {
    const file = freshFile();
    const ledger = await openSqliteLedger(file, { writeBehind });
    const all = ids(5000);
    expect(await pass(ledger, all, { runId: 'p1', now: T0 })).toHaveLength(5000);
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 5000, dead: 0 });
    const before = rows(file);

    // An hour later (every 5 minutes, as a CronJob would, is the same): nothing to write
    // but the pass's name in meta, one page. Before, every row (~80 pages here) each pass.
    expect(await framesWritten(file, () => pass(ledger, all, { runId: 'p2', now: T0 + HOUR }))).toBeLessThanOrEqual(2);
    expect(rows(file)).toEqual(before);

    // A day after they were last written, each gets its seen mark once (retention reads it)...
    expect(await framesWritten(file, () => pass(ledger, all, { runId: 'p3', now: T0 + DAY + HOUR }))).toBeGreaterThan(50);
    const after = rows(file) as { seen_run: string; seen_at: number }[];
    expect(after.every((r) => r.seen_run === 'p3' && r.seen_at === T0 + DAY + HOUR)).toBe(true);
    // ... and the passes after that day write nothing again.
    expect(await framesWritten(file, () => pass(ledger, all, { runId: 'p4', now: T0 + DAY + 2 * HOUR }))).toBeLessThanOrEqual(2);
    expect(rows(file)).toEqual(after);
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 5000, dead: 0 });
    await ledger.close();
  });

  it('still writes a done row that changed (its stat), and one marked missing (the mark goes)', async () => {
    const file = freshFile();
    const ledger = await openSqliteLedger(file);
    await pass(ledger, ['a', 'b', 'c'], { runId: 'p1', now: T0 });
    // b's file is gone for a complete scan a day and more later: marked.
    await pass(ledger, ['a', 'c'], { runId: 'p2', now: T0 + 2 * DAY });
    expect(await markAll(ledger, 'p2', T0 + 2 * DAY)).toBe(1);
    // An hour later: b is back, c changed (no refresh policy: recorded, not redone), a is as it was.
    expect(await ledger.discover([{ id: 'a' }, { id: 'b' }, { id: 'c', size: 7 }], { runId: 'p3', now: T0 + 2 * DAY + HOUR })).toEqual([]);
    const byId = new Map((rows(file) as { id: string; seen_run: string; size: number | null; missing_since: number | null }[]).map((r) => [r.id, r]));
    expect(byId.get('a')).toMatchObject({ seen_run: 'p2', missing_since: null });
    expect(byId.get('b')).toMatchObject({ seen_run: 'p3', missing_since: null });
    expect(byId.get('c')).toMatchObject({ seen_run: 'p3', size: 7 });
    expect(await markAll(ledger, 'p3', T0 + 2 * DAY + HOUR)).toBe(0);
    // The clock stepped back a day: a seen mark in the future is written again, at now.
    await ledger.discover([{ id: 'a' }], { runId: 'p4', now: T0 + DAY });
    expect(rows(file)[0]).toMatchObject({ id: 'a', seen_run: 'p4', seen_at: T0 + DAY });
    expect(await ledger.forgetMissing({ before: T0 + 100 * DAY, limit: 10 })).toBe(0);
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
    await ledger.close();
  });

  it.each([
    ['on-change (the file changed)', { onChange: true }],
    ['every occurrence (done before this one)', { onChange: false, doneBefore: T0 + 30 * 60_000 }],
  ])("a done row that a refresh policy (%s) makes pending is the pass's: claimed by its sweep, not forgotten by its end of scan", async (name, refresh) => {
    const ledger = await openSqliteLedger(freshFile());
    const opts = { owner: 'o', leaseMs: 60_000 };
    const first = await ledger.discover([{ id: 'a', size: 1 }, { id: 'b', size: 1 }], { runId: 'p1', now: T0 });
    await ledger.complete(await ledger.claim(first, { ...opts, runId: 'p1', now: T0 }), T0);
    // a's file changed, seen by a pass without the policy (its stat recorded, not redone).
    await ledger.discover([{ id: 'a', size: 9 }], { runId: 'p2', now: T0 + 60_000 });
    // An hour later, with the policy: discovery does not rewrite these rows (done, seen less
    // than a day ago, the stat it has), so the policy's write must give them the pass.
    const now = T0 + HOUR;
    const onChange = name.startsWith('on-change');
    expect(await ledger.discover([{ id: 'a', size: 9 }, { id: 'b', size: 1 }], { runId: 'p3', now, refresh })).toEqual(onChange ? ['a'] : ['a', 'b']);
    expect(await ledger.forgetUnseen('p3')).toBe(0);
    const swept = await ledger.claimDue({ ...opts, runId: 'p3', now, limit: 10 });
    expect(swept.map((c) => [c.id, c.attempt])).toEqual(onChange ? [['a', 1]] : [['a', 1], ['b', 1]]);
    await ledger.close();
  });

  // Dead letters were still rewritten by every pass that found their files (only to move
  // their seen mark): with many of them, every pass wrote them all.
  it.each([false, true])('a pass that finds 5,000 dead letters unchanged writes no item row (write-behind %s); a retried one is swept by the running pass, never forgotten', async (writeBehind) => {
    const file = freshFile();
    const ledger = await openSqliteLedger(file, { writeBehind });
    const all = ids(5000);
    // The default retry policy (retry.maxAttempts 5, backoff 30 s up to an hour): five
    // passes two hours apart, each failing every item once.
    const retry = { maxAttempts: 5, backoffMs: 30_000, backoffMaxMs: HOUR };
    let now = T0;
    for (let attempt = 1; attempt <= retry.maxAttempts; attempt++, now += 2 * HOUR) {
      const runId = `k${attempt}`;
      for (let i = 0; i < all.length; i += 1024) {
        const got = await ledger.discover(all.slice(i, i + 1024).map((id) => ({ id })), { runId, now });
        const claims = await ledger.claim(got, { owner: 'o', runId, now, leaseMs: 60_000 });
        await ledger.fail(claims.map((claim) => ({ claim, error: 'boom' })), { now, retry, random: () => 0 });
      }
    }
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 0, dead: 5000 });
    const before = rows(file);

    // An hour later: nothing to write but the pass's name in meta. Before, every dead row.
    expect(await framesWritten(file, () => pass(ledger, all, { runId: 'p1', now: now + HOUR }))).toBeLessThanOrEqual(2);
    expect(rows(file)).toEqual(before);
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 0, dead: 5000 });

    // A pass scans past two dead letters, then the operator retries them (one by id, the
    // rest with --all): pending again, they are the running pass's, so its end of scan
    // does not take them for deleted files and its sweep claims them (attempt 1).
    const runId = 'p2';
    const later = now + 2 * HOUR;
    expect(await pass(ledger, all, { runId, now: later })).toEqual([]);
    expect(await ledger.retryDead([all[7]!], later)).toBe(1);
    expect(await ledger.retryDead('all', later)).toBe(4999);
    expect(await ledger.forgetUnseen(runId)).toBe(0);
    const swept = await ledger.claimDue({ owner: 'o', runId, now: later, leaseMs: 60_000, limit: 10_000 });
    expect(swept).toHaveLength(5000);
    expect(swept.every((c) => c.attempt === 1)).toBe(true);
    await ledger.close();
  });

  it('a ledger from the previous version (schema 5) upgrades in place: nothing redone, nothing marked missing that a scan finds', async () => {
    const file = freshFile();
    await (await openSqliteLedger(file)).close(); // makes its directory
    rmSync(file);
    const db = new Database(file);
    migrate(db, MIGRATIONS.filter((m) => m.version <= 5));
    // Rows as the previous version left them: every one carries the last pass that found it.
    const item = db.prepare(`INSERT INTO items (id, state, attempts, available_at, first_seen_at, updated_at, done_at, dead_at, seen_run, last_error)
      VALUES (?, ?, ?, 0, 0, ?, ?, ?, 'old-pass', ?)`);
    const done = ids(3000, 'done-');
    db.transaction(() => {
      for (const id of done) item.run(id, 'done', 1, 5, 5, null, null);
      item.run('gone', 'done', 1, 5, 5, null, null);
      item.run('waiting', 'pending', 1, 5, null, null, 'boom');
      item.run('broken', 'dead', 3, 5, null, 5, 'boom');
    })();
    db.close();

    const ledger = await openSqliteLedger(file);
    const side = new Database(file, { readonly: true });
    expect(side.prepare('SELECT max(version) FROM schema_migrations').pluck().get()).toBe(6);
    expect(side.prepare('SELECT count(*) FROM items WHERE seen_at IS NOT NULL').pluck().get()).toBe(0);
    side.close();
    const before = await ledger.attemptTotals();

    // The first pass after the upgrade finds every file but gone's: only the pending one is
    // claimable; each done row it finds gets its seen mark (once), so the complete scan's
    // walk marks gone alone.
    const found = [...done, 'waiting', 'broken'];
    expect(await pass(ledger, found, { runId: 'p1', now: T0 })).toEqual(['waiting']);
    expect(await ledger.get('waiting')).toMatchObject({ state: 'done', attempts: 2 });
    expect(await ledger.get(done[0]!)).toMatchObject({ state: 'done', attempts: 1 });
    expect(await ledger.get('broken')).toMatchObject({ state: 'dead' });
    expect(await ledger.forgetUnseen('p1')).toBe(0);
    expect(await markAll(ledger, 'p1', T0)).toBe(1);
    expect(await ledger.forgetMissing({ before: T0 + 1, limit: 10 })).toBe(1);
    expect(await ledger.get('gone')).toBeNull();
    expect((await ledger.attemptTotals()).succeeded).toBe(before.succeeded + 1);

    // The next pass writes no item row.
    expect(await framesWritten(file, () => pass(ledger, found, { runId: 'p2', now: T0 + HOUR }))).toBeLessThanOrEqual(2);
    expect(await markAll(ledger, 'p2', T0 + HOUR)).toBe(0);
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 3001, dead: 1 });
    await ledger.close();
  });
});
